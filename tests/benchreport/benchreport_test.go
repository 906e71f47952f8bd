package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var update = flag.Bool("update", false, "rewrite testdata/performance.golden.md")

func parseFile(t *testing.T, name string) Run {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := Parse(f)
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return r
}

func TestParseCaptured(t *testing.T) {
	r := parseFile(t, "memstore.txt")
	if r.Pkg != "github.com/tenure-go/tenure/backends/memstore" || r.CPU != "Intel(R) Xeon(R) Processor" || r.Failed {
		t.Errorf("header: pkg %q cpu %q failed %v", r.Pkg, r.CPU, r.Failed)
	}
	var names []string
	for _, res := range r.Results {
		names = append(names, res.Name)
	}
	want := []string{"BenchmarkCreateIfAbsent", "BenchmarkCompareAndSet/success", "BenchmarkCompareAndSet/conflict", "BenchmarkKeepAlive", "BenchmarkGet", "BenchmarkTxn10"}
	if !slices.Equal(names, want) {
		t.Errorf("names = %q, want %q", names, want)
	}
	got := r.Results[0]
	wantM := []Metric{{435.2, "ns/op"}, {256, "B/op"}, {3, "allocs/op"}}
	if got.N != 635277 || !slices.Equal(got.Metrics, wantM) {
		t.Errorf("first result = %d %v, want 635277 %v", got.N, got.Metrics, wantM)
	}
}

func TestParseRepetitions(t *testing.T) {
	r := parseFile(t, "elector.txt")
	figs := Figures(r.Results)
	var got []string
	for _, f := range figs {
		got = append(got, f.Name+" "+f.Unit)
	}
	want := []string{
		"BenchmarkHandover max-ms", "BenchmarkHandover overlaps", "BenchmarkHandover p50-ms",
		"BenchmarkCrashFailover max-ms", "BenchmarkCrashFailover overlaps", "BenchmarkCrashFailover p50-ms",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("figures = %q, want %q", got, want)
	}
	crash := figs[3]
	if !slices.Equal(crash.Values, []float64{2004, 2011}) || crash.Median() != 2007.5 {
		t.Errorf("crash max-ms values %v median %v, want [2004 2011] median 2007.5", crash.Values, crash.Median())
	}
	if lo, hi := crash.Range(); lo != 2004 || hi != 2011 {
		t.Errorf("crash max-ms range = %v..%v, want 2004..2011", lo, hi)
	}
}

// TestParseInterleaved parses output with a server's log line between a
// benchmark's name and its results, a benchmark's own log, and a skipped
// benchmark. Unlike the other testdata, which is captured as go test printed
// it, this file is put together in the shape go test prints when a
// benchmark's process writes to its output while the benchmark runs.
func TestParseInterleaved(t *testing.T) {
	r := parseFile(t, "interleaved.txt")
	if len(r.Results) != 2 {
		t.Fatalf("results = %+v, want 2", r.Results)
	}
	first := r.Results[0]
	if first.Name != "BenchmarkCompetingClaims/tenure=per-claim-lease/claims=1" || first.N != 1 {
		t.Errorf("first = %q N=%d, want the per-claim-lease claims=1 result, N=1", first.Name, first.N)
	}
	wantM := []Metric{{2.167, "cpu-ms/s"}, {2.2, "req/renewal"}, {2.167, "req/s"}, {0, "terms"}}
	if !slices.Equal(first.Metrics, wantM) {
		t.Errorf("first metrics = %v, want %v", first.Metrics, wantM)
	}
	if r.Results[1].Name != "BenchmarkCompetingClaims/tenure=shared-lease/claims=100" {
		t.Errorf("second name = %q", r.Results[1].Name)
	}
	if !slices.Equal(r.Skipped, []string{"BenchmarkRenewal"}) || r.Failed {
		t.Errorf("skipped %q failed %v, want [BenchmarkRenewal] and not failed", r.Skipped, r.Failed)
	}
}

func TestParseFailed(t *testing.T) {
	r := parseFile(t, "failed.txt")
	if !r.Failed || len(r.Results) != 0 {
		t.Errorf("failed %v results %v, want failed with no results", r.Failed, r.Results)
	}
	if got := runError(r); got == "" {
		t.Error("runError of a failed run is empty")
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"}, {3, "3"}, {2007.5, "2008"}, {435.2, "435"}, {52.47, "52.5"},
		{2.167, "2.17"}, {0.132, "0.132"}, {0.03, "0.03"}, {0.0012345, "0.00123"}, {1136158, "1136158"},
	}
	for _, tt := range tests {
		if got := Format(tt.in); got != tt.want {
			t.Errorf("Format(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSlug(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Competing claims on etcd", "competing-claims-on-etcd"},
		{"memstore operations", "memstore-operations"},
		{"Session mode on Kubernetes", "session-mode-on-kubernetes"},
		{"The safety model, in full", "the-safety-model-in-full"},
		{"`tenure run`", "tenure-run"},
	}
	for _, tt := range tests {
		if got := Slug(tt.in); got != tt.want {
			t.Errorf("Slug(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestArgs(t *testing.T) {
	s := Section{Pkg: "./tests/shards", Bench: "^BenchmarkEtcdSteady$", Benchtime: "5x", Short: "2x",
		Args: []string{"-shards.steady=20s"}, ShortArgs: []string{"-shards.steady=5s"}}
	full := strings.Join(args(s, 3, false, time.Minute), " ")
	if want := "test -run ^$ -bench ^BenchmarkEtcdSteady$ -benchtime 5x -count 3 -timeout 1m0s ./tests/shards -args -shards.steady=20s"; full != want {
		t.Errorf("full args = %q, want %q", full, want)
	}
	short := strings.Join(args(s, 1, true, 0), " ")
	if want := "test -run ^$ -bench ^BenchmarkEtcdSteady$ -benchtime 2x -short -count 1 ./tests/shards -args -shards.steady=5s"; short != want {
		t.Errorf("short args = %q, want %q", short, want)
	}
	if got, want := command(s, 1, false), "go test -run '^$' -bench '^BenchmarkEtcdSteady$' -benchtime 5x -count 1 ./tests/shards -args -shards.steady=20s"; got != want {
		t.Errorf("command = %q, want %q", got, want)
	}
}

// TestRenderGolden compares the page rendered from captured output with the
// golden copy (rerun with -update after a deliberate change of the layout).
func TestRenderGolden(t *testing.T) {
	rep := Report{
		Machine: Machine{
			Date: "2026-11-27 17:13 UTC", Commit: "25521cc0e03c", GoVersion: "go1.26.8 linux/amd64",
			CPU: "Intel(R) Xeon(R) Processor", Cores: 2, Memory: "23.5 GiB", Load: "1.20 / 1.50", Mode: "test",
		},
	}
	for _, c := range []struct {
		file string
		sec  Section
	}{
		{"elector.txt", Section{Title: "Elector handover and crash failover", About: "Trials.", Pkg: "./elector", Bench: "^(BenchmarkHandover|BenchmarkCrashFailover)$", Benchtime: "2x", Hide: []string{"ns/op"}}},
		{"memstore.txt", Section{Title: "memstore operations", About: "Operations.", Pkg: "./backends/memstore", Bench: ".", Show: []string{"allocs/op", "ns/op"}}},
		{"interleaved.txt", Section{Title: "Competing claims on etcd", About: "Claims.", Pkg: "./backends/etcd", Bench: "^BenchmarkCompetingClaims$", Benchtime: "1x"}},
		{"stores.txt", Section{Title: "etcd, NATS and PostgreSQL side by side", About: "Stores.", Pkg: "./tests/storebench", Bench: "^BenchmarkStores$", Benchtime: "1x", Hide: []string{"ns/op"}, Columns: 1}},
		{"failed.txt", Section{Title: "Shard handover", About: "Leaves.", Pkg: "./shards", Bench: "^BenchmarkLeave$", Benchtime: "20x"}},
	} {
		r := parseFile(t, c.file)
		rep.Sections = append(rep.Sections, SectionResult{Section: c.sec, Command: command(c.sec, 2, false), Run: r, Err: runError(r)})
	}
	var b bytes.Buffer
	if err := Render(&b, rep); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "performance.golden.md")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("rendered page differs from %s (rerun with -update if the change is meant):\n%s", golden, got)
	}
	for _, s := range rep.Sections {
		if !strings.Contains(b.String(), "\n## "+s.Title+"\n") {
			t.Errorf("no heading for section %q", s.Title)
		}
	}
}

// TestRenderColumns renders figures side by side with repetitions: a cell is
// the median and the range, a row no benchmark of a column reported is a
// dash, and the units of one name stay together, sorted, whichever column
// reported one first.
func TestRenderColumns(t *testing.T) {
	results := []Result{
		{Name: "BenchmarkStores/a/claims=1", N: 1, Metrics: []Metric{{2, "req/s"}}},
		{Name: "BenchmarkStores/b/claims=1", N: 1, Metrics: []Metric{{5, "req/s"}, {7, "server-cpu-ms/s"}, {6, "cpu-ms/s"}}},
		{Name: "BenchmarkStores/a/handover", N: 1, Metrics: []Metric{{1.5, "p50-ms"}}},
		{Name: "BenchmarkStores/a/claims=1", N: 1, Metrics: []Metric{{4, "req/s"}}},
		{Name: "BenchmarkStores/b/claims=1", N: 1, Metrics: []Metric{{5, "req/s"}, {9, "server-cpu-ms/s"}}},
		{Name: "BenchmarkStores/a/handover", N: 1, Metrics: []Metric{{2.5, "p50-ms"}}},
	}
	var b strings.Builder
	renderColumns(&b, Figures(results), 1, false)
	want := "Side by side: each column is one value of element 1 of the benchmarks' names (`BenchmarkStores/COLUMN/claims=1`), and a row's benchmark is the name without it. Each cell gives the median, then the smallest and largest value in brackets.\n\n" +
		"| benchmark | unit | a | b |\n|---|---|--:|--:|\n" +
		"| `BenchmarkStores/claims=1` | cpu-ms/s | – | 6 [6, 6] |\n" +
		"| `BenchmarkStores/claims=1` | req/s | 3 [2, 4] | 5 [5, 5] |\n" +
		"| `BenchmarkStores/claims=1` | server-cpu-ms/s | – | 8 [7, 9] |\n" +
		"| `BenchmarkStores/handover` | p50-ms | 2 [1.5, 2.5] | – |\n"
	if got := b.String(); got != want {
		t.Errorf("renderColumns =\n%s\nwant\n%s", got, want)
	}
}

var benchFuncRE = regexp.MustCompile(`(?m)^func (Benchmark\w+)\(b \*testing\.B\)`)

// TestSectionsMatchBenchmarks checks that every section of the set names a
// package that exists and benchmarks that exist in it, so that renaming a
// benchmark the docs quote fails make test rather than the next bench-report.
func TestSectionsMatchBenchmarks(t *testing.T) {
	root := moduleRoot(t)
	titles := map[string]bool{}
	for _, s := range Sections {
		if titles[Slug(s.Title)] {
			t.Errorf("two sections share the anchor %q", Slug(s.Title))
		}
		titles[Slug(s.Title)] = true
		// go test matches each level of a benchmark's name with one
		// slash-separated element of -bench; the first names top-level ones.
		top, _, _ := strings.Cut(s.Bench, "/")
		re, err := regexp.Compile(top)
		if err != nil {
			t.Errorf("%s: -bench %q: %v", s.Title, s.Bench, err)
			continue
		}
		files, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(s.Pkg), "*_test.go"))
		if len(files) == 0 {
			t.Errorf("%s: no test files in %s", s.Title, s.Pkg)
			continue
		}
		var found []string
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range benchFuncRE.FindAllStringSubmatch(string(b), -1) {
				if re.MatchString(m[1]) {
					found = append(found, m[1])
				}
			}
		}
		// Each alternative of an anchored list must name a benchmark.
		if alts := regexp.MustCompile(`Benchmark\w+`).FindAllString(top, -1); len(alts) > 0 {
			for _, a := range alts {
				if !slices.Contains(found, a) {
					t.Errorf("%s: -bench %q names %s, which %s does not define", s.Title, s.Bench, a, s.Pkg)
				}
			}
		} else if len(found) == 0 {
			t.Errorf("%s: -bench %q matches no benchmark of %s", s.Title, s.Bench, s.Pkg)
		}
		if s.Title == "" || s.About == "" {
			t.Errorf("section %+v lacks a title or a description", s)
		}
	}
}

// moduleRoot is the repository root: the directory holding go.work, above
// this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the test's directory")
		}
		dir = parent
	}
}
