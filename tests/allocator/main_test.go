// Package servertest runs the allocator against real servers: an etcd
// server process and a real kube-apiserver. It holds only tests, kept
// apart so that the allocator's own tests do not start the servers.
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
