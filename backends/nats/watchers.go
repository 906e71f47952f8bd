package nats

// watcherSet is a hub's watchers by their encoded prefix, so that a
// message is matched against the prefixes of its subject that some watch
// has, not against every watch: with an elector per claim, a store has a
// watch per claim, each on its claim's key.
type watcherSet struct {
	byPrefix map[string]map[*watcher]struct{}
	lengths  map[int]int // how many watchers have a prefix of each length
}

func newWatcherSet(ws ...*watcher) watcherSet {
	set := watcherSet{byPrefix: map[string]map[*watcher]struct{}{}, lengths: map[int]int{}}
	for _, w := range ws {
		set.add(w)
	}
	return set
}

func (set watcherSet) add(w *watcher) {
	m := set.byPrefix[w.prefix]
	if m == nil {
		m = map[*watcher]struct{}{}
		set.byPrefix[w.prefix] = m
	}
	m[w] = struct{}{}
	set.lengths[len(w.prefix)]++
}

// remove takes w out and reports whether it was in.
func (set watcherSet) remove(w *watcher) bool {
	m := set.byPrefix[w.prefix]
	if _, ok := m[w]; !ok {
		return false
	}
	delete(m, w)
	if len(m) == 0 {
		delete(set.byPrefix, w.prefix)
	}
	if set.lengths[len(w.prefix)]--; set.lengths[len(w.prefix)] == 0 {
		delete(set.lengths, len(w.prefix))
	}
	return true
}

// matching calls f for each watcher whose prefix subj begins with.
func (set watcherSet) matching(subj string, f func(*watcher)) {
	for n := range set.lengths {
		if n > len(subj) {
			continue
		}
		for w := range set.byPrefix[subj[:n]] {
			f(w)
		}
	}
}

// all returns every watcher in the set.
func (set watcherSet) all() []*watcher {
	var out []*watcher
	for _, m := range set.byPrefix {
		for w := range m {
			out = append(out, w)
		}
	}
	return out
}
