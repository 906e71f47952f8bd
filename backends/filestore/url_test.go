package filestore

import (
	"context"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/storeurl"
)

// TestOpenMissingDir checks that a directory that does not exist is refused,
// by name, and not made (a typo must not give a process a private store),
// unless WithCreate asks for it.
func TestOpenMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "typo", "claims")
	s, err := Open(context.Background(), dir, WithClock(testBoot, newFakeClock()))
	if err == nil {
		s.Close()
		t.Fatalf("Open(%s) of a directory that does not exist succeeded", dir)
	}
	if !strings.Contains(err.Error(), dir) || !errors.Is(err, backends.ErrMissingResource) || backends.Classify(err) != backends.ClassFatal {
		t.Errorf("Open(%s) = %v; want a fatal error naming it and wrapping ErrMissingResource", dir, err)
	}
	if _, err := os.Stat(filepath.Dir(dir)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after the refused Open, stat %s = %v; want it not to exist", filepath.Dir(dir), err)
	}

	s, err = Open(context.Background(), dir, WithClock(testBoot, newFakeClock()), WithCreate())
	if err != nil {
		t.Fatalf("Open(%s, WithCreate()): %v", dir, err)
	}
	mustCreate(t, s, "k", "v", 0)
	s.Close()
	// Once it exists, it opens without WithCreate and holds what was written.
	s, err = Open(context.Background(), dir, WithClock(testBoot, newFakeClock()))
	if err != nil {
		t.Fatalf("Open(%s) of the created store: %v", dir, err)
	}
	defer s.Close()
	if _, err := s.Get(context.Background(), "k"); err != nil {
		t.Errorf("Get(k) in the reopened store: %v", err)
	}
}

func TestURLDir(t *testing.T) {
	for raw, want := range map[string]string{
		"file:///var/lib/claims":     "/var/lib/claims",
		"file:///var/lib/claims/":    "/var/lib/claims",
		"file://localhost/var/a%20b": "/var/a b",
		"file:///a/../b":             "/b",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := urlDir(u); err != nil || got != want {
			t.Errorf("urlDir(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
	for raw, says := range map[string]string{
		"file://":        "no directory",
		"file:///":       "no directory",
		"file://rel/dir": `host "rel"`,
	} {
		if _, err := storeurl.Parse(raw); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), says) {
			t.Errorf("storeurl.Parse(%q) = %v, want it to say %q", raw, err, says)
		}
	}
}
