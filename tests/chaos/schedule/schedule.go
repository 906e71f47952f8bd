package schedule

import (
	"math/rand/v2"
	"time"
)

// Fault kinds. Which ones a run draws from depends on its backend.
const (
	FKill         = "kill"          // SIGKILL a worker (the holder or any), restart it later
	FTerm         = "term"          // SIGTERM a worker: it stops and releases; restart it later
	FStopShort    = "stop-short"    // SIGSTOP the holder for less than the TTL
	FStopLong     = "stop-long"     // SIGSTOP the holder for more than the TTL
	FStopFollower = "stop-follower" // SIGSTOP a worker that does not hold the claim
	FLatency      = "latency"       // add latency between a worker and the backend (toxiproxy)
	FPartition    = "partition"     // cut a worker off the backend (toxiproxy: blackhole or reset)
	FServerPause  = "server-pause"  // SIGSTOP a backend server process, then SIGCONT
	FServerKill   = "server-kill"   // SIGKILL a backend server process, restart it on its data
	FIsolate      = "isolate"       // cut an etcd member off its peers (toxiproxy on peer traffic)
)

var WorkerKinds = []string{FKill, FTerm, FStopShort, FStopLong, FStopFollower}

// Fault is one entry of a run's schedule. The schedule is drawn from the
// run's seed alone, so the seed replays it: the same faults, of the same
// kinds and lengths, at the same offsets from the start of the run. Which
// process "the holder" is at that moment depends on the run, so a replay
// repeats the schedule, not every interleaving.
type Fault struct {
	N    int           `json:"n"`
	At   time.Duration `json:"at"` // from the start of the run
	Kind string        `json:"kind"`
	Dur  time.Duration `json:"dur"`            // how long it lasts (for kill and term: until the restart)
	Pick uint32        `json:"pick"`           // chooses the target among the candidates
	Mode string        `json:"mode,omitempty"` // partition: blackhole or reset
	Lat  time.Duration `json:"lat,omitempty"`  // latency: the added delay
}

// Schedule draws the faults of a run of length d with claims of ttl, from
// kinds. Faults start after a warm-up of one TTL (a first leader is
// elected) and all end a quiet period before the end, TTL plus two seconds,
// in which the recovery is measured. Gaps between starts are shorter than
// most faults, so faults overlap.
func Schedule(seed uint64, kinds []string, d, ttl time.Duration) []Fault {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	between := func(lo, hi float64) time.Duration { // a duration in [lo, hi) TTLs
		return time.Duration((lo + (hi-lo)*r.Float64()) * float64(ttl))
	}
	start, end := ttl, d-ttl-2*time.Second
	var out []Fault
	if len(kinds) == 0 {
		return nil
	}
	for at := start + between(0, 1); at < end; at += between(0.3, 1.5) {
		f := Fault{N: len(out) + 1, At: at, Kind: kinds[r.IntN(len(kinds))], Pick: r.Uint32()}
		switch f.Kind {
		case FKill, FTerm:
			f.Dur = between(0, 1)
		case FStopShort:
			f.Dur = between(0.2, 0.7)
		case FStopLong:
			f.Dur = between(1.5, 2.5)
		case FStopFollower:
			f.Dur = between(0.5, 2.5)
		case FLatency:
			f.Dur, f.Lat = between(1, 3), between(0.05, 0.4)
		case FPartition:
			f.Dur, f.Mode = between(0.5, 3), [...]string{"blackhole", "reset"}[r.IntN(2)]
		case FServerPause:
			f.Dur = between(0.3, 2)
		case FServerKill:
			f.Dur = between(0.1, 1.5)
		case FIsolate:
			f.Dur = between(1, 3)
		}
		if f.Dur > end-at {
			f.Dur = end - at
			if f.Kind == FStopLong && f.Dur < ttl*3/2 {
				// Too near the end to outlast the TTL: a short stop.
				f.Kind, f.Dur = FStopShort, min(f.Dur, ttl*7/10)
			}
		}
		out = append(out, f)
	}
	return out
}
