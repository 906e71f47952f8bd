package toolbuild

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestPath checks that the variable wins; without it the script found above
// the working directory is run once per process and its last line is the
// path; a failing script is an error that names the variable.
func TestPath(t *testing.T) {
	root := t.TempDir()
	count := filepath.Join(root, "runs")
	script := filepath.Join(root, "tools", "build.sh")
	if err := os.MkdirAll(filepath.Dir(script), 0o755); err != nil {
		t.Fatal(err)
	}
	body := "#!/bin/sh\necho run >> " + count + "\necho building >&2\necho progress\necho /cache/tool-v1\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)

	tool := Tool{Env: "TOOLBUILD_TEST_BIN", Script: "tools/build.sh"}
	t.Setenv(tool.Env, "/given/tool")
	if got, err := tool.Path(); got != "/given/tool" || err != nil {
		t.Fatalf("Path with %s set = %q, %v; want /given/tool", tool.Env, got, err)
	}
	t.Setenv(tool.Env, "")
	for range 2 {
		if got, err := tool.Path(); got != "/cache/tool-v1" || err != nil {
			t.Fatalf("Path = %q, %v; want /cache/tool-v1", got, err)
		}
	}
	runs, err := os.ReadFile(count)
	if err != nil || string(runs) != "run\n" {
		t.Fatalf("the script ran %q times (%v), want once", runs, err)
	}

	bad := Tool{Env: "TOOLBUILD_TEST_BAD", Script: "tools/missing.sh"}
	if _, err := bad.Path(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Path of a missing script: %v, want not-exist", err)
	}
}
