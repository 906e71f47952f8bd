package dynamotest

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCLIFromEnv checks that TENURE_DYNALITE names a ready copy, as its
// cli.js or as a directory that holds it, and that a path holding neither
// is an error naming the variable.
func TestCLIFromEnv(t *testing.T) {
	dir := t.TempDir()
	cli := filepath.Join(dir, "node_modules", "dynalite", "cli.js")
	if err := os.MkdirAll(filepath.Dir(cli), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cli, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, given := range []string{cli, dir} {
		t.Setenv(Env, given)
		if got, err := CLI(); got != cli || err != nil {
			t.Errorf("CLI() with %s=%s = %q, %v; want %q", Env, given, got, err, cli)
		}
	}
	t.Setenv(Env, t.TempDir())
	if _, err := CLI(); err == nil || !strings.Contains(err.Error(), Env) {
		t.Errorf("CLI() with %s naming an empty directory = %v, want an error naming %s", Env, err, Env)
	}
}

// TestInstallOnce checks the cache: installs started at once (as by
// parallel test binaries: each holds its own lock file description) run
// npm once, into the cache entry named after the version, and a later
// install finds it without running npm. npm is a script that records its
// runs and makes the package's cli.js under --prefix.
func TestInstallOnce(t *testing.T) {
	bin, cache := t.TempDir(), t.TempDir()
	runs := filepath.Join(t.TempDir(), "runs")
	script := "#!/bin/sh\necho run >> " + runs + "\nwhile [ $# -gt 0 ]; do if [ \"$1\" = --prefix ]; then p=$2; fi; shift; done\n" +
		"mkdir -p \"$p/node_modules/dynalite\" && echo '// cli' > \"$p/node_modules/dynalite/cli.js\"\n"
	if err := os.WriteFile(filepath.Join(bin, "npm"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("TENURE_CACHE", cache)
	want := filepath.Join(cache, "dynalite-"+Version, "node_modules", "dynalite", "cli.js")
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, err := install(); got != want || err != nil {
				t.Errorf("install() = %q, %v; want %q", got, err, want)
			}
		}()
	}
	wg.Wait()
	if got, err := install(); got != want || err != nil {
		t.Errorf("install() again = %q, %v; want %q", got, err, want)
	}
	b, err := os.ReadFile(runs)
	if err != nil || string(b) != "run\n" {
		t.Errorf("npm ran %q (%v), want once", b, err)
	}
	left, _ := filepath.Glob(filepath.Join(cache, ".dynalite-install.*"))
	if len(left) != 0 {
		t.Errorf("install left %v behind", left)
	}
}
