package etcdtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
