package pgproc

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStartBesideRemoveTemplate checks that a campaign removes the template
// when it ends while another, beside it, may be starting a server from it. A
// start must still get a whole copy (before, the copy failed or started from
// a directory being removed).
func TestStartBesideRemoveTemplate(t *testing.T) {
	defer RemoveTemplate()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				RemoveTemplate()
			}
		}
	})
	defer func() {
		close(stop)
		wg.Wait()
	}()
	for range 2 {
		s, err := Start()
		if err != nil {
			t.Fatalf("Start beside RemoveTemplate: %v", err)
		}
		s.Remove()
	}
}

// TestFailoverAndRebuild goes through the failover the campaign's
// postgres-ha mode repeats: a synchronous standby streams; the primary is
// killed and the standby promoted, and a row committed before the kill is
// on it; the old primary, rebuilt from a base backup of the new one,
// streams from it as its synchronous standby, and the new primary's
// commits return.
func TestFailoverAndRebuild(t *testing.T) {
	defer RemoveTemplate()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Remove()
	b, err := StartStandby(a)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.SetSynchronous(ctx, true))
	must(a.WaitStandbys(ctx, 1, true))
	must(a.Exec(ctx, "CREATE TABLE kept AS SELECT 1 AS x"))
	must(a.Kill())
	must(b.Promote(ctx))
	must(b.Exec(ctx, "SELECT x FROM kept"))
	must(a.Rebuild(b))
	must(b.SetSynchronous(ctx, true))
	must(a.Restart())
	must(b.WaitStandbys(ctx, 1, true))
	must(b.Exec(ctx, "INSERT INTO kept VALUES (2)"))
}
