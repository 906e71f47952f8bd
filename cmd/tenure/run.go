package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	store      *storeurl.Location
	key        string
	id         string
	advertise  string
	slots      int
	ttl        time.Duration
	killGrace  time.Duration
	graceSet   bool          // --kill-grace was given
	try        time.Duration // 0: campaign without a bound
	once       bool
	forwardHUP bool
	// priority, with prioritySet, keeps a candidacy (elector.Config.Candidacy).
	priority    int64
	prioritySet bool
	metrics     string
	timeout     time.Duration // bounds opening the store
	argv        []string
}

// runLong is run's help.
const runLong = `
Run runs COMMAND while it holds the claim KEY and, by default, campaigns
and runs it again each time it exits, as a service; with --once it runs it
one time and exits with its status, as consul lock and etcdctl lock do.

Run campaigns for the claim KEY (or for one of N slots of it with --slots
N) and runs COMMAND only while it holds it. The command gets TENURE_TOKEN
(the fencing token of the term), TENURE_SLOT, TENURE_KEY and TENURE_ID (the
identity the claim is held under) in its environment. A COMMAND that is
not found or cannot be executed is refused before tenure campaigns. With
--try D, tenure gives up (status 124) if the claim is not acquired within D
of campaigning.

When the term ends (the claim is lost, or tenure gets SIGTERM, SIGINT or
SIGHUP) the command gets SIGTERM, then SIGKILL --kill-grace later. When
renewals keep failing, SIGTERM comes --kill-grace before the local deadline
and SIGKILL at the deadline at the latest. The signals go to every process
the command started, also those that left its process group (daemons): the
command runs under a supervisor (tenure itself, a child subreaper) that
holds its whole tree. When the command exits, what it left running is
killed. The claim is released only after that. If tenure itself dies, even
by SIGKILL, the supervisor kills the whole tree at once. SIGUSR1 and
SIGUSR2 to tenure are passed on to the command, and SIGHUP too with
--forward-hup (for a command that reloads on it). A command stopped by job
control (it read the terminal) is logged.

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
never for a healthy follower), /readyz (readiness: as /healthz once the
store is open, so a healthy follower, a standby, is ready) and /leaderz
(200 only while it leads or holds a slot).

No wrapper can stop a command that goes on writing after its deadline when
tenure itself is paused (a stopped VM, SIGSTOP) past it: make every write to
a shared resource carry TENURE_TOKEN, and have the resource reject tokens
lower than the highest it has seen.

Exit status: the command's (128+N if it died of signal N); 1 for an error
of tenure's own (the --metrics address cannot be listened on); 2 for bad
usage (a key that is a slot group, run without --slots, is one); 69 if the
store cannot be opened within --timeout or keeps failing fatally; 75 with
--once when the term ended before the command exited; 124 with --try when
the claim was not acquired in time; 126 if the command cannot be executed,
127 if it is not found; 128+N if tenure got signal N while no command
ran.`

// runExample is run's examples.
const runExample = `
  # A service: the indexer runs on one host of many sharing an etcd cluster,
  # and is started again whenever it exits:
  tenure run --store etcd://10.0.0.1:2379,10.0.0.2:2379/tenure --key indexer -- ./indexer --serve

  # Three workers at most, on the hosts sharing /var/lib/tenure, each
  # started again whenever it exits:
  tenure run --store file:///var/lib/tenure --key workers --slots 3 -- ./worker

  # A service with Prometheus metrics (tenure_leader, renewals, demotions...), /healthz, /readyz and /leaderz:
  tenure run --store file:///var/lib/tenure --key indexer --metrics 127.0.0.1:9090 -- ./indexer

  # A one-off job (--once) that runs on one host only, then exits with its status:
  tenure run --store file:///var/lib/tenure --key backup --once --ttl 30s -- sh -c 'backup --token "$TENURE_TOKEN"'

  # The same job, given up with status 124 if another host holds the claim for a minute:
  tenure run --store file:///var/lib/tenure --key backup --once --try 1m -- ./backup`

func newRunCmd(o *options) *cobra.Command {
	var rc runConfig
	var store string
	cmd := &cobra.Command{
		Use:     "run --store URL --key KEY [flags] -- COMMAND [ARG...]",
		Short:   "Run a command while holding a claim, again each time it exits (--once: once, with its status)",
		Long:    strings.TrimSpace(runLong),
		Example: examples(runExample),
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("no command to run (give it after --)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			rc.argv = args
			rc.graceSet = cmd.Flags().Changed("kill-grace")
			rc.prioritySet = cmd.Flags().Changed("priority")
			if rc.prioritySet && rc.slots > 1 {
				return usagef("--priority keeps a candidacy for a single claim; it cannot be given with --slots %d", rc.slots)
			}
			trySet := cmd.Flags().Changed("try")
			if trySet && rc.try <= 0 {
				return usagef("--try %v: want a positive duration", rc.try)
			}
			loc, err := parseStore(store)
			if err != nil {
				return err
			}
			if loc, err = o.withPassword(loc); err != nil {
				return err
			}
			rc.store = loc
			if err := rc.validate(); err != nil {
				return err
			}
			if err := checkCommand(rc.argv[0]); err != nil {
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
	f.StringVar(&rc.advertise, "advertise", "", fmt.Sprintf("value advertised with the claim, such as the address the command serves at; tenure holders and watchers of the claim see it (at most %d bytes, no control characters)", backends.MaxAdvertisedBytes))
	f.IntVar(&rc.slots, "slots", 1, "number of holders allowed at once (a slot group when above 1)")
	f.DurationVar(&rc.ttl, "ttl", elector.DefaultTTL, fmt.Sprintf("lease asked of the store, from %v to %v; a lost tenure's claim frees this long after its last renewal", minTTL, maxTTL))
	f.DurationVar(&rc.killGrace, "kill-grace", 0, "time between SIGTERM and SIGKILL to the command, above 0 and at most ttl/3 (default ttl/5)")
	f.DurationVar(&rc.try, "try", 0, fmt.Sprintf("give up, with exit status %d, if the claim is not acquired within this long of campaigning (default: wait for it)", exitTry))
	f.BoolVar(&rc.once, "once", false, "exit after the first term instead of campaigning again")
	f.BoolVar(&rc.forwardHUP, "forward-hup", false, "pass SIGHUP on to the command (for a reload) instead of ending the term")
	f.Int64Var(&rc.priority, "priority", 0, "keep a candidacy with this priority: a leader hands the claim to a candidate of higher priority once it has been present for a TTL, and acts on tenure transfer (single claims only)")
	f.StringVar(&rc.metrics, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics, liveness at /healthz, readiness (a healthy leader or follower) at /readyz and leadership (leading, or holding a slot) at /leaderz (e.g. 127.0.0.1:9090)")
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
	switch {
	case rc.ttl < minTTL:
		return usagef("--ttl %v: the minimum is %v (renewals every ttl/3 need time to be answered)", rc.ttl, minTTL)
	case rc.ttl > maxTTL:
		return usagef("--ttl %v: the maximum is %v", rc.ttl, maxTTL)
	}
	switch {
	case rc.graceSet && rc.killGrace <= 0:
		return usagef("--kill-grace %v: want a positive duration, at most a third of --ttl (%v); leave it out for ttl/5", rc.killGrace, rc.ttl/3)
	case rc.killGrace > rc.ttl/3:
		return usagef("--kill-grace %v: want at most a third of --ttl (%v)", rc.killGrace, rc.ttl/3)
	case !rc.graceSet:
		rc.killGrace = rc.ttl / 5
	}
	if rc.metrics != "" {
		if err := checkListenAddr(rc.metrics); err != nil {
			return usagef("--metrics %q: want HOST:PORT with a port from 0 to 65535, such as 127.0.0.1:9090 (%v)", rc.metrics, err)
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
	if err := backends.ValidateAdvertised(rc.advertise); err != nil {
		return usagef("--advertise %q: %v", rc.advertise, err)
	}
	// The elector checks the timings against each other (a TTL too short
	// for its renewals, for one).
	r := &runner{rc: *rc}
	if err := r.electorConfig(nil).Validate(); err != nil {
		return usagef("--ttl %v: %v", rc.ttl, err)
	}
	return nil
}

// endSignals are the signals that end tenure: a running term ends as
// SIGTERM ends it (the command gets SIGTERM and the claim is released once
// it exited). SIGHUP is among them unless --forward-hup makes it one the
// command gets instead.
func endSignals(forwardHUP bool) []os.Signal {
	if forwardHUP {
		return []os.Signal{syscall.SIGTERM, syscall.SIGINT}
	}
	return []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP}
}

// forwardSignals are the signals tenure run passes on to the command, for
// reloads and the like: SIGUSR1 and SIGUSR2, and SIGHUP with --forward-hup.
func forwardSignals(forwardHUP bool) []os.Signal {
	if forwardHUP {
		return []os.Signal{syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGHUP}
	}
	return []os.Signal{syscall.SIGUSR1, syscall.SIGUSR2}
}

// minTTL and maxTTL bound --ttl. Below a second, renewals every third of
// the TTL leave a loaded host no time to have them answered (and NATS and
// etcd grant nothing shorter); the maximum is the longest TTL any store
// takes (backends.MaxTTL, a year).
const (
	minTTL = time.Second
	maxTTL = backends.MaxTTL
)

// checkListenAddr checks that addr is HOST:PORT with a port net.Listen
// takes.
func checkListenAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q", port)
	}
	return nil
}

// commandError is a COMMAND that tenure run refuses before it campaigns:
// one line on stderr, exit status 126 or 127 as a shell reports them.
type commandError struct {
	code int
	err  error
}

func (e commandError) Error() string { return e.err.Error() }
func (e commandError) Unwrap() error { return e.err }

// checkCommand refuses a command that cannot be started, before tenure
// campaigns: a standby whose command has a typo would otherwise look
// healthy until it led. It looks name up as the supervisor will, in
// tenure's PATH.
func checkCommand(name string) error {
	_, err := exec.LookPath(name)
	if err == nil || errors.Is(err, exec.ErrDot) {
		return nil
	}
	code := exitNoExec
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		code = exitNotFound
	}
	var ee *exec.Error
	if errors.As(err, &ee) {
		err = ee.Err
	}
	if code == exitNotFound {
		return commandError{code, fmt.Errorf("command %q: %w (nothing to run: tenure does not campaign)", name, err)}
	}
	return commandError{code, fmt.Errorf("command %q: %w: it cannot be executed (nothing to run: tenure does not campaign)", name, err)}
}

// onSignal calls f, from a goroutine of its own, with the first of sigs
// that arrives, and catches them until the returned stop is called. stop
// returns once f has returned, if it was called.
func onSignal(f func(syscall.Signal), sigs ...os.Signal) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	stopSignals := make(chan struct{})
	sigDone := make(chan struct{})
	go func() {
		defer close(sigDone)
		select {
		case sig := <-ch:
			f(sig.(syscall.Signal))
		case <-stopSignals:
		}
	}()
	return func() {
		close(stopSignals)
		<-sigDone
		signal.Stop(ch)
	}
}

// forward passes every one of sigs that arrives to the command of the
// running term, until the returned stop is called; a signal that arrives
// while no command runs is logged and dropped, never left to end tenure.
// stop returns once the forwarding goroutine has.
func (r *runner) forward(sigs ...os.Signal) (stop func()) {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, sigs...)
	stopped := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case sig := <-ch:
				s := sig.(syscall.Signal)
				r.mu.Lock()
				c := r.cur
				r.mu.Unlock()
				if c == nil {
					r.log.Info("signal: no command runs to forward it to", "signal", s.String())
					continue
				}
				r.log.Info("signal: forwarding to the command", "signal", s.String(), "pid", c.pid)
				c.signal(s)
			case <-stopped:
				return
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(stopped)
		<-done
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
	}, endSignals(rc.forwardHUP)...)()
	defer r.forward(forwardSignals(rc.forwardHUP)...)()

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
	stored := r.storedSize(ctx, store)
	if rc.slots > 1 {
		size := rc.slots
		if stored > 0 && stored != rc.slots {
			log.Warn(fmt.Sprintf("group %q has %d slots in the store, not --slots %d; the stored size applies: to change it, run tenure resize --store %s --key %s --slots %d",
				rc.key, stored, rc.slots, rc.store, rc.key, rc.slots), "key", rc.key, "stored", stored, "slots", rc.slots)
			// The group would say the same again: it is told the size
			// that applies, and warns only when it changes later.
			size = stored
		}
		locker, err = slots.New(store, slots.Config{Size: size, Logger: log})
	} else {
		if stored > 0 {
			return 0, slotGroupError(rc.key, stored)
		}
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
		case o.kind == outcomeFatal && o.err != nil:
			return 0, o.err
		case o.kind == outcomeFatal:
			return cmp.Or(o.code, exitStore), nil
		case o.kind == outcomeStartFailed:
			return o.code, nil
		case o.kind == outcomeSignal, o.kind == outcomeTry:
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

// storedSize reads the size of the slot group --key names, 0 if the key
// is no group or the size cannot be read (the campaign then reports the
// store's error).
func (r *runner) storedSize(ctx context.Context, store backends.Store) int {
	ctx, cancel := context.WithTimeout(ctx, r.rc.timeout)
	defer cancel()
	e, err := store.Get(ctx, slots.SizeKey(r.rc.key))
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(string(e.Value))
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// slotGroupError is tenure run without --slots on key, a slot group of n:
// a usage error that says how to run it.
func slotGroupError(key string, n int) error {
	if n < 2 {
		return usagef("--key %q is a slot group: add --slots N", key)
	}
	return usagef("--key %q is a slot group of %d: add --slots %d", key, n, n)
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

	mu  sync.Mutex
	cur *child // guarded by mu: the running term's command, nil between commands

	earlier []backends.Holder // the holders of earlier terms' electors; runTenure's goroutine
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
	outcomeTry                            // --try passed before the claim was acquired
)

// outcome is how one term ended, and the status tenure would exit with.
type outcome struct {
	kind outcomeKind
	code int
	ran  time.Duration // how long the command ran
	err  error         // outcomeFatal: a usage error to report in its place, or nil
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
	h := &termHooks{done: done, abort: make(chan struct{}), demoted: make(chan struct{}, 1)}
	cfg := r.electorConfig(h)
	e, err := elector.New(locker, cfg)
	if err != nil {
		r.log.Error("elector", "err", err)
		return outcome{kind: outcomeFatal}
	}
	// A claim of this term's that lingers (its release failed in an
	// outage) is this process's own, not a duplicate, for later terms.
	// A lingering claim expires within a TTL, and terms are a sixth of a
	// TTL apart at least: the last few holders are enough.
	defer func() {
		r.earlier = append(r.earlier, e.Holder())
		if n := len(r.earlier); n > 8 {
			r.earlier = slices.Clone(r.earlier[n-8:])
		}
	}()
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
	var tryC <-chan time.Time
	if r.rc.try > 0 {
		t := r.clock.Timer(r.rc.try)
		defer t.Stop()
		tryC = t.C
	}
	for {
		select {
		case <-tryC:
			tryC = nil
			// Taking leading first keeps OnElected from starting the
			// command; if it already has, the term goes on.
			if h.leading.CompareAndSwap(false, true) {
				r.log.Warn("claim not acquired within --try: giving up", "key", r.rc.key, "try", r.rc.try.String())
				stop()
				return outcome{kind: outcomeTry, code: exitTry}
			}
		case o := <-done:
			if o.kind == outcomeLost {
				r.awaitDemotion(e, h)
			}
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
				// The group was made after tenure looked (the elector
				// has logged the store's answer).
				fatal.code = exitUsage
				fatal.err = slotGroupError(r.rc.key, 0)
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
}

// termHooks link a term to its command.
type termHooks struct {
	done    chan<- outcome // the outcome of the term's command
	leading atomic.Bool    // the command was started, or is being
	abort   chan struct{}  // closed: end the command as at the end of a term
	demoted chan struct{}  // receives once the elector ended the term (OnDemoted)
}

// awaitDemotion waits, after a command that was ended because its term
// ended or was about to (renewals failing), for the elector to end the
// term itself, so that the term ends with the elector's cause (expired,
// with the store's error; lost) rather than as stopped. The wait is bounded
// by a TTL: a renewal answered late keeps the term, which Stop then ends.
func (r *runner) awaitDemotion(e *elector.Elector, h *termHooks) {
	t := r.clock.Timer(r.rc.ttl)
	defer t.Stop()
	select {
	case <-h.demoted:
	case <-e.Done():
	case <-t.C:
	}
}

// lead runs the command for one term and returns once it has been reaped.
func (r *runner) lead(lctx context.Context, t elector.Term, abort <-chan struct{}) outcome {
	log := r.log.With("key", t.Key, "slot", t.Slot, "token", t.Token)
	env := append(os.Environ(),
		"TENURE_TOKEN="+strconv.FormatInt(t.Token, 10),
		"TENURE_SLOT="+strconv.Itoa(t.Slot),
		"TENURE_KEY="+t.Key,
		"TENURE_ID="+t.Holder.ID,
	)
	c, err := startChild(r.rc.argv, env, log)
	if err != nil {
		log.Error("start command", "command", r.rc.argv[0], "err", err)
		return outcome{kind: outcomeStartFailed, code: startStatus(err)}
	}
	started := r.clock.Now()
	log.Info("command started", "pid", c.pid)
	r.mu.Lock()
	r.cur = c
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.cur = nil
		r.mu.Unlock()
	}()

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
		Advertise:  r.rc.advertise,
		TTL:        r.rc.ttl,
		CancelLead: r.cancelLead(),
		// The command is SIGKILLed at the local deadline at the latest,
		// CancelLead after the leader's context is done, and at the
		// latest kill-grace after SIGTERM: OnElected returns within that,
		// plus the time to reap. A drain that long never leaves a claim to
		// expire when the command has exited.
		DrainTimeout:   r.rc.killGrace + r.cancelLead() + time.Second,
		Clock:          r.clock,
		Logger:         r.log,
		Trace:          r.metrics.trace(r.rc.key),
		EarlierHolders: slices.Clone(r.earlier),
		Candidacy:      r.rc.prioritySet,
		Priority:       r.rc.priority,
		OnDemoted: func(elector.Term, elector.Cause) {
			if h == nil {
				return
			}
			select {
			case h.demoted <- struct{}{}:
			default:
			}
		},
		OnElected: func(lctx context.Context, t elector.Term) {
			if !h.leading.CompareAndSwap(false, true) {
				return // a later term of this Elector: it is being stopped
			}
			h.done <- r.lead(lctx, t, h.abort)
		},
	}
}
