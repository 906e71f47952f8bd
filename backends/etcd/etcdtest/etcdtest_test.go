package etcdtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"github.com/tenure-go/tenure/internal/childproc/childproctest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.LeakOptions()...) }

func TestStartRestart(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if _, err := cli.Put(ctx, "k", "v1"); err != nil {
		t.Fatalf("put: %v", err)
	}
	before := srv.Endpoints()[0]

	srv.Stop()
	down, cancelDown := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := cli.Get(down, "k")
	cancelDown()
	if err == nil {
		t.Fatalf("get from a stopped server: got no error, want one")
	}

	srv.Restart(t)
	if after := srv.Endpoints()[0]; after != before {
		t.Errorf("endpoint after restart = %s, want %s", after, before)
	}
	resp, err := cli.Get(ctx, "k")
	if err != nil {
		t.Fatalf("get after restart: %v", err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v1" {
		t.Fatalf("get after restart = %v, want k=v1", resp.Kvs)
	}
}

func TestCluster(t *testing.T) {
	c := etcdtest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lead, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h := (lead + 1) % c.Size()
	cli := c.Client(t, h)
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put through member %d: %v", h, err)
	}

	// Blackholed: requests hang until their deadline.
	c.Blackhole(h)
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = cli.Get(short, "k")
	cancelShort()
	if err == nil {
		t.Errorf("get through a blackholed bridge: no error, want a timeout")
	}
	c.Unblackhole(h)
	if _, err := cli.Get(ctx, "k"); err != nil {
		t.Errorf("get after unblackhole: %v", err)
	}

	// Partitioned: the member loses its leader and refuses linearizable
	// reads; healed, it serves again.
	c.Partition(h)
	failed := false
	for i := 0; i < 50 && !failed; i++ {
		short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
		_, err := cli.Get(short, "k")
		cancelShort()
		failed = err != nil
	}
	if !failed {
		t.Errorf("linearizable gets on a partitioned member kept succeeding")
	}
	c.Heal(h)
	if _, err := cli.Get(ctx, "k"); err != nil {
		t.Errorf("get after heal: %v", err)
	}

	// Stopped and restarted: the data survives and the client reconnects.
	c.Stop(h)
	c.Restart(t, h)
	resp, err := cli.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 {
		t.Errorf("get after restart = %v, %v; want k", resp, err)
	}
}

func TestProcessStartRestart(t *testing.T) {
	p := etcdtest.StartProcess(t, etcdtest.ServerBinary(t))
	t.Logf("etcd %s", p.Version(t))
	cli := p.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v1"); err != nil {
		t.Fatalf("put: %v", err)
	}
	p.Restart(t)
	resp, err := cli.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v1" {
		t.Fatalf("get after restart: %v, %v; want v1", resp, err)
	}
}

// TestProcessOutlivesStartingThread checks that an etcd process outlives the
// thread the test started it from: the Go runtime may end that thread at any
// time.
func TestProcessOutlivesStartingThread(t *testing.T) {
	bin := etcdtest.ServerBinary(t)
	var p *etcdtest.Process
	childproctest.OnRetiredThread(t, func() { p = etcdtest.StartProcess(t, bin) })
	if p == nil {
		return
	}
	// Only a live server answers; one sent SIGKILL when the thread ended
	// cannot. The bound only ends a failing test.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := p.Client(t).Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put once the thread that started the server ended: %v", err)
	}
}

// TestProcessCluster checks that a cluster of etcd processes elects a leader,
// serves through its bridges, cuts a member off from the others and heals it,
// survives its leader's crash, and a member restarted on its data serves
// again.
func TestProcessCluster(t *testing.T) {
	c := etcdtest.StartProcessCluster(t, etcdtest.ServerBinary(t), 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lead, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h := (lead + 1) % c.Size()
	cli := c.Client(t, h)
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put through member %d: %v", h, err)
	}

	// Partitioned: the member loses its leader and refuses linearizable
	// reads; healed, it serves again.
	c.Partition(h)
	failed := false
	for i := 0; i < 50 && !failed; i++ {
		short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
		_, err := cli.Get(short, "k")
		cancelShort()
		failed = err != nil
	}
	if !failed {
		t.Errorf("linearizable gets on a partitioned member kept succeeding")
	}
	c.Heal(h)
	if _, err := cli.Get(ctx, "k"); err != nil {
		t.Errorf("get after heal: %v", err)
	}

	c.Stop(lead)
	if nl, err := c.WaitLeader(ctx); err != nil || nl == lead {
		t.Fatalf("leader after member %d's crash = %d, %v; want another", lead, nl, err)
	}
	c.Restart(t, lead)
	resp, err := c.Client(t, lead).Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 {
		t.Errorf("get from the restarted member = %v, %v; want k", resp, err)
	}
}
