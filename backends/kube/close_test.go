package kube_test

import (
	"context"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends/kube"
	"k8s.io/client-go/kubernetes/fake"
)

// TestCloseEndsWatchOfFake checks that Close returns, and closes the watch's
// channel, over a client whose watches do not end when their ctx does
// (client-go's fake clientset); so does ending the last consumer's ctx.
// Before, the stream's goroutine waited for the watch's results channel to
// close, and Close waited for that goroutine for good.
func TestCloseEndsWatchOfFake(t *testing.T) {
	for _, end := range []string{"close", "cancel"} {
		t.Run(end, func(t *testing.T) {
			s, err := kube.New(fake.NewClientset(), kube.WithNamespace("ns"))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ch, err := s.Watch(ctx, "")
			if err != nil {
				t.Fatalf("Watch: %v", err)
			}
			closed := make(chan struct{})
			go func() {
				defer close(closed)
				if end == "cancel" {
					cancel()
					for range ch {
					}
				}
				s.Close()
				for range ch {
				}
			}()
			// Without a bound, a failure would hang the package until its timeout.
			watchdog, stop := context.WithTimeout(context.Background(), 10*time.Second)
			defer stop()
			select {
			case <-closed:
			case <-watchdog.Done():
				t.Fatalf("%s: the watch did not end within 10 s", end)
			}
		})
	}
}
