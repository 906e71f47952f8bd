package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain lets the demo re-execute this test binary as its members: the
// demo starts os.Executable() with "serve ...".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// TestDemo runs the demo end to end, with real member processes over a
// filestore, killed, stopped, added and stopped gracefully, and requires
// every one of its checks to hold. The times shards take to be owned again
// are reported, not asserted (-strict-timing=false): they are measured by
// the benchmarks of package shards, and a loaded machine must not fail a
// correct run; shards never owned again within 10s still fail it, but after
// the SIGSTOP, where a member stopped inside a filestore write's commit
// keeps that key locked until it continues (see backends/filestore): the
// demo then checks that c got its share back after SIGCONT.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and waits out real lease TTLs")
	}
	var out, errOut bytes.Buffer
	code := run([]string{"demo", "-strict-timing=false"}, &out, &errOut)
	t.Logf("demo output:\n%s", out.String())
	if code != 0 {
		t.Fatalf("demo exited %d; stderr:\n%s", code, errOut.String())
	}
	for _, want := range []string{
		"after SIGKILL of b, every shard owned again",
		"after SIGSTOP of c, every shard owned again",
		"ok   no acknowledged write lost",
		"ok   no write applied under an older token",
		"ok   balance restored",
		"all checks held",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
}
