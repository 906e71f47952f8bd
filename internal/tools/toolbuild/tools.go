package toolbuild

// The servers the tests, the benchmarks and the fault campaign run as
// processes, each from its tools module.
var (
	// Etcd36 is the etcd v3.6 server: TENURE_ETCD36_SERVER, or the binary
	// its tools module's build.sh builds and caches.
	Etcd36 = Tool{Env: "TENURE_ETCD36_SERVER", Script: "backends/etcd/etcdtest/etcdserver36/build.sh"}
	// Etcd37 is the etcd v3.7 server the etcd store's tests also run
	// against: TENURE_ETCD_SERVER, or the binary its build.sh builds.
	Etcd37 = Tool{Env: "TENURE_ETCD_SERVER", Script: "backends/etcd/etcdtest/etcdserver/build.sh"}
	// KubeAPIServer is the kube-apiserver: TENURE_KUBE_APISERVER, or the
	// binary its build.sh builds (a cold build takes several minutes).
	KubeAPIServer = Tool{Env: "TENURE_KUBE_APISERVER", Script: "backends/kube/kubetest/apiserver/build.sh"}
)
