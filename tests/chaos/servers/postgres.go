package servers

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/tenure-go/tenure/internal/testrig/pgproc"
	"github.com/tenure-go/tenure/internal/testrig/toxiproc"
	"github.com/tenure-go/tenure/storeurl"
	"github.com/tenure-go/tenure/tests/chaos/schedule"
)

// pgDatabase is the database the workers' table lives in.
const pgDatabase = "postgres"

// pgBackend is one PostgreSQL server, a child process of the campaign run
// as nobody when the campaign is root (package pgproc, which the
// PostgreSQL store's tests use too). Each worker reaches it through a
// proxy of its own. A pause stops the postmaster and every backend it
// forked; a kill is a SIGKILL of the postmaster, and the restart recovers
// the data from the write-ahead log on the same port.
type pgBackend struct {
	srv     *pgproc.Server
	clients *proxies

	mu   sync.Mutex // held across a kill and across a restart
	down bool       // killed and not restarted
}

func StartPostgres(api *toxiproc.Server, name string, workers int) (*pgBackend, error) {
	srv, err := pgproc.Start()
	if err != nil {
		return nil, err
	}
	b := &pgBackend{srv: srv}
	// The table, once, before the workers open it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := storeurl.Open(ctx, srv.DSN(pgDatabase)+"&create=true")
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("chaos: create the PostgreSQL table: %w", err)
	}
	if err := s.Close(); err != nil {
		b.Close()
		return nil, err
	}
	if b.clients, err = newProxies(api, name, workers, []string{srv.Addr()}); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

func (b *pgBackend) Kinds() []string {
	return append(append([]string(nil), schedule.WorkerKinds...), schedule.FLatency, schedule.FPartition, schedule.FServerPause, schedule.FServerKill)
}

func (b *pgBackend) URL(w int) string { return b.srv.DSNVia(b.clients.addrs(w)[0], pgDatabase) }

func (b *pgBackend) Apply(f schedule.Fault, holder int) (func(), string, bool) {
	switch f.Kind {
	case schedule.FLatency, schedule.FPartition:
		return b.clients.fault(f, holder)
	case schedule.FServerPause:
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.down || b.srv.Signal(syscall.SIGSTOP) != nil {
			return nil, "", false
		}
		// A kill in between continues the server before it kills it;
		// SIGCONT to the restarted one is harmless.
		return func() { _ = b.srv.Signal(syscall.SIGCONT) }, "postgres", true
	case schedule.FServerKill:
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.down {
			return nil, "", false
		}
		b.down = true
		if err := b.srv.Kill(); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: kill postgres: %v\n", err)
		}
		return func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if err := b.srv.Restart(); err != nil {
				fmt.Fprintf(os.Stderr, "chaos: restart postgres: %v\n", err)
				return
			}
			b.down = false
		}, "postgres", true
	}
	return nil, "", false
}

func (b *pgBackend) Close() {
	if b.clients != nil {
		b.clients.close()
	}
	b.srv.Remove()
}
