package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestParseStore checks that --store URLs are checked before anything is
// opened; a command that only reads or changes a store that exists (holders,
// watch, resize) takes a URL that asks for create=true, as run is given it,
// and drops the create, so it never makes a store.
func TestParseStore(t *testing.T) {
	for _, tt := range []struct {
		raw         string
		existing    bool
		says        string // "" when accepted
		wantsCreate bool
	}{
		{"file:///var/lib/tenure", false, "", false},
		{"file:///var/lib/tenure", true, "", false},
		{"file:///var/lib/tenure?create=true", false, "", true},
		{"file:///var/lib/tenure?create=true", true, "", false},
		{"etcd://127.0.0.1:2379/tenure", true, "", false},
		{"kube://default", true, "", false},
		{"mem://", false, "a memory store lives in one process", false},
		{"mem::", false, "a memory store lives in one process", false},
		{"MEM://", true, "a memory store lives in one process", false},
		{"", false, "--store is required", false},
	} {
		parse := parseStore
		if tt.existing {
			parse = parseExistingStore
		}
		loc, err := parse(tt.raw)
		var ue usageError
		switch {
		case tt.says == "" && err != nil:
			t.Errorf("parse(%q) (existing %v) = %v, want it accepted", tt.raw, tt.existing, err)
		case tt.says == "":
			if loc.Create != tt.wantsCreate {
				t.Errorf("parse(%q).Create = %v, want %v", tt.raw, loc.Create, tt.wantsCreate)
			}
		case err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.says):
			t.Errorf("parse(%q) (existing %v) = %v, want a usage error saying %q", tt.raw, tt.existing, err, tt.says)
		}
	}
}

// TestNoStoreByTypo checks that run, holders and watch given a file:// URL
// whose directory does not exist exit 69, say which directory, and leave it
// unmade; run makes it when the URL asks with create=true. (Before, each made
// the directory, and run led alone in a store of its own.)
func TestNoStoreByTypo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "typo", "claims")
	url := "file://" + dir
	for _, args := range [][]string{
		runArgs(url, "k", "a", "--once"),
		{"holders", "--store", url, "--key", "k"},
		{"watch", "--store", url, "--key", "k"},
	} {
		p := startTenure(t, args[0], filepath.Join(t.TempDir(), "journal"), []string{envHold + "=1ms"}, args...)
		if code := p.wait(20 * time.Second); code != exitStore {
			t.Errorf("tenure %s over %s exited %d, want %d", args[0], url, code, exitStore)
		}
		if !p.logged(dir) {
			b, _ := os.ReadFile(p.log)
			t.Errorf("tenure %s: stderr does not name %s:\n%s", args[0], dir, b)
		}
		if _, err := os.Stat(filepath.Dir(dir)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("after tenure %s, stat %s = %v; want it not to exist", args[0], filepath.Dir(dir), err)
		}
	}

	p := startTenure(t, "run", filepath.Join(t.TempDir(), "journal"), []string{envHold + "=1ms"}, runArgs(url+"?create=true", "k", "a", "--once")...)
	if code := p.wait(20 * time.Second); code != 0 {
		b, _ := os.ReadFile(p.log)
		t.Errorf("tenure run over %s?create=true exited %d, want 0:\n%s", url, code, b)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Errorf("after tenure run with create=true, stat %s = %v", dir, err)
	}
}

// TestReadersWriteNothing checks that holders and watch write nothing to the
// store they read. Over an empty directory (a store no writer has opened yet)
// holders finds no holders and leaves it empty; over a directory that holds
// other files but is no store, both exit 69 saying it is not a store, and
// leave it as it was. (Before, opening the store made its lock file in
// either.)
func TestReadersWriteNothing(t *testing.T) {
	empty := t.TempDir()
	p := startTenure(t, "holders", filepath.Join(t.TempDir(), "journal"), nil, "holders", "--store", "file://"+empty, "--key", "k", "--json")
	if code := p.wait(20 * time.Second); code != 0 {
		b, _ := os.ReadFile(p.log)
		t.Errorf("tenure holders over an empty directory exited %d, want 0:\n%s", code, b)
	}
	if !p.logged("[]") {
		b, _ := os.ReadFile(p.log)
		t.Errorf("tenure holders over an empty directory did not print []:\n%s", b)
	}
	if names, err := os.ReadDir(empty); err != nil || len(names) != 0 {
		t.Errorf("after tenure holders, %s holds %v (%v); want it left empty", empty, names, err)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	url := "file://" + dir
	for _, args := range [][]string{
		{"holders", "--store", url, "--key", "k"},
		{"watch", "--store", url, "--key", "k"},
	} {
		p := startTenure(t, args[0], filepath.Join(t.TempDir(), "journal"), nil, args...)
		if code := p.wait(20 * time.Second); code != exitStore {
			b, _ := os.ReadFile(p.log)
			t.Errorf("tenure %s over a directory that is no store exited %d, want %d:\n%s", args[0], code, exitStore, b)
		}
		if !p.logged(dir) || !p.logged("not a store") {
			b, _ := os.ReadFile(p.log)
			t.Errorf("tenure %s: stderr does not say %s is not a store:\n%s", args[0], dir, b)
		}
		if names, err := os.ReadDir(dir); err != nil || len(names) != 1 {
			t.Fatalf("after tenure %s, %s holds %v (%v); want its one file alone", args[0], dir, names, err)
		}
	}
}

// TestStoreErrorOneLine checks that a store that cannot be opened is reported
// in one clean line that names its URL once and the store's own error,
// without the layers it came through. (Before: "open store URL: storeurl:
// open "URL": filestore: ...".)
func TestStoreErrorOneLine(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "none")
	url := "file://" + dir
	for _, args := range [][]string{
		{"holders", "--store", url, "--key", "k"},
		{"run", "--store", url, "--key", "k", "--", "true"},
	} {
		_, code, stderr := tenure(t, args...)
		if code != exitStore || strings.Count(stderr, "\n") != 1 || strings.Count(stderr, url) != 1 || strings.Contains(stderr, "storeurl") || !strings.Contains(stderr, "no such directory") {
			t.Errorf("tenure %s over %s: status %d, stderr %q; want %d and one line naming the URL once and the store's error", args[0], url, code, stderr, exitStore)
		}
	}
}
