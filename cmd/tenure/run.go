package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/spf13/cobra"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/slots"
	"github.com/tenure-go/tenure/storeurl"
)

// runConfig is what tenure run was asked to do.
type runConfig struct {
	store     *storeurl.Location
	key       string
	id        string
	slots     int
	ttl       time.Duration
	killGrace time.Duration
	once      bool
	metrics   string
	timeout   time.Duration // bounds opening the store
	argv      []string
}

func newRunCmd(o *options) *cobra.Command {
	var rc runConfig
	var store string
	cmd := &cobra.Command{
		Use:   "run --store URL --key KEY [flags] -- COMMAND [ARG...]",
		Short: "Run a command only while this process holds the claim",
		Long: strings.TrimSpace(`
Run campaigns for the claim KEY (or for one of N slots of it with --slots N)
and runs COMMAND only while it holds it. The command gets TENURE_TOKEN (the
fencing token of the term), TENURE_SLOT and TENURE_KEY in its environment.

When the term ends (the claim is lost, or tenure gets SIGTERM or SIGINT) the
command gets SIGTERM, then SIGKILL --kill-grace later. When renewals keep
failing, SIGTERM comes --kill-grace before the local deadline and SIGKILL at
the deadline at the latest. The signals go to every process the command
started, also those that left its process group (daemons): the command runs
under a supervisor (tenure itself, a child subreaper) that holds its whole
tree. When the command exits, what it left running is killed. The claim is
released only after that. If tenure itself dies, even by SIGKILL, the
supervisor kills the whole tree at once.

After the command exits, or its term is lost, tenure releases the claim and
campaigns again, --ttl/6 later; with --once it exits instead. A command
that keeps exiting within --ttl of its start is rerun with a backoff, as
the elector backs off after errors: the pause doubles after each such run,
up to --ttl, and falls back to --ttl/6 once a run lasts longer.

A process the command started that is stuck in uninterruptible I/O dies
only when the I/O returns; anything else of the tree is gone within
moments of its SIGKILL.

With --metrics HOST:PORT, tenure serves /metrics (Prometheus), /healthz
(liveness: fails only when the elector is stuck or has ended on errors,
never for a healthy follower) and /readyz (200 only while it leads or holds
a slot).

No wrapper can stop a command that goes on writing after its deadline when
tenure itself is paused (a stopped VM, SIGSTOP) past it: make every write to
a shared resource carry TENURE_TOKEN, and have the resource reject tokens
lower than the highest it has seen.

Exit status: the command's (128+N if it died of signal N); 2 for bad usage
(a key that is a slot group, run without --slots, is one);
69 if the store cannot be opened within --timeout or keeps failing fatally;
75 with --once when the term ended before the command exited; 126/127 if the
command cannot be started; 128+N if tenure got signal N while no command
ran; 1 if the --metrics address cannot be listened on.`),
		Example: strings.TrimSpace(`
  # Run the indexer on one host of many sharing an etcd cluster:
  tenure run --store etcd://10.0.0.1:2379,10.0.0.2:2379/tenure --key indexer -- ./indexer --serve

  # Three workers at most, on the hosts sharing /var/lib/tenure:
  tenure run --store file:///var/lib/tenure --key workers --slots 3 -- ./worker

  # Serve Prometheus metrics (tenure_leader, renewals, demotions...), /healthz and /readyz:
  tenure run --store file:///var/lib/tenure --key indexer --metrics 127.0.0.1:9090 -- ./indexer

  # A one-off job that runs on one host only, then exits with its status:
  tenure run --store file:///var/lib/tenure --key backup --once --ttl 30s -- sh -c 'backup --token "$TENURE_TOKEN"'`),
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("no command to run (give it after --)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			rc.argv = args
			loc, err := parseStore(store)
			if err != nil {
				return err
			}
			rc.store = loc
			if err := rc.validate(); err != nil {
				return err
			}
			log, err := o.logger()
			if err != nil {
				return err
			}
			rc.timeout = o.timeout
			code, err := runTenure(rc, log)
			if err != nil {
				return err
			}
			return exitCode(code)
		},
	}
	f := cmd.Flags()
	// COMMAND's own flags follow it untouched, with or without "--".
	f.SetInterspersed(false)
	f.StringVar(&store, "store", "", storeFlagHelp())
	f.StringVar(&rc.key, "key", "", "claim key (required)")
	f.StringVar(&rc.id, "id", "", "identity in the claim (default HOSTNAME:PID)")
	f.IntVar(&rc.slots, "slots", 1, "number of holders allowed at once (a slot group when above 1)")
	f.DurationVar(&rc.ttl, "ttl", elector.DefaultTTL, "lease asked of the store; a lost tenure's claim frees this long after its last renewal")
	f.DurationVar(&rc.killGrace, "kill-grace", 0, "time between SIGTERM and SIGKILL to the command, at most ttl/3 (default ttl/5)")
	f.BoolVar(&rc.once, "once", false, "exit after the first term instead of campaigning again")
	f.StringVar(&rc.metrics, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics, liveness at /healthz and readiness (leading, or holding a slot) at /readyz (e.g. 127.0.0.1:9090)")
	return cmd
}

// validate checks rc and fills its defaults.
func (rc *runConfig) validate() error {
	if err := checkKey(rc.key); err != nil {
		return err
	}
	if rc.slots < 1 || rc.slots > slots.MaxSize {
		return usagef("--slots %d: want 1 to %d", rc.slots, slots.MaxSize)
	}
	if rc.ttl <= 0 {
		return usagef("--ttl %v: want a positive duration", rc.ttl)
	}
	if rc.killGrace < 0 || rc.killGrace > rc.ttl/3 {
		return usagef("--kill-grace %v: want between 0 and a third of --ttl (%v)", rc.killGrace, rc.ttl/3)
	}
	if rc.killGrace == 0 {
		rc.killGrace = rc.ttl / 5
	}
	if rc.metrics != "" {
		if _, _, err := net.SplitHostPort(rc.metrics); err != nil {
			return usagef("--metrics %q: want HOST:PORT, such as 127.0.0.1:9090 (%v)", rc.metrics, err)
		}
	}
	if rc.id == "" {
		host, err := os.Hostname()
		if err != nil {
			host = "tenure"
		}
		rc.id = host + ":" + strconv.Itoa(os.Getpid())
	}
	if _, err := backends.NewHolder(rc.id); err != nil {
		return usagef("--id %q: %v", rc.id, err)
	}
	// The elector checks the timings against each other (a TTL too short
	// for its renewals, for one).
	r := &runner{rc: *rc}
	if err := r.electorConfig(nil).Validate(); err != nil {
		return usagef("--ttl %v: %v", rc.ttl, err)
	}
	return nil
}

// onSignal calls f, from a goroutine of its own, with the first SIGTERM or
// SIGINT that arrives, and catches them until the returned stop is called.
// stop returns once f has returned, if it was called.
func onSignal(f func(syscall.Signal)) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	stopSignals := make(chan struct{})
	sigDone := make(chan struct{})
	go func() {
		defer close(sigDone)
		select {
		case sig := <-sigs:
			f(sig.(syscall.Signal))
		case <-stopSignals:
		}
	}()
	return func() {
		close(stopSignals)
		<-sigDone
		signal.Stop(sigs)
	}
}

// runTenure runs rc until it is done and returns the exit status, or a
// storeError if the store cannot be opened.
func runTenure(rc runConfig, log *slog.Logger) (int, error) {
	r := &runner{rc: rc, log: log, clock: clock.New()}

	// Signals are caught from the start, so that one arriving while the
	// store opens or while tenure waits for the claim ends tenure promptly.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer onSignal(func(sig syscall.Signal) {
		r.signal.Store(int32(sig))
		log.Info("signal: ending", "signal", sig.String())
		cancel()
	})()

	if rc.metrics != "" {
		ms, err := serveMetrics(rc.metrics, log)
		if err != nil {
			log.Error("metrics", "addr", rc.metrics, "err", err)
			return exitInternal, nil
		}
		defer ms.close()
		r.metrics = ms
	}

	store, err := openStore(ctx, log, rc.store, rc.timeout)
	if err != nil {
		if code, ok := r.signalled(); ok {
			return code, nil
		}
		return 0, storeError{err}
	}
	defer store.Close()
	var locker backends.Locker
	if rc.slots > 1 {
		r.noteSize(ctx, store)
		locker, err = slots.New(store, slots.Config{Size: rc.slots, Logger: log})
	} else {
		locker, err = backends.NewLocker(store)
	}
	if err != nil {
		return 0, storeError{fmt.Errorf("store %s: %w", rc.store, err)}
	}

	quick := 0 // terms in a row whose command exited on its own within a TTL
	for {
		o := r.term(ctx, locker)
		if o.kind == outcomeExited && o.ran < rc.ttl {
			quick++
		} else {
			quick = 0
		}
		switch {
		case o.kind == outcomeFatal:
			return cmp.Or(o.code, exitStore), nil
		case o.kind == outcomeStartFailed:
			return o.code, nil
		case o.kind == outcomeSignal:
			return o.code, nil
		case rc.once && o.kind == outcomeLost:
			return exitLost, nil
		case rc.once:
			return o.code, nil
		}
		// A pause before campaigning again bounds the store traffic of a
		// command that exits at once (one acquisition and one release
		// per pause), and lets the tenures that watched the release take
		// the claim first.
		pause := r.repause(quick)
		if quick > 1 {
			log.Warn("command keeps exiting; backing off", "key", rc.key, "status", o.code, "runs", quick, "retry_in", pause.String())
		}
		t := r.clock.Timer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			code, _ := r.signalled()
			return code, nil
		}
	}
}

// noteSize warns when the slot group already has a size in the store
// other than --slots: the stored size applies, and says how to change it.
func (r *runner) noteSize(ctx context.Context, store backends.Store) {
	ctx, cancel := context.WithTimeout(ctx, r.rc.timeout)
	defer cancel()
	e, err := store.Get(ctx, slots.SizeKey(r.rc.key))
	if err != nil {
		return // no group yet, or the campaign will report the store's error
	}
	if n, err := strconv.Atoi(string(e.Value)); err == nil && n != r.rc.slots {
		r.log.Warn(fmt.Sprintf("group %q has %d slots in the store, not --slots %d; the stored size applies: to change it, run tenure resize --store %s --key %s --slots %d",
			r.rc.key, n, r.rc.slots, r.rc.store, r.rc.key, r.rc.slots), "key", r.rc.key, "stored", n, "slots", r.rc.slots)
	}
}

// repause is the pause between the end of a term and the next campaign,
// after quick terms in a row whose command exited within a TTL of its
// start: the elector's default RetryPeriod, a sixth of the TTL, doubled
// for each quick term after the first, up to the TTL, as the elector backs
// off after errors; plus up to 15% of jitter, never less, so that tenures
// that restarted together drift apart.
func (r *runner) repause(quick int) time.Duration {
	d := r.rc.ttl / 6
	for i := 1; i < quick && d < r.rc.ttl; i++ {
		d *= 2
	}
	d = min(d, r.rc.ttl)
	return d + time.Duration(rand.Float64()*0.15*float64(d))
}

// runner runs terms one after the other.
type runner struct {
	rc      runConfig
	log     *slog.Logger
	clock   clock.Clock
	signal  atomic.Int32   // the signal that ends tenure, 0 until one came
	metrics *metricsServer // nil without --metrics
}

// signalled reports whether tenure got a signal, and the status it exits
// with when no command ran: 128 plus the signal.
func (r *runner) signalled() (int, bool) {
	s := r.signal.Load()
	return 128 + int(s), s != 0
}

type outcomeKind int

const (
	outcomeExited      outcomeKind = iota // the command exited on its own
	outcomeLost                           // the term ended (or was about to) first
	outcomeSignal                         // tenure was told to stop
	outcomeStartFailed                    // the command could not be started
	outcomeFatal                          // the store failed fatally
)

// outcome is how one term ended, and the status tenure would exit with.
type outcome struct {
	kind outcomeKind
	code int
	ran  time.Duration // how long the command ran
}

// cancelLead is the elector's CancelLead: the leader's context is done this
// long before the local deadline. Set here so the local deadline can be
// derived from the context's Deadline.
func (r *runner) cancelLead() time.Duration {
	return max(r.rc.ttl/100, 10*time.Millisecond)
}

// term campaigns with a fresh Elector until it has led once and the
// command has been reaped, then stops it (releasing the claim).
func (r *runner) term(ctx context.Context, locker backends.Locker) outcome {
	done := make(chan outcome, 1)
	h := &termHooks{done: done, abort: make(chan struct{})}
	cfg := r.electorConfig(h)
	e, err := elector.New(locker, cfg)
	if err != nil {
		r.log.Error("elector", "err", err)
		return outcome{kind: outcomeFatal}
	}
	r.metrics.follow(e, cfg)
	if err := e.Start(context.Background()); err != nil {
		r.log.Error("elector", "err", err)
		return outcome{kind: outcomeFatal}
	}
	stop := func() {
		if err := e.Stop(context.Background()); err != nil {
			r.log.Warn("stop", "key", r.rc.key, "err", err)
		}
	}
	select {
	case o := <-done:
		stop()
		return o
	case <-e.Done():
		select {
		case o := <-done:
			return o
		default:
		}
		// A misuse the store answered plainly (a single claim on a slot
		// group's key) is the caller's to fix, not the store failing.
		fatal := outcome{kind: outcomeFatal, code: exitStore}
		if err := e.Err(); errors.Is(err, backends.ErrUsage) {
			fatal.code = exitUsage
			r.log.Error("usage", "key", r.rc.key, "err", err)
		} else {
			r.log.Error("store failing", "key", r.rc.key, "err", err)
		}
		if h.leading.Load() {
			// The elector does not campaign again, and so cannot give up,
			// while an OnElected whose drain timed out still runs; should
			// it end anyway, the command gets what the end of any term
			// gives it, SIGTERM then SIGKILL a grace later, and tenure
			// exits only once its tree is gone.
			close(h.abort)
			<-done
		}
		return fatal
	case <-ctx.Done():
		// Stop cancels a running term's context, waits for OnElected
		// (the command's exit) and only then releases.
		stop()
		code, _ := r.signalled()
		select {
		case o := <-done:
			if o.kind != outcomeStartFailed {
				o.kind = outcomeSignal
			}
			return o
		default:
			return outcome{kind: outcomeSignal, code: code}
		}
	}
}

// termHooks link a term to its command.
type termHooks struct {
	done    chan<- outcome // the outcome of the term's command
	leading atomic.Bool    // the command was started, or is being
	abort   chan struct{}  // closed: end the command as at the end of a term
}

// lead runs the command for one term and returns once it has been reaped.
func (r *runner) lead(lctx context.Context, t elector.Term, abort <-chan struct{}) outcome {
	log := r.log.With("key", t.Key, "slot", t.Slot, "token", t.Token)
	env := append(os.Environ(),
		"TENURE_TOKEN="+strconv.FormatInt(t.Token, 10),
		"TENURE_SLOT="+strconv.Itoa(t.Slot),
		"TENURE_KEY="+t.Key,
	)
	c, err := startChild(r.rc.argv, env)
	if err != nil {
		log.Error("start command", "command", r.rc.argv[0], "err", err)
		return outcome{kind: outcomeStartFailed, code: startStatus(err)}
	}
	started := r.clock.Now()
	log.Info("command started", "pid", c.pid)

	// localDeadline is the term's local deadline as it stands now:
	// renewals move the leader's context's deadline forward.
	localDeadline := func() time.Time {
		d, _ := lctx.Deadline()
		return d.Add(r.cancelLead())
	}
	grace := r.rc.killGrace
	early := r.clock.Timer(r.clock.Until(localDeadline().Add(-grace)))
	defer early.Stop()
	var kill *clock.Timer
	var killC <-chan time.Time
	ended := false // SIGTERM was sent because the term ended or was about to
	terminate := func(why string) {
		if kill != nil {
			return
		}
		at := r.clock.Now().Add(grace)
		if d := localDeadline(); d.Before(at) {
			at = d
		}
		if _, sig := r.signalled(); !sig {
			ended = true
		}
		log.Info("terminating command", "why", why, "pid", c.pid, "kill_in", r.clock.Until(at).String())
		c.signal(syscall.SIGTERM)
		kill = r.clock.Timer(r.clock.Until(at))
		killC = kill.C
	}
	lctxDone := lctx.Done()
	for {
		select {
		case code := <-c.done:
			if kill != nil {
				kill.Stop()
			}
			log.Info("command exited", "status", code)
			ran := r.clock.Since(started)
			if ended {
				return outcome{kind: outcomeLost, code: code, ran: ran}
			}
			return outcome{kind: outcomeExited, code: code, ran: ran}
		case <-lctxDone:
			lctxDone = nil
			terminate("term ended")
		case <-abort:
			abort = nil
			terminate("elector ended")
		case <-early.C:
			// Renewals have not moved the deadline on: the grace must end
			// by the local deadline.
			if left := r.clock.Until(localDeadline()); left <= grace {
				terminate("renewals failing")
			} else {
				early.Reset(left - grace)
			}
		case <-killC:
			log.Warn("killing command", "pid", c.pid)
			c.signal(syscall.SIGKILL)
			killC = nil
		}
	}
}

// electorConfig is the Config of each term's Elector; h.done receives the
// outcome of its first term (h nil: for validation only).
func (r *runner) electorConfig(h *termHooks) elector.Config {
	return elector.Config{
		Key:        r.rc.key,
		Identity:   r.rc.id,
		TTL:        r.rc.ttl,
		CancelLead: r.cancelLead(),
		// The command is SIGKILLed at the local deadline at the latest,
		// CancelLead after the leader's context is done, and at the
		// latest kill-grace after SIGTERM: OnElected returns within that,
		// plus the time to reap. A drain that long never leaves a claim to
		// expire when the command has exited.
		DrainTimeout: r.rc.killGrace + r.cancelLead() + time.Second,
		Clock:        r.clock,
		Logger:       r.log,
		Trace:        r.metrics.trace(r.rc.key),
		OnElected: func(lctx context.Context, t elector.Term) {
			if !h.leading.CompareAndSwap(false, true) {
				return // a later term of this Elector: it is being stopped
			}
			h.done <- r.lead(lctx, t, h.abort)
		},
	}
}
