package toolbuild

// Etcd36 is the etcd v3.6 server the tests and the fault campaign run as
// processes: TENURE_ETCD36_SERVER, or the binary its tools module's
// build.sh builds and caches.
var Etcd36 = Tool{Env: "TENURE_ETCD36_SERVER", Script: "backends/etcd/etcdtest/etcdserver36/build.sh"}
