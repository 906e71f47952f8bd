package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestUsage checks that bad command lines give one line on stderr and
// exit status 2, and that --help shows examples.
func TestUsage(t *testing.T) {
	run := []string{"run", "--store", "file:///tmp/tenure-usage", "--key", "k"}
	tests := []struct {
		name string
		args []string
		want string // in the one line of stderr
	}{
		{"no subcommand flag", []string{"--bogus"}, "unknown flag: --bogus"},
		{"unknown subcommand", []string{"nope"}, `unknown command "nope"`},
		{"unknown flag", []string{"run", "--bogus"}, "unknown flag: --bogus"},
		{"no store", []string{"run", "--key", "k", "--", "true"}, "--store is required"},
		{"bad store", []string{"run", "--store", "file://rel/dir", "--key", "k", "--", "true"}, "want file:///ABSOLUTE/DIR"},
		{"unknown scheme", []string{"run", "--store", "ftp://x/y", "--key", "k", "--", "true"}, "ftp"},
		{"memory store", []string{"run", "--store", "mem://", "--key", "k", "--", "true"}, "memory store"},
		{"password redacted", []string{"run", "--store", "etcd://u:secret@h:1/p?x=1", "--key", "k", "--", "true"}, "etcd"},
		{"no key", []string{"run", "--store", "file:///tmp/x", "--", "true"}, "--key is required"},
		{"no command", run, "no command to run"},
		{"bad ttl", append(append([]string{}, run...), "--ttl", "soon", "--", "true"), "--ttl"},
		{"zero ttl", append(append([]string{}, run...), "--ttl", "0s", "--", "true"), "--ttl 0s"},
		{"long grace", append(append([]string{}, run...), "--ttl", "3s", "--kill-grace", "2s", "--", "true"), "--kill-grace 2s"},
		{"ttl too short", append(append([]string{}, run...), "--ttl", "1ns", "--", "true"), "--ttl 1ns: the minimum is 1s"},
		{"ttl too long", append(append([]string{}, run...), "--ttl", "100000h", "--", "true"), "--ttl 100000h0m0s: the maximum is"},
		{"zero grace", append(append([]string{}, run...), "--kill-grace", "0", "--once", "--", "true"), "--kill-grace 0s: want a positive duration"},
		{"metrics port", append(append([]string{}, run...), "--metrics", "127.0.0.1:99999", "--once", "--", "true"), "--metrics \"127.0.0.1:99999\""},
		{"zero try", append(append([]string{}, run...), "--try", "0s", "--", "true"), "--try 0s"},
		{"advertise line break", append(append([]string{}, run...), "--advertise", "a\nb", "--", "true"), `--advertise "a\nb"`},
		{"advertise too long", append(append([]string{}, run...), "--advertise", strings.Repeat("a", 257), "--", "true"), "exceeds 256"},
		{"no slots", append(append([]string{}, run...), "--slots", "0", "--", "true"), "--slots 0"},
		{"log level", append(append([]string{}, run...), "--log-level", "loud", "--", "true"), "--log-level"},
		{"holders args", []string{"holders", "--store", "file:///tmp/x", "--key", "k", "extra"}, "unknown command"},
		{"holders no key", []string{"holders", "--store", "file:///tmp/x"}, "--key is required"},
		{"watch interval", []string{"watch", "--store", "file:///tmp/x", "--key", "k", "--interval", "0s"}, "--interval 0s"},
		{"watch no store", []string{"watch", "--key", "k"}, "--store is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := execute(tt.args, &stdout, &stderr)
			if code != exitUsage {
				t.Errorf("tenure %q exited %d, want %d", tt.args, code, exitUsage)
			}
			msg := stderr.String()
			if strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tt.want) {
				t.Errorf("tenure %q: stderr %q, want one line containing %q", tt.args, msg, tt.want)
			}
			if strings.Contains(msg, "secret") {
				t.Errorf("tenure %q: stderr %q shows the password", tt.args, msg)
			}
			if stdout.Len() != 0 {
				t.Errorf("tenure %q: stdout %q, want nothing", tt.args, stdout.String())
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"run", "--help"}, {"holders", "--help"}, {"watch", "--help"}, {"resize", "--help"}} {
		var stdout, stderr bytes.Buffer
		if code := execute(args, &stdout, &stderr); code != 0 {
			t.Errorf("tenure %q exited %d, want 0", args, code)
		}
		out := stdout.String()
		if args[0] != "--help" && !strings.Contains(out, "Examples:") {
			t.Errorf("tenure %q: no examples in\n%s", args, out)
		}
		if strings.Contains(out, "mem://") {
			t.Errorf("tenure %q offers mem://, which every subcommand refuses:\n%s", args, out)
		}
		// Every example line is indented under "Examples:".
		if _, ex, ok := strings.Cut(out, "Examples:\n"); ok {
			ex, _, _ = strings.Cut(ex, "\n\n")
			for _, l := range strings.Split(ex, "\n") {
				if l != "" && !strings.HasPrefix(l, "  ") {
					t.Errorf("tenure %q: example line %q is not indented", args, l)
				}
			}
		}
	}
}

// TestVersion checks --version: the build's module version and Go version.
func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := execute([]string{"--version"}, &stdout, &stderr); code != 0 {
		t.Fatalf("tenure --version exited %d: %s", code, stderr.String())
	}
	out := stdout.String()
	if !strings.HasPrefix(out, "tenure version ") || !strings.Contains(out, "go1.") || strings.Count(out, "\n") != 1 {
		t.Errorf("tenure --version printed %q, want one line \"tenure version VERSION ... goX\"", out)
	}
}
