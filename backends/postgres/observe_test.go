package postgres_test

import (
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/testrig/electortest"
)

// TestObserver follows a claim with elector.Observe on a real server, over
// a store (a pool) of its own: it sees a holder and the value it
// advertises, the release (by LISTEN/NOTIFY), a holder's expiry (judged by
// the observer's own sightings, with no expiry events) and a new holder
// at a greater token.
func TestObserver(t *testing.T) {
	srv := sharedServer(t)
	dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
	observe, claims := newLocker(t, open(t, dsn, tbl)), newLocker(t, open(t, dsn, tbl))
	d := electortest.ObserverScenario(t, observe, claims, "observed", electionTTL, 30*time.Second)
	t.Logf("observer delays: elected %v, released %v, expired %v after the TTL", d.Elected, d.Released, d.Expired)
}
