package journal

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Every process of a run appends what it did to a journal, one JSON record
// per line, stamped with CLOCK_MONOTONIC. All the processes of a campaign
// run on one host, so their monotonic clocks are one clock: an instant a
// worker wrote can be compared with one the fenced resource or the driver
// wrote. Go's own monotonic reading is the same clock, but it is not
// exported as a number, so it is read here directly.

// Event kinds.
const (
	EvStart   = "start"   // a worker process began
	EvElected = "elected" // OnElected was called: Tok, Slot
	EvAct     = "act"     // a worker checked its term and is about to write: Tok, Slot, T
	EvWrite   = "write"   // the fenced resource answered a worker's write: OK
	EvDemoted = "demoted" // OnDemoted was called
	EvAccept  = "accept"  // the fenced resource accepted a write
	EvReject  = "reject"  // the fenced resource rejected a write
	EvFault   = "fault"   // the driver began a fault: Kind, Target
	EvHeal    = "heal"    // the driver ended a fault
	EvOp      = "op"      // a store operation, for the linearizability check
	EvBegin   = "begin"   // the driver began the run, before it started any process
	EvEnd     = "end"     // the driver ended the run, after every process stopped
)

// Record is one journal line. Which fields are set depends on Ev.
type Record struct {
	Ev     string `json:"ev"`
	T      int64  `json:"t"` // CLOCK_MONOTONIC, ns
	Worker string `json:"w,omitempty"`
	PID    int    `json:"pid,omitempty"`
	Tok    int64  `json:"tok,omitempty"`
	Slot   int    `json:"slot,omitempty"`
	Act    int64  `json:"act,omitempty"` // the act a write belongs to (its T)
	OK     bool   `json:"ok,omitempty"`
	Kind   string `json:"kind,omitempty"`   // fault kind
	Target string `json:"target,omitempty"` // fault target
	Fault  int    `json:"fault,omitempty"`  // fault number, pairs fault with heal
	Reason string `json:"reason,omitempty"`
	Op     *OpRec `json:"op,omitempty"`
}

// MonoNow reads CLOCK_MONOTONIC in nanoseconds.
func MonoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("chaos: clock_gettime: %v", err)) // cannot happen on Linux
	}
	return ts.Nano()
}

// Journal appends records to a file that several processes share. Each
// record is one write(2) on a file opened with O_APPEND, so records of
// different processes never interleave within a line.
type Journal struct {
	mu sync.Mutex // guards f
	f  *os.File
}

func Open(path string) (*Journal, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("chaos: journal: %w", err)
	}
	return &Journal{f: f}, nil
}

// Write stamps r with the clock, unless it carries a time already, and
// appends it.
func (j *Journal) Write(r Record) {
	if r.T == 0 {
		r.T = MonoNow()
	}
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("chaos: journal: %v", err)) // the record has no unmarshalable field
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	_, _ = j.f.Write(append(b, '\n'))
}

func (j *Journal) Close() error { return j.f.Close() }

// Read returns every record of the journal at path. A last line cut
// short (a process killed inside its write) is dropped; a bad line
// elsewhere is an error.
func Read(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var bad error
	for sc.Scan() {
		if bad != nil {
			return nil, bad
		}
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			bad = fmt.Errorf("chaos: %s: line %q: %w", path, sc.Text(), err)
			continue
		}
		out = append(out, r)
	}
	return out, sc.Err()
}
