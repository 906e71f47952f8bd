// Package servers is the fault campaign's backends: the server processes
// each runs (etcd, the kube-apiserver, nats-server, PostgreSQL), the
// toxiproxy proxies between them and the workers, and how each fault of
// the schedule is applied to them.
package servers
