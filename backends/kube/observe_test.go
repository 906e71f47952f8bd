package kube

import (
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
)

// testObserver follows a claim with elector.Observe on a real API server,
// over a store of its own: it sees a holder and the value it advertises
// (in the Lease's value annotation), the release (a watch event), a
// holder's expiry (the observer's own store judging it, a TTL after its
// first sighting) and a new holder at a greater token.
func testObserver(t *testing.T, c *cluster) {
	ns := c.namespace(t)
	wall := clock.New()
	observe, claims := newLocker(t, c.store(t, ns, wall, nil)), newLocker(t, c.store(t, ns, wall, nil))
	d := electortest.ObserverScenario(t, observe, claims, "observed", ttl, 30*time.Second)
	t.Logf("observer delays: elected %v, released %v, expired %v after the TTL", d.Elected, d.Released, d.Expired)
}
