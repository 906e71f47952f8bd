package elector

import "sync"

// dispatcher runs callbacks one at a time, in the order they were queued, on
// its own goroutine. The queue is unbounded so that queueing never blocks the
// Elector's loop or its timers, even while a callback (OnElected) blocks.
type dispatcher struct {
	mu     sync.Mutex
	queue  []func() // guarded by mu
	closed bool     // guarded by mu
	wake   chan struct{}
	done   chan struct{}
}

func newDispatcher() *dispatcher {
	return &dispatcher{wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// push queues f; it never blocks. After close it drops f.
func (d *dispatcher) push(f func()) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.queue = append(d.queue, f)
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// close stops accepting work; run delivers what is queued, then returns.
func (d *dispatcher) close() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// run is the dispatcher goroutine. Each f recovers its own panics.
func (d *dispatcher) run() {
	defer close(d.done)
	for {
		d.mu.Lock()
		if len(d.queue) == 0 {
			closed := d.closed
			d.mu.Unlock()
			if closed {
				return
			}
			<-d.wake
			continue
		}
		f := d.queue[0]
		d.queue[0] = nil
		d.queue = d.queue[1:]
		d.mu.Unlock()
		f()
	}
}
