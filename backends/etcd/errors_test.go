package etcd

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestMapError(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		want  error // the sentinel it must wrap; nil: none
		class backends.Class
	}{
		{"no leader", rpctypes.ErrNoLeader, backends.ErrUnavailable, backends.ClassTransient},
		{"not leader", rpctypes.ErrNotLeader, backends.ErrUnavailable, backends.ClassTransient},
		{"leader changed", rpctypes.ErrLeaderChanged, backends.ErrUnavailable, backends.ClassTransient},
		{"timeout", rpctypes.ErrTimeout, backends.ErrUnavailable, backends.ClassTransient},
		{"server stopped", rpctypes.ErrStopped, backends.ErrUnavailable, backends.ClassTransient},
		{"grpc unavailable", status.Error(codes.Unavailable, "connection refused"), backends.ErrUnavailable, backends.ClassTransient},
		{"grpc deadline", status.Error(codes.DeadlineExceeded, "deadline"), backends.ErrUnavailable, backends.ClassTransient},
		{"no endpoints", clientv3.ErrNoAvailableEndpoints, backends.ErrUnavailable, backends.ClassTransient},
		{"too many requests", rpctypes.ErrTooManyRequests, backends.ErrThrottled, backends.ClassTransient},
		{"no space", rpctypes.ErrNoSpace, backends.ErrThrottled, backends.ClassTransient},
		{"permission denied", rpctypes.ErrPermissionDenied, backends.ErrPermission, backends.ClassFatal},
		{"auth failed", rpctypes.ErrAuthFailed, backends.ErrPermission, backends.ClassFatal},
		{"invalid token", rpctypes.ErrInvalidAuthToken, backends.ErrPermission, backends.ClassFatal},
		{"user empty", rpctypes.ErrUserEmpty, backends.ErrPermission, backends.ClassFatal},
		{"grpc unauthenticated", status.Error(codes.Unauthenticated, "x"), backends.ErrPermission, backends.ClassFatal},
		{"too many ops", rpctypes.ErrTooManyOps, backends.ErrInvalid, backends.ClassFatal},
		{"request too large", rpctypes.ErrRequestTooLarge, backends.ErrInvalid, backends.ClassFatal},
		{"lease ttl too large", rpctypes.ErrLeaseTTLTooLarge, backends.ErrInvalid, backends.ClassFatal},
		{"corrupt", rpctypes.ErrCorrupt, backends.ErrCorrupt, backends.ClassFatal},
		{"context deadline", context.DeadlineExceeded, nil, backends.ClassTransient},
		{"context canceled", fmt.Errorf("x: %w", context.Canceled), nil, backends.ClassTransient},
		{"unknown", errors.New("something odd"), nil, backends.ClassTransient},
	}
	for _, tt := range tests {
		got := mapError(tt.err)
		if !errors.Is(got, tt.err) {
			t.Errorf("%s: mapError(%v) = %v, which no longer wraps the original", tt.name, tt.err, got)
		}
		if tt.want != nil && !errors.Is(got, tt.want) {
			t.Errorf("%s: mapError(%v) = %v, want it to wrap %v", tt.name, tt.err, got, tt.want)
		}
		if c := backends.Classify(got); c != tt.class {
			t.Errorf("%s: Classify(mapError(%v)) = %v, want %v", tt.name, tt.err, c, tt.class)
		}
	}
	if mapError(nil) != nil {
		t.Errorf("mapError(nil) != nil")
	}
}

func TestTTLSeconds(t *testing.T) {
	tests := []struct {
		ttl  string
		want int64
		ok   bool
	}{
		{"0s", 0, true}, {"1ns", 1, true}, {"999ms", 1, true}, {"1s", 1, true}, {"1.001s", 2, true},
		{"2h", 7200, true}, {"-1ns", 0, false},
	}
	for _, tt := range tests {
		d, err := time.ParseDuration(tt.ttl)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ttlSeconds("create", "k", d)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ttlSeconds(%v) = %d, %v; want %d, ok %v", d, got, err, tt.want, tt.ok)
		}
	}
	if _, err := ttlSeconds("create", "k", backends.MaxTTL); err != nil {
		t.Errorf("ttlSeconds(MaxTTL) = %v, want nil", err)
	}
	if _, err := ttlSeconds("create", "k", backends.MaxTTL+1); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("ttlSeconds(MaxTTL+1ns) = %v, want ErrInvalid", err)
	}
}
