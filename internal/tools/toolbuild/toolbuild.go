// Package toolbuild finds the binary of a test server that a pinned tools
// module builds: the path an environment variable names (the Makefile
// builds the servers once and sets it), or else the binary build.sh puts
// in the cache, built on first use. It serves the test helpers and the
// fault campaign, which run servers as processes of their own.
//
// A build runs at most once per process for each script; builds started
// by parallel test binaries are serialized by build.sh's lock on the
// cache, so a cold cache costs one build.
//
// Not promised: the script is looked for in the directories above the
// working directory, so a test binary or a campaign run from outside the
// repository must be given the binary through the environment.
package toolbuild

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Tool is a server binary built by a script of the repository.
type Tool struct {
	// Env names the variable that gives the binary's path, skipping the
	// build.
	Env string
	// Script is the build script's path from the repository root; it
	// prints the binary's path as the last line of its output.
	Script string
}

type result struct {
	path string
	err  error
}

var (
	mu    sync.Mutex
	built = map[string]*result{}
)

// Path returns the binary of t: the path t.Env names if it is set, else
// the one t.Script prints, building it if the cache does not hold it yet.
func (t Tool) Path() (string, error) {
	if p := os.Getenv(t.Env); p != "" {
		return p, nil
	}
	mu.Lock()
	defer mu.Unlock()
	if r, ok := built[t.Script]; ok {
		return r.path, r.err
	}
	p, err := t.build()
	built[t.Script] = &result{p, err}
	return p, err
}

func (t Tool) build() (string, error) {
	script, err := find(t.Script)
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(script)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("toolbuild: %s (set %s to skip the build): %w\n%s", t.Script, t.Env, err, strings.TrimSpace(stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	p := strings.TrimSpace(lines[len(lines)-1])
	if p == "" {
		return "", fmt.Errorf("toolbuild: %s printed no binary path", t.Script)
	}
	return p, nil
}

// find looks for rel in the working directory and the directories above
// it.
func find(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("toolbuild: %w", err)
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("toolbuild: %s not found above the working directory: %w", rel, os.ErrNotExist)
		}
		dir = up
	}
}
