package memstore

// expiryHeap is a min-heap of the items that have a TTL, ordered by
// expiresAt. Each item knows its index, so a keep-alive or delete costs
// O(log n) and the heap never holds stale entries.
type expiryHeap []*item

func (h expiryHeap) less(i, j int) bool { return h[i].expiresAt.Before(h[j].expiresAt) }

func (h expiryHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *expiryHeap) push(it *item) {
	it.index = len(*h)
	*h = append(*h, it)
	h.up(it.index)
}

func (h *expiryHeap) remove(i int) {
	old := *h
	n := len(old) - 1
	it := old[i]
	if i != n {
		old.swap(i, n)
	}
	old[n] = nil
	*h = old[:n]
	if i != n {
		if !h.down(i) {
			h.up(i)
		}
	}
	it.index = -1
}

func (h expiryHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h expiryHeap) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

// down sifts i toward the leaves and reports whether it moved.
func (h expiryHeap) down(i0 int) bool {
	i, n := i0, len(h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h.less(r, l) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
