package kubetest_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends/kube/kubetest"
	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestServer checks what the kube backend's tests rely on: the server
// enforces resourceVersion preconditions, refuses the unprivileged user,
// keeps objects across a restart on the same address, and the kubeconfig
// file is complete.
func TestServer(t *testing.T) {
	s := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	admin := kubernetes.NewForConfigOrDie(s.RESTConfig())
	leases := admin.CoordinationV1().Leases("default")
	holder := "a"
	created, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create: got %v, want AlreadyExists", err)
	}
	upd := created.DeepCopy()
	upd.Spec.HolderIdentity = new(string)
	if _, err := leases.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update: %v", err)
	}
	if _, err := leases.Update(ctx, created, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("stale update: got %v, want Conflict", err)
	}

	nobody := kubernetes.NewForConfigOrDie(s.UnprivilegedRESTConfig())
	if _, err := nobody.CoordinationV1().Leases("default").Get(ctx, "probe", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("unprivileged get: got %v, want Forbidden", err)
	}

	s.Restart(t)
	got, err := leases.Get(ctx, "probe", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get after restart: %v", err)
	}
	if got.Spec.HolderIdentity == nil || *got.Spec.HolderIdentity != "" {
		t.Errorf("after restart holder = %v, want the updated empty holder", got.Spec.HolderIdentity)
	}

	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := s.WriteKubeconfig(path); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	cfg.Dial = s.RESTConfig().Dial // closed with the server, like every config it hands out
	fromFile := kubernetes.NewForConfigOrDie(cfg)
	if _, err := fromFile.CoordinationV1().Leases("default").Get(ctx, "probe", metav1.GetOptions{}); err != nil {
		t.Errorf("get through the kubeconfig: %v", err)
	}
}
