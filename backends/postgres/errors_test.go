package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/tenure-go/tenure/backends"
)

// TestMapError checks that each server error code and driver failure lands in
// the class the elector acts on.
func TestMapError(t *testing.T) {
	tests := []struct {
		err  error
		want error // the sentinel it must wrap; nil: ctx's own error
		cls  backends.Class
	}{
		{&pgconn.PgError{Code: "40001"}, backends.ErrUnavailable, backends.ClassTransient},
		{&pgconn.PgError{Code: "40P01"}, backends.ErrUnavailable, backends.ClassTransient},
		{&pgconn.PgError{Code: "57P01"}, backends.ErrUnavailable, backends.ClassTransient},
		{&pgconn.PgError{Code: "53300"}, backends.ErrUnavailable, backends.ClassTransient},
		{&pgconn.PgError{Code: "25006"}, backends.ErrUnavailable, backends.ClassTransient},
		{&pgconn.PgError{Code: "53200"}, backends.ErrThrottled, backends.ClassTransient},
		{&pgconn.PgError{Code: "28P01"}, backends.ErrPermission, backends.ClassFatal},
		{&pgconn.PgError{Code: "42501"}, backends.ErrPermission, backends.ClassFatal},
		{&pgconn.PgError{Code: "3D000"}, backends.ErrMissingResource, backends.ClassFatal},
		{&pgconn.PgError{Code: "42P01"}, backends.ErrMissingResource, backends.ClassFatal},
		{&pgconn.PgError{Code: "22021"}, backends.ErrInvalid, backends.ClassFatal},
		{&pgconn.PgError{Code: "42703"}, ErrSchema, backends.ClassFatal},
		{&pgconn.PgError{Code: "42809"}, ErrSchema, backends.ClassFatal},
		{&pgconn.PgError{Code: "42804"}, ErrSchema, backends.ClassFatal},
		{&pgconn.PgError{Code: "42601"}, ErrSchema, backends.ClassFatal},
		{&pgconn.PgError{Code: "42939"}, ErrSchema, backends.ClassFatal},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), backends.ErrUnavailable, backends.ClassTransient},
		{fmt.Errorf("query: %w", context.DeadlineExceeded), nil, backends.ClassTransient},
	}
	for _, tt := range tests {
		got := mapError("op", "k", tt.err)
		if tt.want != nil && !errors.Is(got, tt.want) {
			t.Errorf("mapError(%v) = %v, want it to wrap %v", tt.err, got, tt.want)
		}
		if !errors.Is(got, tt.err) {
			t.Errorf("mapError(%v) = %v, want it to wrap the original", tt.err, got)
		}
		if c := backends.Classify(got); c != tt.cls {
			t.Errorf("Classify(mapError(%v)) = %v, want %v", tt.err, c, tt.cls)
		}
	}
}
