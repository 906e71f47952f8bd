// Package servertest runs shard groups against real servers: an etcd
// server process (with and without a shared lease) and a real
// kube-apiserver. It holds only tests and benchmarks, kept apart so that
// the shards package's own tests do not start the servers.
package servertest

import (
	"testing"

	"github.com/go-logr/logr"
	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"
)

func TestMain(m *testing.M) {
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m, etcdtest.LeakOptions()...)
}
