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

// TestParseStore: --store URLs are checked before anything is opened; a
// command that only reads a store (holders, watch) refuses one that asks
// for create=true, so it never makes a store.
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
		{"file:///var/lib/tenure?create=true", true, "never creates one", false},
		{"etcd://127.0.0.1:2379/tenure", true, "", false},
		{"kube://default", true, "", false},
		{"mem://", false, "a memory store lives in one process", false},
		{"mem::", false, "such as mem://", false},
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

// TestNoStoreByTypo: run, holders and watch given a file:// URL whose
// directory does not exist exit 69, say which directory, and leave it
// unmade; run makes it when the URL asks with create=true. (Before, each
// made the directory, and run led alone in a store of its own.)
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
