package servers

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tenure-go/tenure/internal/testrig/pgproc"
	"github.com/tenure-go/tenure/internal/testrig/toxiproc"
	"github.com/tenure-go/tenure/storeurl"
	"github.com/tenure-go/tenure/tests/chaos/schedule"
)

// pgFailoverWithin bounds each step of a failover or a rebuild.
const pgFailoverWithin = 60 * time.Second

// pgHABackend is a PostgreSQL primary and a synchronous streaming standby
// of it (pg_basebackup -R), both child processes run as nobody when the
// campaign is root. Each worker reaches both through proxies of its own,
// with a URL that lists both hosts and connects only to the one that
// accepts writes (target_session_attrs=read-write). A server-kill is a
// failover: the primary gets SIGKILL and the standby is promoted at once;
// the heal rebuilds the old primary as a synchronous standby of the new
// one (a new base backup), so the next failover goes the other way. A
// pause stops the primary or the standby (which holds every commit of the
// primary until it is continued).
type pgHABackend struct {
	srv     [2]*pgproc.Server
	clients *proxies

	// op is held across a failover and across a rebuild, which take
	// seconds; a failover is not applied while one runs. mu guards the
	// state and is never held across a server's I/O, so that a pause ends
	// while a rebuild waits on the paused server.
	op      sync.Mutex
	mu      sync.Mutex
	primary int     // guarded by mu: the index of the primary
	down    bool    // guarded by mu: the other server is killed and not rebuilt
	paused  [2]bool // guarded by mu
}

func StartPostgresHA(api *toxiproc.Server, name string, workers int) (*pgHABackend, error) {
	p, err := pgproc.Start()
	if err != nil {
		return nil, err
	}
	b := &pgHABackend{}
	b.srv[0] = p
	if b.srv[1], err = pgproc.StartStandby(p); err != nil {
		b.Close()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), pgFailoverWithin)
	defer cancel()
	if err := p.SetSynchronous(ctx, true); err != nil {
		b.Close()
		return nil, err
	}
	if err := p.WaitStandbys(ctx, 1, true); err != nil {
		b.Close()
		return nil, err
	}
	s, err := storeurl.Open(ctx, p.DSN(pgDatabase)+"&create=true")
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("chaos: create the PostgreSQL table: %w", err)
	}
	if err := s.Close(); err != nil {
		b.Close()
		return nil, err
	}
	if b.clients, err = newProxies(api, name, workers, []string{b.srv[0].Addr(), b.srv[1].Addr()}); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// Kinds lists server-kill three times, so that a run draws a failover
// three times as often as another fault: a run of 30 s draws one or more
// but for a few in a hundred (a failover drawn while the killed server is
// not rebuilt yet is not applied).
func (b *pgHABackend) Kinds() []string {
	return append(append([]string(nil), schedule.WorkerKinds...), schedule.FLatency, schedule.FPartition, schedule.FServerPause, schedule.FServerKill, schedule.FServerKill, schedule.FServerKill)
}

// settle covers the rebuild's last step: the new standby streams, and the
// primary's commits, held while it had none, go through, when the heal
// returns; a worker's pool connects again at its next request.
func (b *pgHABackend) settle(time.Duration) time.Duration { return time.Second }

func (b *pgHABackend) URL(w int) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable&target_session_attrs=read-write", strings.Join(b.clients.addrs(w), ","), pgDatabase)
}

func pgName(i int) string { return fmt.Sprintf("postgres%d", i) }

func (b *pgHABackend) Apply(f schedule.Fault, holder int) (func(), string, bool) {
	switch f.Kind {
	case schedule.FLatency, schedule.FPartition:
		return b.clients.fault(f, holder)
	case schedule.FServerPause:
		b.mu.Lock()
		defer b.mu.Unlock()
		i := int(f.Pick) % 2
		if (b.down && i != b.primary) || b.paused[i] || b.srv[i].Signal(syscall.SIGSTOP) != nil {
			return nil, "", false
		}
		b.paused[i] = true
		return func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			_ = b.srv[i].Signal(syscall.SIGCONT)
			b.paused[i] = false
		}, pgName(i), true
	case schedule.FServerKill:
		if !b.op.TryLock() {
			return nil, "", false
		}
		defer b.op.Unlock()
		b.mu.Lock()
		// A paused standby could not be promoted until its pause ends.
		skip := b.down || b.paused[0] || b.paused[1]
		old, next := b.primary, 1-b.primary
		b.mu.Unlock()
		if skip {
			return nil, "", false
		}
		if err := b.srv[old].Kill(); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: kill %s: %v\n", pgName(old), err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), pgFailoverWithin)
		defer cancel()
		if err := b.srv[next].Promote(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: promote %s: %v\n", pgName(next), err)
		}
		b.mu.Lock()
		b.primary, b.down = next, true
		b.mu.Unlock()
		return func() { b.rebuild(old) }, pgName(old), true
	}
	return nil, "", false
}

// rebuild makes server i, killed by a failover, a synchronous standby of
// the primary: a base backup of the primary taken while it replicates to
// nobody, then the primary made synchronous, then the standby started,
// and the heal waits until it streams (the primary's commits wait for it
// meanwhile). The order keeps the primary from ever streaming to a
// standby it does not wait for, which a store opening meanwhile would
// refuse.
func (b *pgHABackend) rebuild(i int) {
	b.op.Lock()
	defer b.op.Unlock()
	b.mu.Lock()
	p := b.srv[b.primary]
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), pgFailoverWithin)
	defer cancel()
	steps := []struct {
		what string
		do   func() error
	}{
		{"base backup", func() error { return b.srv[i].Rebuild(p) }},
		{"synchronous_standby_names", func() error { return p.SetSynchronous(ctx, true) }},
		{"start", b.srv[i].Restart},
		{"streaming", func() error { return p.WaitStandbys(ctx, 1, true) }},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: rebuild %s as a standby (%s): %v\n", pgName(i), st.what, err)
			// The primary goes on alone rather than wait for nobody.
			_ = b.srv[i].Kill()
			_ = p.SetSynchronous(ctx, false)
			return
		}
	}
	b.mu.Lock()
	b.down = false
	b.mu.Unlock()
}

func (b *pgHABackend) Close() {
	if b.clients != nil {
		b.clients.close()
	}
	for _, s := range b.srv {
		if s != nil {
			s.Remove()
		}
	}
}
