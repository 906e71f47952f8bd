package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tenure-go/tenure/tests/chaos/journal"
)

// fence is the fenced resource the workers write to: an HTTP server that
// accepts a write for a slot only if its token is at least the highest it
// has accepted for that slot, and journals every write it accepted or
// rejected. It is the resource the elector's documentation asks for: the
// one that catches a holder whose term ended while it was paused.
type fence struct {
	j   *journal.Journal
	srv *http.Server
	ln  net.Listener

	mu      sync.Mutex              // guards highest, last, lastAct and waiters
	highest map[int]int64           // slot -> highest accepted token
	last    map[int]lastOne         // slot -> the writer of the last accepted write
	lastAct int64                   // the latest act (CLOCK_MONOTONIC) of an accepted write
	waiters map[int][]chan struct{} // pid -> closed at that pid's next accepted write
}

type lastOne struct {
	worker string
	pid    int
}

func startFence(j *journal.Journal) (*fence, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("chaos: fence: %w", err)
	}
	f := &fence{j: j, ln: ln, highest: map[int]int64{}, last: map[int]lastOne{}, waiters: map[int][]chan struct{}{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /write", f.write)
	f.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = f.srv.Serve(ln) }()
	return f, nil
}

// URL is where workers send their writes.
func (f *fence) URL() string { return "http://" + f.ln.Addr().String() + "/write" }

// holder is the writer of the last write accepted for slot, if any.
func (f *fence) holder(slot int) (lastOne, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.last[slot]
	return l, ok
}

// actedAfter reports whether the resource accepted a write of an act
// journaled after t (CLOCK_MONOTONIC, ns).
func (f *fence) actedAfter(t int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastAct > t
}

// nextAccept returns a channel closed when the resource next accepts a
// write from process pid.
func (f *fence) nextAccept(pid int) <-chan struct{} {
	c := make(chan struct{})
	f.mu.Lock()
	f.waiters[pid] = append(f.waiters[pid], c)
	f.mu.Unlock()
	return c
}

func (f *fence) write(w http.ResponseWriter, r *http.Request) {
	slot, err1 := strconv.Atoi(r.FormValue("slot"))
	tok, err2 := strconv.ParseInt(r.FormValue("tok"), 10, 64)
	act, err3 := strconv.ParseInt(r.FormValue("act"), 10, 64)
	pid, err4 := strconv.Atoi(r.FormValue("pid"))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rec := journal.Record{Worker: r.FormValue("w"), PID: pid, Tok: tok, Slot: slot, Act: act}
	// The decision and its journal record are made under one lock, so the
	// journal's order of accepts is the order the resource applied them.
	f.mu.Lock()
	ok := tok >= f.highest[slot]
	if ok {
		f.highest[slot] = tok
		f.last[slot] = lastOne{worker: rec.Worker, pid: pid}
		f.lastAct = max(f.lastAct, act)
		rec.Ev = journal.EvAccept
		for _, c := range f.waiters[pid] {
			close(c)
		}
		delete(f.waiters, pid)
	} else {
		rec.Ev = journal.EvReject
		rec.Reason = fmt.Sprintf("token %d below %d", tok, f.highest[slot])
	}
	f.j.Write(rec)
	f.mu.Unlock()
	if !ok {
		http.Error(w, rec.Reason, http.StatusConflict)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (f *fence) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return f.srv.Shutdown(ctx)
}
