package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRestart checks that a restarted server is on the same port and keeps
// its streams, and a client that rode out the restart reaches it again.
func TestRestart(t *testing.T) {
	s := Start(t)
	url := s.URL()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b"})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := kv.Put(ctx, "k", []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	s.Restart()
	if s.URL() != url {
		t.Errorf("URL after Restart = %s, want %s", s.URL(), url)
	}
	for {
		e, err := kv.Get(ctx, "k")
		if err == nil {
			if e.Revision() != rev {
				t.Errorf("revision after Restart = %d, want %d", e.Revision(), rev)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("Get after Restart: %v", err)
		}
	}
}
