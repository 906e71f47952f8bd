package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/tenure-go/tenure/internal/childproc"
	"github.com/tenure-go/tenure/tests/chaos/journal"
	"github.com/tenure-go/tenure/tests/chaos/schedule"
	"github.com/tenure-go/tenure/tests/chaos/servers"
)

// workTime is how long a worker works between checking its term and
// writing to the fenced resource.
const workTime = 100 * time.Millisecond

// runEnv is a run in progress.
type runEnv struct {
	spec  journal.RunSpec
	dir   string
	exe   string
	j     *journal.Journal
	fence *fence
	be    servers.Backend

	mu      sync.Mutex // guards workers and busy
	workers []*childproc.Process
	busy    []bool // a worker fault holds the worker (stopped, or down until its restart)
}

func (r *runEnv) startWorker(i int) error {
	argv := []string{r.exe, "worker",
		"-store", r.be.URL(i),
		"-id", "w" + strconv.Itoa(i),
		"-ttl", r.spec.TTL.String(),
		"-slots", strconv.Itoa(r.spec.Slots),
		"-fence", r.fence.URL(),
		"-journal", filepath.Join(r.dir, "journal.jsonl"),
		"-work", workTime.String(),
	}
	if r.spec.Broken != "" {
		argv = append(argv, "-broken", r.spec.Broken)
	}
	if r.spec.Transfers > 0 {
		argv = append(argv, "-transfers", r.spec.Transfers.String())
	}
	p, err := servers.Spawn(fmt.Sprintf("w%d", i), filepath.Join(r.dir, "procs.log"), argv)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.workers[i] = p
	r.mu.Unlock()
	return nil
}

// holder is the index of the worker whose write the fenced resource
// accepted last, or -1.
func (r *runEnv) holder() int {
	l, ok := r.fence.holder(0)
	if !ok {
		return -1
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, p := range r.workers {
		if p != nil && p.Pid() == l.pid && p.Alive() {
			return i
		}
	}
	return -1
}

// claim reserves a worker for a worker fault: the holder, or another one
// (pick chooses), that is up and not held by another worker fault.
func (r *runEnv) claim(wantHolder bool, pick uint32) (int, *childproc.Process, bool) {
	h := r.holder()
	r.mu.Lock()
	defer r.mu.Unlock()
	if wantHolder {
		if h < 0 || r.busy[h] {
			return 0, nil, false
		}
		r.busy[h] = true
		return h, r.workers[h], true
	}
	n := len(r.workers)
	for k := range n {
		i := (int(pick) + k) % n
		if i != h && !r.busy[i] && r.workers[i] != nil && r.workers[i].Alive() {
			r.busy[i] = true
			return i, r.workers[i], true
		}
	}
	return 0, nil, false
}

func (r *runEnv) unclaim(i int) {
	r.mu.Lock()
	r.busy[i] = false
	r.mu.Unlock()
}

// apply starts fault f and returns what ends it.
func (r *runEnv) apply(f schedule.Fault) (heal func(), target string, ok bool) {
	switch f.Kind {
	case schedule.FKill, schedule.FTerm:
		i, p, ok := r.claim(f.Pick%2 == 0, f.Pick/2)
		if !ok {
			i, p, ok = r.claim(false, f.Pick/2)
		}
		if !ok {
			return nil, "", false
		}
		sig := syscall.SIGKILL
		if f.Kind == schedule.FTerm {
			sig = syscall.SIGTERM
		}
		p.Signal(sig)
		return func() {
			select {
			case <-p.Done():
			case <-time.After(10 * time.Second):
				p.Signal(syscall.SIGKILL) // a SIGTERM not obeyed in time
				<-p.Done()
			}
			if err := r.startWorker(i); err != nil {
				fmt.Fprintf(os.Stderr, "chaos: restart w%d: %v\n", i, err)
			}
			r.unclaim(i)
		}, fmt.Sprintf("w%d", i), true
	case schedule.FStopShort, schedule.FStopLong, schedule.FStopFollower:
		i, p, ok := r.claim(f.Kind != schedule.FStopFollower, f.Pick)
		if ok && f.Kind == schedule.FStopLong {
			// The pause that fencing exists for: the holder is stopped
			// in the middle of its work, after it checked its term and
			// before it writes. Its write is accepted, and it is stopped
			// half its work time later.
			select {
			case <-r.fence.nextAccept(p.Pid()):
				time.Sleep(workTime / 2)
			case <-time.After(r.spec.TTL):
			}
		}
		if !ok || !p.Pause() {
			if ok {
				r.unclaim(i)
			}
			return nil, "", false
		}
		return func() {
			p.Signal(syscall.SIGCONT)
			r.unclaim(i)
		}, fmt.Sprintf("w%d", i), true
	}
	return r.be.Apply(f, r.holder())
}

// execute runs the schedule against the run, journaling each fault as it
// begins and ends, and returns when every fault has ended, with the time
// the last one did, by the wall clock and CLOCK_MONOTONIC (zero if none
// did).
func (r *runEnv) execute(start time.Time) (time.Time, int64) {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		last     time.Time
		lastMono int64
	)
	for _, f := range r.spec.Faults {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(start.Add(f.At)))
			heal, target, ok := r.apply(f)
			if !ok {
				r.j.Write(journal.Record{Ev: journal.EvFault, Fault: f.N, Kind: f.Kind, Reason: "skipped: no target"})
				return
			}
			r.j.Write(journal.Record{Ev: journal.EvFault, Fault: f.N, Kind: f.Kind, Target: target})
			time.Sleep(f.Dur)
			healed := make(chan struct{})
			go func() {
				heal()
				close(healed)
			}()
			t := time.NewTimer(healWithin)
			select {
			case <-healed:
				r.j.Write(journal.Record{Ev: journal.EvHeal, Fault: f.N, Kind: f.Kind, Target: target})
			case <-t.C:
				// The fault may still be in place; the run goes on without it.
				r.j.Write(journal.Record{Ev: journal.EvHeal, Fault: f.N, Kind: f.Kind, Target: target, Reason: fmt.Sprintf("abandoned: the heal had not returned after %v", healWithin)})
			}
			t.Stop()
			mu.Lock()
			last, lastMono = time.Now(), journal.MonoNow()
			mu.Unlock()
		}()
	}
	wg.Wait()
	return last, lastMono
}

// healWithin bounds a heal. toxiproxy can deadlock removing a toxic from a
// link whose connection is closing at that moment (RemoveToxic holds the
// proxy's toxic collection while it waits for the link, and the ending link
// waits for the collection to remove itself); that fault's heal never
// returns. Seen once in about 300 runs, on nats3, as a run that never ended.
var healWithin = 20 * time.Second

// stopWorkers ends every worker: SIGCONT (in case), SIGTERM, and SIGKILL
// for one that has not exited after 10 s.
func (r *runEnv) stopWorkers() {
	r.mu.Lock()
	ws := append([]*childproc.Process(nil), r.workers...)
	r.mu.Unlock()
	for _, p := range ws {
		if p != nil {
			p.Signal(syscall.SIGCONT)
			p.Signal(syscall.SIGTERM)
		}
	}
	for _, p := range ws {
		if p == nil {
			continue
		}
		select {
		case <-p.Done():
		case <-time.After(10 * time.Second):
			p.Signal(syscall.SIGKILL)
			<-p.Done()
		}
	}
}

func (r *runEnv) writeSpec() error {
	b, err := json.MarshalIndent(r.spec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(r.dir, "spec.json"), b, 0o644)
}
