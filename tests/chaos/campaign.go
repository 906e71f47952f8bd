package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/tenure-go/tenure/internal/childproc"
	"github.com/tenure-go/tenure/internal/testrig/pgproc"
	"github.com/tenure-go/tenure/internal/testrig/toxiproc"
	"github.com/tenure-go/tenure/tests/chaos/check"
	"github.com/tenure-go/tenure/tests/chaos/journal"
	"github.com/tenure-go/tenure/tests/chaos/schedule"
	"github.com/tenure-go/tenure/tests/chaos/servers"
	"github.com/tenure-go/tenure/tests/chaos/timeline"
)

// campaignConfig is what the flags say.
type campaignConfig struct {
	runs     int
	duration time.Duration
	backends []string
	seed     uint64
	ttl      time.Duration
	workers  int
	slots    int
	out      string
	keep     bool
	svg      bool
	broken   string
	// transfers: 0, or about how long into each term a leader transfers
	// its claim to another worker.
	transfers time.Duration
	kinds     []string // fault kinds to draw from; empty: all the backend has
	exe       string
	// toxiproxy is the toxiproxy server binary each run starts for its
	// proxies.
	toxiproxy string
}

// allBackends are the backends a campaign can run, in the order it runs them.
// The -shared and -session ones are etcd and kube with the workers' stores
// in the backend's batched mode (storeurl's lease=shared and session=).
var allBackends = []string{"filestore", "etcd", "etcd3", "kube", "etcd-shared", "etcd3-shared", "kube-session", "nats", "nats3", "postgres", "postgres-ha", "dynamodb"}

func campaignFlags(args []string) (campaignConfig, error) {
	c := campaignConfig{}
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.IntVar(&c.runs, "runs", 20, "runs per backend")
	fs.DurationVar(&c.duration, "duration", 60*time.Second, "length of each run")
	bs := fs.String("backends", strings.Join(allBackends, ","), "comma-separated backends: "+strings.Join(allBackends, ", "))
	fs.Uint64Var(&c.seed, "seed", 0, "seed of the first run (run i uses seed+i); 0 picks one")
	fs.DurationVar(&c.ttl, "ttl", 2*time.Second, "claim TTL")
	fs.IntVar(&c.workers, "workers", 3, "worker processes per run (at least 3)")
	fs.IntVar(&c.slots, "slots", 0, "compete for a slot group of this size instead of one claim")
	fs.StringVar(&c.out, "out", filepath.Join(os.TempDir(), "tenure-chaos"), "where run histories are written")
	fs.BoolVar(&c.keep, "keep", false, "keep the history of runs that passed too")
	fs.BoolVar(&c.svg, "svg", false, "write the SVG timeline of runs that passed too (a failing run's is always written)")
	fs.StringVar(&c.broken, "broken", "", "make the workers misbehave (late, notoken, release): the campaign must fail")
	fs.DurationVar(&c.transfers, "transfers", 0, "have each leader transfer its claim to another worker about this long into its term (0: never; a single claim only)")
	ks := fs.String("kinds", "", "comma-separated fault kinds to draw from (default: all the backend supports)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	for _, b := range strings.Split(*bs, ",") {
		b = strings.TrimSpace(b)
		if b == "" {
			continue
		}
		known := false
		for _, k := range allBackends {
			known = known || k == b
		}
		if !known {
			return c, fmt.Errorf("chaos: unknown backend %q (have %s)", b, strings.Join(allBackends, ", "))
		}
		c.backends = append(c.backends, b)
	}
	if *ks != "" {
		c.kinds = strings.Split(*ks, ",")
	}
	if c.transfers < 0 || (c.transfers > 0 && c.slots > 0) {
		return c, errors.New("chaos: -transfers must be positive and needs a single claim (no -slots)")
	}
	if c.workers < 3 || c.runs < 1 || len(c.backends) == 0 {
		return c, errors.New("chaos: need -workers >= 3, -runs >= 1 and a backend")
	}
	if c.duration < c.ttl*3+3*time.Second {
		return c, fmt.Errorf("chaos: -duration %v is too short for -ttl %v (need at least 3 TTLs + 3s)", c.duration, c.ttl)
	}
	if c.seed == 0 {
		c.seed = uint64(time.Now().UnixNano()) % 1_000_000_000
	}
	exe, err := os.Executable()
	if err != nil {
		return c, err
	}
	c.exe = exe
	return c, nil
}

// tally sums the results of one backend's runs.
type tally struct {
	runs, violations, acts, accepted, rejected, stale, longPauses, linOps int
	faults                                                                map[string]int
	worst                                                                 time.Duration
}

// runCampaign runs the campaign args describe, writing to out. ok is false
// when a run broke a property.
func runCampaign(args []string, out io.Writer) (ok bool, err error) {
	c, err := campaignFlags(args)
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return false, err
	}
	if c.toxiproxy, err = toxiproc.Tool.Path(); err != nil {
		return false, fmt.Errorf("chaos: %w", err)
	}
	// The postgres backend's servers are copied from one initdb.
	defer pgproc.RemoveTemplate()
	tallies := map[string]*tally{}
	total := 0
	for _, b := range c.backends {
		t := &tally{faults: map[string]int{}}
		tallies[b] = t
		for i := range c.runs {
			seed := c.seed + uint64(i)
			res, dir, err := runOne(c, b, seed)
			if err != nil {
				return false, fmt.Errorf("chaos: %s seed %d: %w", b, seed, err)
			}
			t.add(res)
			total++
			line := res.Line()
			if len(res.Violations) > 0 || c.svg {
				line += " timeline=" + filepath.Join(dir, timeline.File)
			}
			fmt.Fprintf(out, "run %d/%d %s seed=%d %s\n", i+1, c.runs, b, seed, line)
			printViolations(out, res.Violations)
			if len(res.Violations) > 0 {
				fmt.Fprintf(out, "    history kept in %s (replay: -seed %d -runs 1 -backends %s -duration %v -ttl %v -workers %d -slots %d -transfers %v)\n",
					dir, seed, b, c.duration, c.ttl, c.workers, c.slots, c.transfers)
			}
		}
		if t.longPauses >= 3 && t.stale == 0 {
			t.violations++
			fmt.Fprintf(out, "    VIOLATION vacuous: %s: %d long holder pauses and not one stale write rejected\n", b, t.longPauses)
		}
	}
	printTable(out, c.backends, tallies)
	var v int
	var worst time.Duration
	for _, t := range tallies {
		v += t.violations
		worst = max(worst, t.worst)
	}
	fmt.Fprintf(out, "chaos: runs=%d violations=%d worst-recovery=%s\n", total, v, check.FmtRecovery(worst))
	return v == 0, nil
}

func (t *tally) add(r check.Result) {
	t.runs++
	t.violations += len(r.Violations)
	t.acts += r.Acts
	t.accepted += r.Accepted
	t.rejected += r.Rejected
	t.stale += r.StaleCaught
	t.longPauses += r.LongPauses
	t.linOps += r.LinOps
	for k, n := range r.Faults {
		t.faults[k] += n
	}
	t.worst = max(t.worst, r.Recovery)
}

func printTable(out io.Writer, order []string, ts map[string]*tally) {
	kinds := map[string]bool{}
	for _, t := range ts {
		for k := range t.faults {
			kinds[k] = true
		}
	}
	var ks []string
	for k := range kinds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	fmt.Fprintf(out, "\n%-12s %5s %10s %9s %9s %7s %9s %12s %s\n", "backend", "runs", "violations", "accepted", "rejected", "stale", "lin-ops", "worst-recov", "faults")
	for _, b := range order {
		t := ts[b]
		var fs []string
		for _, k := range ks {
			if t.faults[k] > 0 {
				fs = append(fs, fmt.Sprintf("%s:%d", k, t.faults[k]))
			}
		}
		fmt.Fprintf(out, "%-12s %5d %10d %9d %9d %7d %9d %12s %s\n", b, t.runs, t.violations, t.accepted, t.rejected, t.stale, t.linOps, check.FmtRecovery(t.worst), strings.Join(fs, " "))
	}
}

// runOne runs one run of backend b with seed and checks it. It returns the
// run's directory, which is removed when the run passed (unless -keep).
func runOne(c campaignConfig, b string, seed uint64) (res check.Result, dir string, err error) {
	dir = filepath.Join(c.out, fmt.Sprintf("%s-%d", b, seed))
	if err := os.RemoveAll(dir); err != nil {
		return res, dir, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, dir, err
	}
	j, err := journal.Open(filepath.Join(dir, "journal.jsonl"))
	if err != nil {
		return res, dir, err
	}
	defer j.Close()
	f, err := startFence(j)
	if err != nil {
		return res, dir, err
	}
	defer f.Close()
	// A port picked free can be taken by another process before the
	// server binds it: try again, on fresh ports. Each try has a toxiproxy
	// server of its own for the backend's proxies, ended with the run.
	var be servers.Backend
	for try := 1; ; try++ {
		var api *toxiproc.Server
		if api, err = toxiproc.Start(c.toxiproxy, dir); err == nil {
			if be, err = startBackend(c, api, b, dir, seed); err == nil {
				defer api.Close()
				break
			}
			api.Close()
		}
		if try == 3 {
			return res, dir, err
		}
		fmt.Fprintf(os.Stderr, "chaos: %s seed %d: starting the backend: %v; trying again\n", b, seed, err)
	}
	r := &runEnv{
		spec: journal.RunSpec{Backend: b, Seed: seed, Duration: c.duration, TTL: c.ttl, Workers: c.workers, Slots: c.slots, Broken: c.broken, Transfers: c.transfers,
			Faults: schedule.Schedule(seed, pickKinds(be.Kinds(), c.kinds), c.duration, c.ttl), Settle: servers.SettleOf(be, c.ttl)},
		dir: dir, exe: c.exe, j: j, fence: f, be: be,
		workers: make([]*childproc.Process, c.workers), busy: make([]bool, c.workers),
	}
	if err := r.writeSpec(); err != nil {
		be.Close()
		return res, dir, err
	}
	start := time.Now()
	j.Write(journal.Record{Ev: journal.EvBegin})
	for i := range c.workers {
		if err := r.startWorker(i); err != nil {
			r.stopWorkers()
			be.Close()
			return res, dir, err
		}
	}
	// A heal can end late (a restarted server slow to be ready): the run
	// goes on long enough after it for the recovery to be measured. A
	// backend with a settle time may need that much longer; the run waits
	// for it only while nobody has acted since the last heal.
	lastHeal, lastHealMono := r.execute(start)
	end := start.Add(c.duration)
	if t := lastHeal.Add(c.ttl + 2*time.Second); t.After(end) {
		end = t
	}
	time.Sleep(time.Until(end))
	if r.spec.Settle > 0 && !lastHeal.IsZero() {
		settled := lastHeal.Add(c.ttl + 2*time.Second + r.spec.Settle)
		tick := time.NewTicker(100 * time.Millisecond)
		for !f.actedAfter(lastHealMono) && time.Now().Before(settled) {
			<-tick.C
		}
		tick.Stop()
	}
	r.stopWorkers()
	be.Close()
	_ = f.Close()
	j.Write(journal.Record{Ev: journal.EvEnd})

	recs, err := journal.Read(filepath.Join(dir, "journal.jsonl"))
	if err != nil {
		return res, dir, err
	}
	res = check.Check(recs, c.ttl, c.slots, r.spec.Settle)
	check.Linearizable(recs, check.LocalExpiry(r.spec.Backend), &res)
	failed := len(res.Violations) > 0
	if failed || c.svg {
		if err := timeline.Write(filepath.Join(dir, timeline.File), recs, r.spec, res); err != nil {
			return res, dir, err
		}
	}
	switch {
	case failed || c.keep:
		return res, dir, nil
	case c.svg:
		return res, dir, keepOnly(dir, timeline.File)
	}
	return res, dir, os.RemoveAll(dir)
}

// keepOnly removes everything in dir but the file name.
func keepOnly(dir, name string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Name() != name {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

func startBackend(c campaignConfig, api *toxiproc.Server, b, dir string, seed uint64) (servers.Backend, error) {
	name := fmt.Sprintf("%s-%d", b, seed)
	switch b {
	case "filestore":
		d := filepath.Join(dir, "store")
		return &servers.FileBackend{Dir: d}, os.MkdirAll(d, 0o755)
	case "etcd":
		return servers.StartEtcd(api, dir, name, 1, c.workers, "")
	case "etcd3":
		return servers.StartEtcd(api, dir, name, 3, c.workers, "")
	case "kube":
		return servers.StartKube(api, dir, name, c.workers, "")
	case "etcd-shared":
		return servers.StartEtcd(api, dir, name, 1, c.workers, servers.EtcdShared)
	case "etcd3-shared":
		return servers.StartEtcd(api, dir, name, 3, c.workers, servers.EtcdShared)
	case "kube-session":
		return servers.StartKube(api, dir, name, c.workers, servers.KubeSession)
	case "nats":
		return servers.StartNats(api, dir, name, 1, c.workers)
	case "nats3":
		return servers.StartNats(api, dir, name, 3, c.workers)
	case "postgres":
		return servers.StartPostgres(api, name, c.workers)
	case "postgres-ha":
		return servers.StartPostgresHA(api, name, c.workers)
	case "dynamodb":
		return servers.StartDynamo(api, dir, name, c.workers)
	}
	return nil, fmt.Errorf("unknown backend %q", b)
}

// pickKinds is the kinds the backend has, restricted to want if want is
// not empty.
func pickKinds(has, want []string) []string {
	if len(want) == 0 {
		return has
	}
	var out []string
	for _, k := range has {
		for _, w := range want {
			if k == strings.TrimSpace(w) {
				out = append(out, k)
			}
		}
	}
	return out
}

// printViolations prints the first few violations of each check and how
// many more there were; the run's history has them all.
func printViolations(out io.Writer, vs []check.Violation) {
	const show = 3
	seen := map[string]int{}
	for _, v := range vs {
		seen[v.Check]++
		if seen[v.Check] <= show {
			fmt.Fprintf(out, "    VIOLATION %s: %s\n", v.Check, v.Detail)
		}
	}
	for check, n := range seen {
		if n > show {
			fmt.Fprintf(out, "    VIOLATION %s: ... and %d more like it\n", check, n-show)
		}
	}
}
