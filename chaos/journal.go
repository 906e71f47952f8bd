package main

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
	evStart   = "start"   // a worker process began
	evElected = "elected" // OnElected was called: Tok, Slot
	evAct     = "act"     // a worker checked its term and is about to write: Tok, Slot, T
	evWrite   = "write"   // the fenced resource answered a worker's write: OK
	evDemoted = "demoted" // OnDemoted was called
	evAccept  = "accept"  // the fenced resource accepted a write
	evReject  = "reject"  // the fenced resource rejected a write
	evFault   = "fault"   // the driver began a fault: Kind, Target
	evHeal    = "heal"    // the driver ended a fault
	evOp      = "op"      // a store operation, for the linearizability check
	evBegin   = "begin"   // the driver began the run, before it started any process
	evEnd     = "end"     // the driver ended the run, after every process stopped
)

// record is one journal line. Which fields are set depends on Ev.
type record struct {
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
	Op     *opRec `json:"op,omitempty"`
}

// monoNow reads CLOCK_MONOTONIC in nanoseconds.
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("chaos: clock_gettime: %v", err)) // cannot happen on Linux
	}
	return ts.Nano()
}

// journal appends records to a file that several processes share. Each
// record is one write(2) on a file opened with O_APPEND, so records of
// different processes never interleave within a line.
type journal struct {
	mu sync.Mutex // guards f
	f  *os.File
}

func openJournal(path string) (*journal, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("chaos: journal: %w", err)
	}
	return &journal{f: f}, nil
}

// write stamps r with the clock, unless it carries a time already, and
// appends it.
func (j *journal) write(r record) {
	if r.T == 0 {
		r.T = monoNow()
	}
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("chaos: journal: %v", err)) // the record has no unmarshalable field
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	_, _ = j.f.Write(append(b, '\n'))
}

func (j *journal) Close() error { return j.f.Close() }

// readJournal returns every record of the journal at path. A last line cut
// short (a process killed inside its write) is dropped; a bad line
// elsewhere is an error.
func readJournal(path string) ([]record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var bad error
	for sc.Scan() {
		if bad != nil {
			return nil, bad
		}
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			bad = fmt.Errorf("chaos: %s: line %q: %w", path, sc.Text(), err)
			continue
		}
		out = append(out, r)
	}
	return out, sc.Err()
}
