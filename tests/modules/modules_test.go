// Package modules checks the repository's module layout from outside, the
// way a user's build sees it: what a program that imports some of tenure's
// packages gets in its build list, and that no module links a server the
// tests run as a process.
package modules

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const root = "github.com/tenure-go/tenure"

// servers are the modules of the servers the tests run as processes,
// built from tools modules: no module of the library may require them,
// and no package, tests included, may import them.
var servers = []string{
	"github.com/Shopify/toxiproxy/v2",
	"github.com/nats-io/nats-server/v2",
	"go.etcd.io/etcd/server/v3",
	"go.etcd.io/etcd/tests/v3",
	"k8s.io/kubernetes",
}

// sdks are the client libraries of the stores and of the metrics package,
// by the module that may require them.
var sdks = map[string][]string{
	"backends/etcd":     {"go.etcd.io/etcd/client/v3"},
	"backends/kube":     {"k8s.io/client-go", "k8s.io/api", "k8s.io/apimachinery"},
	"backends/nats":     {"github.com/nats-io/nats.go"},
	"backends/postgres": {"github.com/jackc/pgx/v5"},
	"backends/dynamodb": {"github.com/aws/aws-sdk-go-v2/service/dynamodb", "github.com/aws/aws-sdk-go-v2/config"},
	"metrics":           {"github.com/prometheus/client_golang"},
}

// repo is the repository's root directory: the one with go.work.
func repo(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.work above the test's directory")
		}
		dir = up
	}
}

// goCmd runs the go command in dir with extra environment, failing the
// test on an error, and returns its standard output.
func goCmd(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	cmd := exec.Command(gobin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return string(out)
}

// workspace is the modules go.work uses, as directories relative to the
// repository root ("." for the root module).
func workspace(t *testing.T, repoDir string) []string {
	t.Helper()
	out := goCmd(t, repoDir, nil, "work", "edit", "-json")
	var dirs []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if d, ok := strings.CutPrefix(line, `"DiskPath": "`); ok {
			dirs = append(dirs, filepath.Clean(strings.TrimSuffix(strings.TrimSuffix(d, ","), `"`)))
		}
	}
	if len(dirs) < 2 {
		t.Fatalf("go.work uses %v, want the root module and the modules at the SDK edge", dirs)
	}
	return dirs
}

// requires is the module paths a go.mod file requires, directly or not.
func requires(t *testing.T, gomod string) []string {
	t.Helper()
	raw, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	var mods []string
	block := false
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "require (":
			block = true
		case block && line == ")":
			block = false
		case block && line != "":
			mods = append(mods, strings.Fields(line)[0])
		case strings.HasPrefix(line, "require "):
			mods = append(mods, strings.Fields(line)[1])
		}
	}
	return mods
}

// TestNoServerLinked checks that no module of the workspace requires a
// server's module, and no package of any of them, tests included, imports
// one.
func TestNoServerLinked(t *testing.T) {
	repoDir := repo(t)
	for _, dir := range workspace(t, repoDir) {
		for _, m := range requires(t, filepath.Join(repoDir, dir, "go.mod")) {
			if slices.Contains(servers, m) {
				t.Errorf("%s/go.mod requires the server module %s", dir, m)
			}
		}
		deps := strings.Fields(goCmd(t, filepath.Join(repoDir, dir), []string{"GOWORK=off", "GOFLAGS=-mod=mod"}, "list", "-deps", "-test", "./..."))
		for _, d := range deps {
			for _, s := range servers {
				if d == s || strings.HasPrefix(d, s+"/") {
					t.Errorf("a package of module %s imports %s", dir, d)
				}
			}
		}
	}
}

// TestRootRequiresNoSDK checks that the root module requires no store's
// or metrics' client library, and that each is required only by the
// module at its edge (and by the modules that gather them: the command,
// the examples and the tests).
func TestRootRequiresNoSDK(t *testing.T) {
	repoDir := repo(t)
	gather := []string{"cmd/tenure", "examples/indexer", "tests"}
	for _, dir := range workspace(t, repoDir) {
		if slices.Contains(gather, dir) {
			continue
		}
		reqs := requires(t, filepath.Join(repoDir, dir, "go.mod"))
		for owner, mods := range sdks {
			if owner == dir {
				continue
			}
			for _, m := range mods {
				if slices.Contains(reqs, m) {
					t.Errorf("module %s requires %s, the client library of %s", dir, m, owner)
				}
			}
		}
	}
}

// consumer makes a module outside the repository whose main package
// imports pkgs (import paths under tenure), with a replace of each tenure
// module it needs to this checkout, tidies it and returns its build list
// (go list -m all) and its module graph (go mod graph).
func consumer(t *testing.T, repoDir string, mods, pkgs []string) (list []string, graph [][2]string) {
	t.Helper()
	dir := t.TempDir()
	var gomod strings.Builder
	fmt.Fprintf(&gomod, "module example.com/consumer\n\ngo 1.26.0\n\n")
	var sum []byte
	for _, m := range mods {
		path, disk := root, repoDir
		if m != "." {
			path, disk = root+"/"+m, filepath.Join(repoDir, m)
		}
		fmt.Fprintf(&gomod, "require %s v0.0.0-00010101000000-000000000000\nreplace %s => %s\n", path, path, disk)
		s, err := os.ReadFile(filepath.Join(disk, "go.sum"))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		sum = append(sum, s...)
	}
	var main strings.Builder
	main.WriteString("package main\n\nimport (\n")
	for _, p := range pkgs {
		fmt.Fprintf(&main, "\t_ %q\n", root+"/"+p)
	}
	main.WriteString(")\n\nfunc main() {}\n")
	for name, body := range map[string][]byte{"go.mod": []byte(gomod.String()), "go.sum": sum, "main.go": []byte(main.String())} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"GOWORK=off", "GOFLAGS=-mod=mod"}
	goCmd(t, dir, env, "mod", "tidy")
	goCmd(t, dir, env, "build", "-o", os.DevNull, ".")
	for _, line := range strings.Split(strings.TrimSpace(goCmd(t, dir, env, "list", "-m", "all")), "\n") {
		list = append(list, strings.Fields(line)[0])
	}
	for _, line := range strings.Split(strings.TrimSpace(goCmd(t, dir, env, "mod", "graph")), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 {
			graph = append(graph, [2]string{modPath(f[0]), modPath(f[1])})
		}
	}
	return list, graph
}

// modPath is the module path of "path@version".
func modPath(s string) string { p, _, _ := strings.Cut(s, "@"); return p }

// TestCoreConsumer checks that a program that imports only the elector and
// the filestore builds with at most 10 modules in its build list, itself
// and tenure included.
func TestCoreConsumer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module outside the repository")
	}
	list, _ := consumer(t, repo(t), []string{"."}, []string{"elector", "backends/filestore"})
	if len(list) > 10 {
		t.Errorf("a program importing elector and backends/filestore has %d modules in its build list, want at most 10:\n%s", len(list), strings.Join(list, "\n"))
	}
	for owner, mods := range sdks {
		for _, m := range mods {
			if slices.Contains(list, m) {
				t.Errorf("a program importing elector and backends/filestore has %s (%s) in its build list", m, owner)
			}
		}
	}
	t.Logf("%d modules: %s", len(list), strings.Join(list, " "))
}

// TestStoreConsumers checks that a program that imports one store with an
// SDK (and the elector) gets in its build list only the root module's
// requirements, that store's module, and what that store's client library
// and the root's requirements themselves require: none of another store's client, of a server, or of the
// metrics library unless the store's own client requires it (the etcd
// client's go.mod requires client_golang).
func TestStoreConsumers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds modules outside the repository")
	}
	repoDir := repo(t)
	core, _ := consumer(t, repoDir, []string{"."}, []string{"elector", "backends/filestore"})
	for _, store := range []string{"backends/etcd", "backends/kube", "backends/nats", "backends/postgres", "backends/dynamodb"} {
		t.Run(filepath.Base(store), func(t *testing.T) {
			list, graph := consumer(t, repoDir, []string{".", store}, []string{"elector", store})
			// What the store's client libraries and the core's
			// requirements require, transitively.
			fromSDK := map[string]bool{}
			queue := append(slices.Clone(sdks[store]), core...)
			for len(queue) > 0 {
				m := queue[0]
				queue = queue[1:]
				if fromSDK[m] {
					continue
				}
				fromSDK[m] = true
				for _, e := range graph {
					if e[0] == m {
						queue = append(queue, e[1])
					}
				}
			}
			for _, m := range list {
				switch {
				case m == "example.com/consumer", m == root+"/"+store, slices.Contains(core, m):
				case slices.Contains(servers, m):
					t.Errorf("a program importing %s has the server module %s in its build list", store, m)
				case !fromSDK[m]:
					t.Errorf("a program importing %s has %s in its build list, which neither the core nor the store's client library requires", store, m)
				}
			}
			for owner, mods := range sdks {
				for _, m := range mods {
					if owner != store && slices.Contains(list, m) && !fromSDK[m] {
						t.Errorf("a program importing %s has %s (%s) in its build list", store, m, owner)
					}
				}
			}
			t.Logf("%d modules", len(list))
		})
	}
}
