package etcd_test

import (
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
)

// TestObserver follows a claim with elector.Observe on a real server, over
// a store (a client) of its own: it sees a holder and the value it
// advertises, the release and the expiry (both etcd watch events: a
// delete, and the lease's keys deleted when it expires) and a new holder
// at a greater token.
func TestObserver(t *testing.T) {
	f := newFixture(t)
	observe, err := backends.NewLocker(f.peer(t))
	if err != nil {
		t.Fatal(err)
	}
	claims, err := backends.NewLocker(f.store)
	if err != nil {
		t.Fatal(err)
	}
	const ttl = time.Second // the server's minimum lease is below it
	d := electortest.ObserverScenario(t, observe, claims, "observed", ttl, 30*time.Second)
	t.Logf("observer delays: elected %v, released %v, expired %v after the TTL", d.Elected, d.Released, d.Expired)
}
