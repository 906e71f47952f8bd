package metrics_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/metrics"
)

// One Metrics serves every elector of the process; each gets the hooks for
// its key, joined here with a hook of the program's own. A real program
// registers with prometheus.DefaultRegisterer, serves promhttp.Handler()
// on /metrics and uses the real clock (the default).
func Example() {
	clk := clocktest.New(time.Time{})
	store := memstore.New(memstore.WithClock(clk))
	defer store.Close()
	locker, err := backends.NewLocker(store)
	if err != nil {
		panic(err)
	}

	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.WithClock(clk))
	if err != nil {
		panic(err)
	}
	elected := make(chan struct{})
	e, err := elector.New(locker, elector.Config{
		Key:      "indexer/leader",
		Identity: "host-a",
		Clock:    clk,
		Trace: metrics.Join(m.Trace("indexer/leader"), elector.Trace{
			ElectionWon: func(elector.Term, time.Duration) { close(elected) },
		}),
	})
	if err != nil {
		panic(err)
	}
	if err := e.Start(context.Background()); err != nil {
		panic(err)
	}
	defer e.Stop(context.Background())
	<-elected

	// Scrape, as Prometheus would.
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		for _, name := range []string{"tenure_leader{", "tenure_elections_won_total{", "tenure_deadline_remaining_seconds{"} {
			if strings.HasPrefix(line, name) {
				fmt.Println(line)
			}
		}
	}
	// Output:
	// tenure_deadline_remaining_seconds{key="indexer/leader"} 14.85
	// tenure_elections_won_total{key="indexer/leader"} 1
	// tenure_leader{key="indexer/leader"} 1
}
