package kube

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/go-logr/logr"
	"github.com/tenure-go/tenure/backends/kube/kubetest"
	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

func TestMain(m *testing.M) {
	// client-go's leaderelection and reflectors log through klog; the
	// benchmarks would print a line per election.
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m)
}

// cluster is one real API server shared by the subtests of a test, with an
// admin client for setting up namespaces and fixtures.
type cluster struct {
	srv   *kubetest.Server
	admin kubernetes.Interface
	nsSeq *atomic.Int64
	opts  []Option // every store opened through the cluster gets these first
}

func startCluster(t testing.TB) *cluster {
	t.Helper()
	srv := kubetest.Start(t)
	return &cluster{srv: srv, admin: kubernetes.NewForConfigOrDie(srv.RESTConfig()), nsSeq: new(atomic.Int64)}
}

// with is the same cluster, opening its stores with opts (a renewal mode).
func (c *cluster) with(opts []Option) *cluster {
	return &cluster{srv: c.srv, admin: c.admin, nsSeq: c.nsSeq, opts: opts}
}

// namespace creates a fresh namespace, so that each store under test lists
// and watches only its own objects.
func (c *cluster) namespace(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d", c.nsSeq.Add(1))
	_, err := c.admin.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// store opens a Store as another process would: its own client, its own
// sightings. cfg defaults to the admin config.
func (c *cluster) store(t testing.TB, ns string, clk clock.Clock, cfg *rest.Config, opts ...Option) *Store {
	t.Helper()
	if cfg == nil {
		cfg = c.srv.RESTConfig()
	}
	opts = append(append([]Option{WithNamespace(ns), WithClock(clk)}, c.opts...), opts...)
	s, err := New(kubernetes.NewForConfigOrDie(cfg), opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// lease reads the raw object behind key in s's namespace.
func (c *cluster) lease(t testing.TB, s *Store, key string) *coordinationv1.Lease {
	t.Helper()
	l, err := c.admin.CoordinationV1().Leases(s.namespace).Get(context.Background(), s.LeaseName(key), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get lease of %q: %v", key, err)
	}
	return l
}

// renewed reads the object a keep-alive of key rewrites: its claim's
// session, or in per-claim mode the claim itself.
func (c *cluster) renewed(t testing.TB, s *Store, key string) *coordinationv1.Lease {
	t.Helper()
	l := c.lease(t, s, key)
	name := l.Labels[LabelSession]
	if name == "" {
		return l
	}
	sess, err := c.admin.CoordinationV1().Leases(s.namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get session %s of %q: %v", name, key, err)
	}
	return sess
}

// follow keeps a watch open on s for its whole life, as a follower does, so
// that s sees every change as it happens rather than at its next read.
// Stores whose expiry is judged by observation need that to agree with each
// other about when an entry expired.
func follow(t testing.TB, s *Store) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := s.Watch(ctx, "")
	if err != nil {
		cancel()
		t.Fatalf("Watch: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range ch {
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// syncWatches makes sure every following store in the namespaces of stores
// has seen every write made so far: it writes a marker object (labelled, so
// the watches carry it, but holding no key) and waits until each running
// watch has handled it. Tests call it before moving a fake clock, so that
// time passes after the stores saw what happened before it.
func (c *cluster) syncWatches(ctx context.Context, stores []*Store) error {
	byNS := map[string][]*Store{}
	for _, s := range stores {
		byNS[s.namespace] = append(byNS[s.namespace], s)
	}
	for ns, ss := range byNS {
		leases := c.admin.CoordinationV1().Leases(ns)
		marker := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "sync", Labels: map[string]string{LabelManaged: "true"}}}
		l, err := leases.Get(ctx, marker.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			l, err = leases.Create(ctx, marker, metav1.CreateOptions{})
		case err == nil:
			l.Spec.LeaseTransitions = ptr(int32(1) + deref(l.Spec.LeaseTransitions))
			l, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("sync marker in %s: %w", ns, err)
		}
		rv, err := parseRV(l.ResourceVersion)
		if err != nil {
			return err
		}
		for _, s := range ss {
			if err := waitFor(ctx, func() bool { return s.closedOrCaughtUp(rv) }); err != nil {
				return fmt.Errorf("store in %s: watch did not reach resourceVersion %d: %w", ns, rv, err)
			}
		}
	}
	return nil
}

// closedOrCaughtUp: a closed store needs no syncing.
func (s *Store) closedOrCaughtUp(rv int64) bool {
	if s.checkOpen() != nil {
		return true
	}
	return s.hub.caughtUp(rv)
}

// waitFor polls cond, on real time, until it holds or 10s pass. It waits for
// the watch goroutines of stores, which run on real time whatever clock the
// stores judge expiry by.
func waitFor(ctx context.Context, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// fleet tracks the open stores of a test, for syncWatches.
type fleet struct {
	mu     sync.Mutex
	stores map[*Store]bool
}

func (f *fleet) add(t testing.TB, s *Store) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stores == nil {
		f.stores = map[*Store]bool{}
	}
	f.stores[s] = true
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.stores, s)
	})
}

func (f *fleet) all() []*Store {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*Store, 0, len(f.stores))
	for s := range f.stores {
		out = append(out, s)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
