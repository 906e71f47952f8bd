package schedule

import (
	"reflect"
	"testing"
	"time"
)

func TestScheduleReplaysFromItsSeed(t *testing.T) {
	kinds := append(append([]string(nil), WorkerKinds...), FLatency, FPartition, FServerPause, FServerKill, FIsolate)
	const d, ttl = 20 * time.Second, 2 * time.Second
	for seed := uint64(1); seed <= 200; seed++ {
		a, b := Schedule(seed, kinds, d, ttl), Schedule(seed, kinds, d, ttl)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("schedule(%d) differs between two calls:\n%v\n%v", seed, a, b)
		}
		for _, f := range a {
			if f.At < ttl || f.At+f.Dur > d-ttl-2*time.Second {
				t.Errorf("seed %d: fault %+v is outside [TTL, end - TTL - 2s]", seed, f)
			}
			if f.Kind == FStopLong && f.Dur <= ttl {
				t.Errorf("seed %d: %s fault lasts %v, not more than the TTL %v", seed, f.Kind, f.Dur, ttl)
			}
			if f.Kind == FStopShort && f.Dur >= ttl {
				t.Errorf("seed %d: %s fault lasts %v, not less than the TTL %v", seed, f.Kind, f.Dur, ttl)
			}
		}
	}
	if reflect.DeepEqual(Schedule(1, kinds, d, ttl), Schedule(2, kinds, d, ttl)) {
		t.Error("seeds 1 and 2 gave the same schedule")
	}
}
