package kubetest_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tenure-go/tenure/backends/kube/kubetest"
	"github.com/tenure-go/tenure/internal/childproc/childproctest"
)

// TestServerOutlivesStartingThread checks that the API server outlives the
// thread the test started it from: the Go runtime may end that thread at any
// time, and a server killed with it would fail the test that uses it at
// random.
func TestServerOutlivesStartingThread(t *testing.T) {
	var s *kubetest.Server
	childproctest.OnRetiredThread(t, func() { s = kubetest.Start(t) })
	if s == nil {
		return
	}
	// Only a live server answers; one sent SIGKILL when the thread ended
	// cannot. The bound only ends a failing test.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kubernetes.NewForConfigOrDie(s.RESTConfig()).CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("get a namespace once the thread that started the server ended: %v", err)
	}
}
