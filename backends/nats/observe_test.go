package nats

import (
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/nats/natstest"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
)

// TestObserver follows a claim with elector.Observe on a real server, over
// a store of its own: it sees a holder and the value it advertises, the
// release, a holder's expiry and a new holder at a greater token.
func TestObserver(t *testing.T) {
	srv := natstest.Start(t)
	bucket := newBucketName()
	locker := func() backends.Locker {
		l, err := backends.NewLocker(open(t, srv.URL(), bucket, 1))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	d := electortest.ObserverScenario(t, locker(), locker(), "observed", electTTL, 30*time.Second)
	t.Logf("observer delays: elected %v, released %v, expired %v after the TTL", d.Elected, d.Released, d.Expired)
}
