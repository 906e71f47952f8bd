package filestore

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/fsnotify/fsnotify"
	"github.com/tenure-go/tenure/backends"
)

// watch is one Watch call's stream. Its goroutine is owned by the Store and
// joined by Close.
type watch struct {
	done chan struct{} // closed by stop
	once sync.Once
}

func (w *watch) stop() { w.once.Do(func() { close(w.done) }) }

// mark is the last state a watch reported (or found at its start) for one
// canonical file.
type mark struct {
	rev     int64
	deleted bool
}

// watchBuffer is how many events a watch holds for a slow consumer before
// its goroutine waits; the kernel queues notifications meanwhile, and if its
// queue overflows the stream ends.
const watchBuffer = 64

// Watch implements backends.Watcher through inotify on the store's
// directory. When a key's file is replaced it reads the file and reports
// every state the key went through since the last one it reported, in
// revision order: a put for each new revision, a delete for each tombstone.
// A watch that fell behind finds the states it missed in the file's history;
// if it fell further behind than the history reaches, the stream ends
// rather than skip a revision. Keep-alives and expiry produce no event.
// Temp files are never reported.
//
// The stream ends (the channel is closed) when ctx is done, the store is
// closed, inotify reports an error (such as a queue overflow), the directory
// goes away, a key's file is removed or moved by someone else, the history
// does not reach back far enough, or a file turns out corrupt; the consumer
// re-reads and, in the last case, gets the error.
func (s *Store) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	if err := s.usable(ctx, "watch", prefix); err != nil {
		return nil, err
	}
	if err := backends.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("filestore: watch: %w", err)
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("filestore: watch %q: %w", prefix, fsError(err))
	}
	if err := fw.Add(s.dir); err != nil {
		fw.Close()
		return nil, fmt.Errorf("filestore: watch %q: %w", prefix, fsError(err))
	}
	// The baseline is read after inotify is armed: a write that lands in
	// between is either in the baseline or announced, never lost.
	seen, err := s.baseline(prefix)
	if err != nil {
		fw.Close()
		return nil, fmt.Errorf("filestore: watch %q: %w", prefix, err)
	}
	w := &watch{done: make(chan struct{})}
	s.mu.Lock()
	if s.watches == nil {
		s.mu.Unlock()
		fw.Close()
		return nil, fmt.Errorf("filestore: watch %q: %w", prefix, backends.ErrClosed)
	}
	s.watches[w] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()

	out := make(chan backends.Event, watchBuffer)
	go s.runWatch(ctx, w, fw, prefix, seen, out)
	return out, nil
}

// baseline reads the current state of every file under prefix.
func (s *Store) baseline(prefix string) (map[string]mark, error) {
	names, err := s.readDirNames()
	if err != nil {
		return nil, err
	}
	seen := make(map[string]mark)
	for _, name := range names {
		kind, key, err := parseName(name)
		switch {
		case err != nil:
			return nil, s.corruptFile(name, err)
		case kind == nameTemp || kind == nameOther:
			continue
		case kind == nameInline && !strings.HasPrefix(key, prefix):
			continue
		}
		r, found, err := s.readFile(name)
		if err != nil {
			return nil, err
		}
		if found && strings.HasPrefix(r.Key, prefix) {
			seen[name] = mark{rev: r.Revision, deleted: r.Deleted}
		}
	}
	return seen, nil
}

func (s *Store) runWatch(ctx context.Context, w *watch, fw *fsnotify.Watcher, prefix string, seen map[string]mark, out chan<- backends.Event) {
	defer s.wg.Done()
	defer close(out)
	defer fw.Close()
	defer func() {
		s.mu.Lock()
		delete(s.watches, w)
		s.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.done:
			return
		case <-fw.Errors:
			return // overflow or a read error: events may be lost
		case fev, ok := <-fw.Events:
			if !ok {
				return
			}
			evs, cont := s.translate(fev, prefix, seen)
			if !cont {
				return
			}
			for _, ev := range evs {
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				case <-w.done:
					return
				}
			}
		}
	}
}

// translate turns one inotify notification into the store events it
// stands for. cont is false when the stream must end.
func (s *Store) translate(fev fsnotify.Event, prefix string, seen map[string]mark) (evs []backends.Event, cont bool) {
	if filepath.Clean(fev.Name) == s.dir {
		return nil, false // the directory itself was removed or moved
	}
	name := filepath.Base(fev.Name)
	kind, key, err := parseName(name)
	switch {
	case err != nil:
		return nil, false
	case kind == nameTemp || kind == nameOther:
		return nil, true
	case kind == nameInline && !strings.HasPrefix(key, prefix):
		return nil, true
	}
	if fev.Has(fsnotify.Remove) || fev.Has(fsnotify.Rename) {
		// The store replaces key files but never removes or moves them:
		// someone else did, and the key's history is no longer trustworthy.
		return nil, false
	}
	if !fev.Has(fsnotify.Create) && !fev.Has(fsnotify.Write) {
		return nil, true
	}
	r, found, err := s.readFile(name)
	if err != nil {
		return nil, false
	}
	if !found || !strings.HasPrefix(r.Key, prefix) {
		return nil, true
	}
	// The states newer than the last one reported, oldest first. A key
	// without a mark had no file when the watch started: its first state
	// is revision 1, which follows "deleted at revision 0".
	last, known := seen[name]
	if !known {
		last = mark{rev: 0, deleted: true}
	}
	var newer []record
	for i := len(r.History) - 1; i >= -1; i-- {
		st := r
		if i >= 0 {
			st = r.History[i]
		}
		if st.Revision > last.rev || (st.Revision == last.rev && st.Deleted && !last.deleted) {
			newer = append(newer, st)
		}
	}
	if len(newer) == 0 {
		return nil, true // a keep-alive, or states already reported
	}
	if !precedes(record{Revision: last.rev, Deleted: last.deleted}, newer[0]) {
		// The watch fell further behind than the file's history reaches:
		// it cannot report every revision, so it ends.
		return nil, false
	}
	now := s.judge.now()
	for _, st := range newer {
		if st.Deleted {
			evs = append(evs, backends.Event{Kind: backends.EventDelete, Entry: backends.Entry{
				Key: st.Key, Revision: st.Revision, CreateRevision: st.CreateRevision,
			}})
			continue
		}
		_, left := s.judge.live(st, now)
		evs = append(evs, backends.Event{Kind: backends.EventPut, Entry: entryOf(st, left)})
	}
	seen[name] = mark{rev: r.Revision, deleted: r.Deleted}
	return evs, true
}
