package lifecycle_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/lifecycle"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestStateString(t *testing.T) {
	want := []string{"follower", "acquiring", "leader", "demoting", "stopped"}
	for i, s := range lifecycle.States() {
		if got := s.String(); got != want[i] {
			t.Errorf("States()[%d].String() = %q, want %q", i, got, want[i])
		}
	}
	if got, want := lifecycle.State(0).String(), "state(0)"; got != want {
		t.Errorf("State(0).String() = %q, want %q", got, want)
	}
}

// TestStateLogsByName checks that the JSON handler shows a state by name, not
// number.
func TestStateLogsByName(t *testing.T) {
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "state", lifecycle.Leader)
	if got := buf.String(); !strings.Contains(got, `"state":"leader"`) {
		t.Errorf("JSON log = %s, want \"state\":\"leader\"", got)
	}
}
