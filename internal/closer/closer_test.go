package closer

import (
	"errors"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCloseOnce checks that the first Close runs the teardown and returns
// its error, and that every later Close returns nil without running it.
func TestCloseOnce(t *testing.T) {
	var o Once
	var mu sync.Mutex
	if o.Closed() {
		t.Fatal("zero Once reports closed")
	}
	boom := errors.New("boom")
	runs := 0
	teardown := func() error { runs++; return boom }
	if err := o.Close(&mu, teardown); !errors.Is(err, boom) {
		t.Errorf("first Close = %v, want the teardown's error", err)
	}
	for range 2 {
		if err := o.Close(&mu, teardown); err != nil {
			t.Errorf("later Close = %v, want nil", err)
		}
	}
	if runs != 1 || !o.Closed() {
		t.Errorf("teardown ran %d times, Closed %v; want once, true", runs, o.Closed())
	}
	var free Once
	if err := free.Close(nil, nil); err != nil || !free.Closed() {
		t.Errorf("Close(nil, nil) = %v, Closed %v; want nil, true", err, free.Closed())
	}
}

// TestMarkOrderedWithMutex checks that a critical section under the mutex
// given to Close sees the mark either before it or after it, never in its
// middle: Close waits for a section that holds the mutex before marking.
func TestMarkOrderedWithMutex(t *testing.T) {
	var o Once
	var mu sync.Mutex
	mu.Lock() // a critical section of the store, in progress
	before := o.Closed()
	done := make(chan error)
	go func() { done <- o.Close(&mu, nil) }()
	// Whatever the goroutine has done by now, it cannot have marked o:
	// the section still holds the mutex.
	after := o.Closed()
	mu.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if before || after {
		t.Errorf("Closed within the section = %v, %v; want false, false", before, after)
	}
	if !o.Closed() {
		t.Error("Closed after Close = false")
	}
}
