package allocator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-go/tenure/backends"
)

// cand is an entry a pass found unreferenced, at the revision it read.
type cand struct {
	rev   int64
	since time.Time
}

// GCStats describes one garbage collection pass.
type GCStats struct {
	Masters, Indexed, References int // entries read
	Deleted                      int // index and master entries deleted
}

// gcLoop runs RunGC every GCInterval until Close.
func (a *Allocator) gcLoop() {
	defer a.wg.Done()
	t := a.cfg.Clock.Ticker(a.cfg.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-a.bg.Done():
			return
		case <-t.C:
			if _, err := a.RunGC(a.bg); err != nil && a.bg.Err() == nil {
				a.cfg.Logger.Warn("allocator: garbage collection", "err", err)
			}
		}
	}
}

// RunGC runs one garbage collection pass now. It deletes an index entry that
// two passes at least Grace apart saw unreferenced at the same revision,
// and a master entry that two such passes saw at the same revision with no
// index entry pointing to it. Passes of one Allocator do not overlap; passes
// of several allocators may, and are safe together. The background pass
// calls it every GCInterval.
func (a *Allocator) RunGC(ctx context.Context) (GCStats, error) {
	select {
	case a.gcmu <- struct{}{}:
	case <-ctx.Done():
		return GCStats{}, fmt.Errorf("allocator: gc %q: %w", a.cfg.Prefix, ctx.Err())
	}
	defer func() { <-a.gcmu }()
	st, err := a.gc(ctx)
	if err != nil {
		return st, fmt.Errorf("allocator: gc %q: %w", a.cfg.Prefix, err)
	}
	return st, nil
}

// gc is one pass. The order of the three listings is what makes it safe
// (see the package doc): masters before the index, the index before the
// references.
func (a *Allocator) gc(ctx context.Context) (GCStats, error) {
	var st GCStats
	pfx := a.cfg.Prefix
	// A pass needs no remaining times, and on a store that can list
	// without them (etcd: without a lease lookup per reference) it does.
	list := a.store.List
	if sc, ok := a.store.(backends.Scanner); ok {
		list = sc.Scan
	}
	masters, err := list(ctx, pfx+idDir)
	if err != nil {
		return st, err
	}
	index, err := list(ctx, pfx+keyDir)
	if err != nil {
		return st, err
	}
	refs, err := list(ctx, pfx+valueDir)
	if err != nil {
		return st, err
	}
	st.Masters, st.Indexed, st.References = len(masters), len(index), len(refs)

	p := &gcPass{a: a, now: a.cfg.Clock.Now(), next: make(map[string]cand), st: &st}
	referenced := make(map[string]bool, len(refs))
	for _, r := range refs {
		rest := strings.TrimPrefix(r.Key, pfx+valueDir)
		if i := strings.LastIndexByte(rest, '/'); i > 0 {
			referenced[rest[:i]] = true
		}
	}
	pointsTo, deletedIndex := p.collectIndex(ctx, index, referenced)
	p.collectMasters(ctx, masters, pointsTo, deletedIndex)
	a.cands = p.next
	return st, errors.Join(p.errs...)
}

// gcPass is what one pass of the collector learns as it goes.
type gcPass struct {
	a    *Allocator
	now  time.Time
	next map[string]cand // the candidates carried to the next pass
	st   *GCStats
	errs []error
}

// due reports whether name was seen unreferenced at rev for Grace, and
// carries it to the next pass if not.
func (p *gcPass) due(name string, rev int64) bool {
	c, ok := p.a.cands[name]
	if !ok || c.rev != rev {
		p.next[name] = cand{rev: rev, since: p.now}
		return false
	}
	if p.now.Sub(c.since) >= p.a.cfg.Grace {
		return true
	}
	p.next[name] = c
	return false
}

// collectIndex deletes the index entries unreferenced for Grace, and
// returns the ID each listed key points to and, for each index entry it
// deleted, since when it was unreferenced.
func (p *gcPass) collectIndex(ctx context.Context, index []backends.Entry, referenced map[string]bool) (pointsTo map[string]uint64, deletedIndex map[string]time.Time) {
	a, pfx := p.a, p.a.cfg.Prefix
	pointsTo = make(map[string]uint64, len(index)) // key -> n
	deletedIndex = make(map[string]time.Time)      // key -> since, for its master
	for _, e := range index {
		key := strings.TrimPrefix(e.Key, pfx+keyDir)
		n, _, err := decodeIndex(e.Value)
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("index %q: %w", key, err))
			continue
		}
		pointsTo[key] = n
		if referenced[key] {
			continue
		}
		name := keyDir + key
		since := a.cands[name].since
		if !p.due(name, e.Revision) {
			continue
		}
		switch err := a.store.CompareAndDelete(ctx, e.Key, e.Revision); {
		case err == nil:
			p.st.Deleted++
			deletedIndex[key] = since
			a.cfg.Logger.Debug("allocator: index collected", "key", key, "id", n, "rev", e.Revision)
		case backends.Classify(err) == backends.ClassLost:
			// Written since it was read: in use again.
		default:
			p.errs = append(p.errs, err)
		}
	}
	return pointsTo, deletedIndex
}

// collectMasters deletes the masters no index entry points to for Grace.
func (p *gcPass) collectMasters(ctx context.Context, masters []backends.Entry, pointsTo map[string]uint64, deletedIndex map[string]time.Time) {
	a, pfx := p.a, p.a.cfg.Prefix
	for _, m := range masters {
		n, err := strconv.ParseUint(strings.TrimPrefix(m.Key, pfx+idDir), 10, 64)
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("master %q: %w", m.Key, backends.ErrCorrupt))
			continue
		}
		key := string(m.Value)
		if pt, ok := pointsTo[key]; ok && pt == n {
			if since, gone := deletedIndex[key]; gone {
				// Its index went in this pass, after being unreferenced
				// for Grace: the next pass may take the master at once,
				// once it has re-read it and seen no index again.
				p.next[idDir+strconv.FormatUint(n, 10)] = cand{rev: m.Revision, since: since}
			}
			continue
		}
		if !p.due(idDir+strconv.FormatUint(n, 10), m.Revision) {
			continue
		}
		switch err := a.store.CompareAndDelete(ctx, m.Key, m.Revision); {
		case err == nil:
			p.st.Deleted++
			a.cfg.Logger.Debug("allocator: master collected", "key", key, "id", n, "rev", m.Revision)
		case backends.Classify(err) == backends.ClassLost:
		default:
			p.errs = append(p.errs, err)
		}
	}
}
