package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The demo's indexers append what they do to one journal file, one JSON
// record per line, stamped with CLOCK_MONOTONIC: a clock every process on
// the host shares and no wall-clock step moves, so intervals written by
// different processes can be compared.

// record is one journal line.
type record struct {
	Event string `json:"event"` // listening, serve-start, serve-stop, stale-rejected, resign
	ID    string `json:"id"`
	PID   int    `json:"pid"`
	Addr  string `json:"addr,omitempty"`
	Token int64  `json:"token,omitempty"`
	Slot  int    `json:"slot,omitempty"`
	Err   string `json:"err,omitempty"` // why a term was resigned
	Mono  int64  `json:"mono_ns"`
}

// monoNow reads CLOCK_MONOTONIC. It is the journal's only clock.
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

// journal appends records to a file shared by several processes. Each
// record is one write(2) to a file opened with O_APPEND, so lines from
// different processes never interleave.
type journal struct {
	mu sync.Mutex // guards f
	f  *os.File
}

func openJournal(path string) (*journal, error) {
	if path == "" {
		return &journal{}, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("indexer: journal: %w", err)
	}
	return &journal{f: f}, nil
}

func (j *journal) write(r record) {
	if j.f == nil {
		return
	}
	r.PID = os.Getpid()
	r.Mono = monoNow()
	b, _ := json.Marshal(r)
	j.mu.Lock()
	defer j.mu.Unlock()
	_, _ = j.f.Write(append(b, '\n'))
}

func (j *journal) Close() error {
	if j.f == nil {
		return nil
	}
	return j.f.Close()
}

// journalReader reads the records appended since its last call.
type journalReader struct {
	f   *os.File
	buf []byte
}

func (r *journalReader) next() ([]record, error) {
	chunk, err := io.ReadAll(r.f)
	if err != nil {
		return nil, err
	}
	r.buf = append(r.buf, chunk...)
	var out []record
	for {
		i := bytes.IndexByte(r.buf, '\n')
		if i < 0 {
			return out, nil
		}
		var rec record
		if err := json.Unmarshal(r.buf[:i], &rec); err != nil {
			return out, fmt.Errorf("indexer: journal line %q: %w", r.buf[:i], err)
		}
		out = append(out, rec)
		r.buf = r.buf[i+1:]
	}
}

// readJournal returns every record of the journal at path.
func readJournal(path string) ([]record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("indexer: journal line %q: %w", sc.Text(), err)
		}
		out = append(out, rec)
	}
	return out, sc.Err()
}

func monoDuration(from, to int64) time.Duration { return time.Duration(to - from) }
