package health_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/health"
)

// A service mounts the liveness handler for every process and, only if
// traffic must reach the leader alone, a readiness handler with
// RequireLeader. Real programs use the real clock (the default) and
// http.ListenAndServe.
func Example() {
	clk := clocktest.New(time.Time{})
	store := memstore.New(memstore.WithClock(clk))
	defer store.Close()
	locker, err := backends.NewLocker(store)
	if err != nil {
		panic(err)
	}
	elected := make(chan struct{})
	e, err := elector.New(locker, elector.Config{
		Key:       "indexer/leader",
		Identity:  "host-a",
		Clock:     clk,
		OnElected: func(ctx context.Context, _ elector.Term) { close(elected); <-ctx.Done() },
	})
	if err != nil {
		panic(err)
	}
	if err := e.Start(context.Background()); err != nil {
		panic(err)
	}
	defer e.Stop(context.Background())
	<-elected

	mux := http.NewServeMux()
	mux.Handle("/healthz", health.New(e, health.Config{Key: "indexer/leader", Clock: clk}))
	mux.Handle("/ready", health.New(e, health.Config{Key: "indexer/leader", Clock: clk, RequireLeader: true}))

	for _, path := range []string{"/healthz", "/ready"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		var rep health.Report
		if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
			panic(err)
		}
		fmt.Printf("%s %d: %s, state %s, token %d, deadline in %.2fs\n", path, rec.Code, rep.Status, rep.State, rep.Token, *rep.DeadlineLeft)
	}
	// Output:
	// /healthz 200: ok, state leader, token 1, deadline in 14.85s
	// /ready 200: ok, state leader, token 1, deadline in 14.85s
}
