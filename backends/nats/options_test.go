package nats

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
)

// TestOptionsInvalid checks that an option given a value the store cannot use
// fails New with an error that names the value and wraps backends.ErrInvalid,
// before New looks at its connection.
func TestOptionsInvalid(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []Option
		want string
	}{
		{"nil clock", []Option{WithClock(nil)}, "nil clock"},
		{"short grace", []Option{WithGCGrace(500 * time.Millisecond)}, "gc grace 500ms below 1s"},
		{"zero timeout", []Option{WithTimeout(0)}, "timeout 0s not positive"},
		{"negative timeout", []Option{WithTimeout(-time.Second)}, "timeout -1s not positive"},
		{"no replicas", []Option{WithCreate(0)}, "0 replicas, want 1 to 5"},
		{"six replicas", []Option{WithCreate(6)}, "6 replicas, want 1 to 5"},
	} {
		_, err := New(context.Background(), nil, "b", c.opts...)
		if !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "nats: ") {
			t.Errorf("%s: New = %v, want an error with %q wrapping ErrInvalid", c.name, err, c.want)
		}
	}
	if _, err := New(context.Background(), nil, "b", nil, WithGCGrace(time.Hour)); err == nil || !strings.Contains(err.Error(), "nil connection") {
		t.Errorf("New with valid options and a nil option = %v, want the nil connection refused", err)
	}
}
