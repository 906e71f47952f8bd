package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/postgres"
	"github.com/tenure-go/tenure/backends/postgres/pgtest"
	"github.com/tenure-go/tenure/storeurl"
)

const secret = "s3cr%21t-pw" // percent-encoded in URLs; "s3cr!t-pw" decoded

// TestURLParse: what storeurl accepts and refuses for postgres://, and
// that the password never shows in what it prints.
func TestURLParse(t *testing.T) {
	good := []string{
		"postgres://h/db",
		"postgres://u:" + secret + "@h1:5433,h2/db?table=claims.leases&sslmode=require",
		"postgres://h/db?table=leases&create=true",
		"POSTGRES://[::1]:5432/db",
	}
	for _, raw := range good {
		loc, err := storeurl.Parse(raw)
		if err != nil {
			t.Errorf("storeurl.Parse(%q): %v, want success", raw, err)
			continue
		}
		if s := loc.String(); strings.Contains(s, "s3cr") {
			t.Errorf("Location.String() of %q = %q: shows the password", raw, s)
		}
	}
	bad := []string{
		"postgres://h",                         // no database
		"postgres://h/",                        // no database
		"postgres://h/a/b",                     // two path segments
		"postgres:///db",                       // no host
		"postgres://h/db?table=Bad",            // upper case
		"postgres://h/db?table=a.b.c",          // three parts
		"postgres://h/db?table=x;drop",         // not an identifier
		"postgres://h/db?sslmode=maybe",        // unknown mode
		"postgres://h/db?search_path=x",        // unknown parameter
		"postgres://u:" + secret + "@h:0/db",   // bad port, with a password
		"postgres://u:" + secret + "@h/db?x=1", // unknown parameter, with a password
	}
	for _, raw := range bad {
		_, err := storeurl.Parse(raw)
		if err == nil {
			t.Errorf("storeurl.Parse(%q) = success, want an error", raw)
			continue
		}
		if !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("storeurl.Parse(%q) = %v, want an error wrapping ErrInvalid", raw, err)
		}
		if strings.Contains(err.Error(), "s3cr") {
			t.Errorf("storeurl.Parse(%q) error %q shows the password", raw, err)
		}
	}
}

// TestURLOpen opens stores by URL on a real server: create=true makes the
// table; without it a missing table is ErrMissingResource; a server that
// cannot be reached is ErrUnavailable. No error shows the password.
func TestURLOpen(t *testing.T) {
	srv := pgtest.Shared(t)
	db := srv.NewDatabase(t)
	base := fmt.Sprintf("postgres://postgres:%s@%s/%s?sslmode=disable&table=urls.claims", secret, srv.Addr(), db)
	ctx := t.Context()

	_, err := storeurl.Open(ctx, base)
	if !errors.Is(err, backends.ErrMissingResource) {
		t.Errorf("Open(%s) of a missing table = %v, want ErrMissingResource", base, err)
	}
	noPassword(t, err)

	st, err := storeurl.Open(ctx, base+"&create=true")
	if err != nil {
		t.Fatalf("Open(create=true): %v", err)
	}
	e, err := st.CreateIfAbsent(ctx, "k", []byte("v"), time.Second)
	if err != nil {
		t.Fatalf("CreateIfAbsent: %v", err)
	}
	st.Close()
	st, err = storeurl.Open(ctx, base) // the table exists now
	if err != nil {
		t.Fatalf("Open of an existing table: %v", err)
	}
	defer st.Close()
	if got, err := st.Get(ctx, "k"); err != nil || got.CreateRevision != e.CreateRevision {
		t.Errorf("Get(k) after reopening = %+v, %v; want token %d", got, err, e.CreateRevision)
	}
	if schema, table := st.(*postgres.Store).Table(); schema != "urls" || table != "claims" {
		t.Errorf("Table() = %s.%s, want urls.claims", schema, table)
	}

	ctx2, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	unreachable := fmt.Sprintf("postgres://postgres:%s@127.0.0.1:1/%s?sslmode=disable", secret, db)
	_, err = storeurl.Open(ctx2, unreachable)
	if backends.Classify(err) != backends.ClassTransient {
		t.Errorf("Open(%s) = %v, want a transient error", unreachable, err)
	}
	noPassword(t, err)
}

func noPassword(t *testing.T, err error) {
	t.Logf("error: %v", err)
	t.Helper()
	if err != nil && (strings.Contains(err.Error(), "s3cr") || strings.Contains(fmt.Sprintf("%+v", err), "s3cr")) {
		t.Errorf("error %q shows the password", err)
	}
}
