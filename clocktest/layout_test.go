package clocktest

import (
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

// TestMockLayout fails when clock.Mock's fields are not the ones Waiters
// was written against (github.com/benbjohnson/clock v1.3.5). If it fails
// after a dependency change, read the new Mock's source: Waiters needs a
// sync.Mutex named mu guarding a slice named timers that holds exactly the
// armed timers and tickers (appended when armed or Reset, removed when
// fired or stopped); TestWaitersFollowsTheMock checks that meaning.
func TestMockLayout(t *testing.T) {
	if _, err := inspectMock(reflect.TypeFor[clock.Mock]()); err != nil {
		t.Fatalf("DEPENDENCY LAYOUT CHANGED: %v", err)
	}
}

type notTimer interface{ Next() time.Time }

type badTick interface {
	Next() time.Time
	Tick()
}

type goodTimer interface {
	Next() time.Time
	Tick(time.Time)
}

func TestInspectMockRejectsOtherLayouts(t *testing.T) {
	tests := []struct {
		name string
		typ  reflect.Type
	}{
		{"not a struct", reflect.TypeFor[int]()},
		{"no mu", reflect.TypeFor[struct{ timers []goodTimer }]()},
		{"mu not a mutex", reflect.TypeFor[struct {
			mu     sync.RWMutex
			timers []goodTimer
		}]()},
		{"no timers", reflect.TypeFor[struct{ mu sync.Mutex }]()},
		{"timers not a slice", reflect.TypeFor[struct {
			mu     sync.Mutex
			timers map[int]goodTimer
		}]()},
		{"timers of structs", reflect.TypeFor[struct {
			mu     sync.Mutex
			timers []time.Time
		}]()},
		{"timers without Tick", reflect.TypeFor[struct {
			mu     sync.Mutex
			timers []notTimer
		}]()},
		{"timers with another Tick", reflect.TypeFor[struct {
			mu     sync.Mutex
			timers []badTick
		}]()},
	}
	for _, tt := range tests {
		if _, err := inspectMock(tt.typ); err == nil {
			t.Errorf("inspectMock(%s: %v) = nil error, want one", tt.name, tt.typ)
		}
	}
	good := reflect.TypeFor[struct {
		now    time.Time
		mu     sync.Mutex
		timers []goodTimer
	}]()
	l, err := inspectMock(good)
	if err != nil {
		t.Fatalf("inspectMock(%v): %v", good, err)
	}
	if want := good.Field(1).Offset; l.mu != want {
		t.Errorf("mu offset = %d, want %d", l.mu, want)
	}
	if want := good.Field(2).Offset; l.timers != want {
		t.Errorf("timers offset = %d, want %d", l.timers, want)
	}
}

// TestWaitersFollowsTheMock checks the meaning Waiters relies on: the
// mock's list holds exactly what is armed, whichever way it was armed or
// disarmed, including Stop and Reset, which bypass the Clock.
func TestWaitersFollowsTheMock(t *testing.T) {
	c := New(start)
	want := func(step string, n int) {
		t.Helper()
		if got := c.Waiters(); got != n {
			t.Fatalf("after %s: Waiters() = %d, want %d", step, got, n)
		}
	}
	want("New", 0)
	tm := c.Timer(time.Second)
	want("Timer(1s)", 1)
	c.After(2 * time.Second)
	want("After(2s)", 2)
	tk := c.Ticker(time.Second)
	want("Ticker(1s)", 3)
	af := c.AfterFunc(3*time.Second, func() {})
	want("AfterFunc(3s)", 4)
	_, cancel := c.WithTimeout(t.Context(), 4*time.Second)
	want("WithTimeout(4s)", 5)
	cancel()
	want("cancel", 4)
	af.Stop()
	want("AfterFunc Stop", 3)
	c.Add(time.Second) // fires tm and a tick
	want("Add(1s)", 2)
	<-tm.C
	tm.Reset(time.Second)
	want("Reset of the fired Timer", 3)
	tm.Stop()
	tk.Stop()
	want("Stop of Timer and Ticker", 1)
	tk.Reset(time.Second)
	want("Reset of the stopped Ticker", 2)
	c.Add(time.Second) // fires the After and a tick
	want("Add(1s)", 1)
	tk.Stop()
	want("Ticker Stop", 0)
}
