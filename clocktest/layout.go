package clocktest

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"
	"unsafe"

	"github.com/benbjohnson/clock"
)

// mockLayout locates the two unexported fields of clock.Mock that Waiters
// reads: the mutex and, under it, the slice of registered timers and tickers.
//
// clock.Mock has no exported way to ask how many timers are armed, and the
// *clock.Timer and *clock.Ticker it hands out re-arm (Reset) and disarm
// (Stop) themselves straight on that slice, so no wrapper can keep the
// count itself. The module is archived at v1.3.5, so its layout is frozen;
// inspectMock still checks it by name and type when a Clock is made, and
// TestMockLayout fails loudly if a different version ever changes it.
type mockLayout struct {
	mu         uintptr      // offset of Mock.mu, a sync.Mutex that guards timers
	timers     uintptr      // offset of Mock.timers, the registered timers and tickers
	timersType reflect.Type // the slice type of Mock.timers
}

// inspectMock checks that typ has the layout of clock.Mock v1.3.5 that
// armed relies on, and returns it.
func inspectMock(typ reflect.Type) (mockLayout, error) {
	const want = "want clock.Mock from github.com/benbjohnson/clock v1.3.5"
	if typ.Kind() != reflect.Struct {
		return mockLayout{}, fmt.Errorf("clocktest: %v is not a struct; %s", typ, want)
	}
	mu, ok := typ.FieldByName("mu")
	if !ok || mu.Type != reflect.TypeFor[sync.Mutex]() || len(mu.Index) != 1 {
		return mockLayout{}, fmt.Errorf("clocktest: %v has no field mu of type sync.Mutex; %s", typ, want)
	}
	timers, ok := typ.FieldByName("timers")
	if !ok || len(timers.Index) != 1 || timers.Type.Kind() != reflect.Slice {
		return mockLayout{}, fmt.Errorf("clocktest: %v has no slice field timers; %s", typ, want)
	}
	if err := checkTimerInterface(timers.Type.Elem()); err != nil {
		return mockLayout{}, fmt.Errorf("clocktest: %v.timers: %w; %s", typ, err, want)
	}
	return mockLayout{mu: mu.Offset, timers: timers.Offset, timersType: timers.Type}, nil
}

// checkTimerInterface checks that elem is the mock's clockTimer interface:
// Next() time.Time and Tick(time.Time).
func checkTimerInterface(elem reflect.Type) error {
	if elem.Kind() != reflect.Interface {
		return fmt.Errorf("element type %v is not an interface", elem)
	}
	timeType := reflect.TypeFor[time.Time]()
	next, ok := elem.MethodByName("Next")
	if !ok || next.Type.NumIn() != 0 || next.Type.NumOut() != 1 || next.Type.Out(0) != timeType {
		return errors.New("element type has no method Next() time.Time")
	}
	tick, ok := elem.MethodByName("Tick")
	if !ok || tick.Type.NumIn() != 1 || tick.Type.In(0) != timeType || tick.Type.NumOut() != 0 {
		return errors.New("element type has no method Tick(time.Time)")
	}
	return nil
}

// armed returns how many timers and tickers are registered with m: the
// length of m.timers, read while holding m.mu, the same mutex every method
// of the mock, *clock.Timer and *clock.Ticker holds while changing that
// slice. It is the only place the package reaches into the mock; the race
// detector sees the mutex like any other.
func (l mockLayout) armed(m *clock.Mock) int {
	base := unsafe.Pointer(m)
	mu := (*sync.Mutex)(unsafe.Add(base, l.mu))
	timers := reflect.NewAt(l.timersType, unsafe.Add(base, l.timers)).Elem()
	mu.Lock()
	n := timers.Len()
	mu.Unlock()
	return n
}

// earliest returns the earliest deadline among the timers and tickers
// registered with m, read under m.mu like armed; ok is false if there are
// none.
func (l mockLayout) earliest(m *clock.Mock) (next time.Time, ok bool) {
	base := unsafe.Pointer(m)
	mu := (*sync.Mutex)(unsafe.Add(base, l.mu))
	timers := reflect.NewAt(l.timersType, unsafe.Add(base, l.timers)).Elem()
	mu.Lock()
	defer mu.Unlock()
	for i := range timers.Len() {
		at := timers.Index(i).MethodByName("Next").Call(nil)[0].Interface().(time.Time)
		if !ok || at.Before(next) {
			next, ok = at, true
		}
	}
	return next, ok
}
