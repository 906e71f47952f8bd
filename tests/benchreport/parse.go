package main

import (
	"bufio"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A Run is what one go test -bench command printed, parsed.
type Run struct {
	Pkg     string   // "pkg:" header line: the import path
	CPU     string   // "cpu:" header line
	Results []Result // in the order printed; with -count N a name repeats
	Skipped []string // benchmarks that printed --- SKIP
	Failed  bool     // a FAIL line or a --- FAIL benchmark
}

// A Result is one result line: a benchmark's name (without the
// -GOMAXPROCS suffix), its iteration count and its metrics.
type Result struct {
	Name    string
	N       int64
	Metrics []Metric
}

// A Metric is one value with its unit, as the testing package printed it
// (ns/op, B/op, allocs/op, or a unit given to b.ReportMetric).
type Metric struct {
	Value float64
	Unit  string
}

var (
	// nameRE matches a benchmark name at the start of a line and the
	// -GOMAXPROCS suffix go test appends.
	nameRE  = regexp.MustCompile(`^(Benchmark\S*?)(-\d+)?(\s|$)`)
	skipRE  = regexp.MustCompile(`^\s*--- SKIP: (Benchmark\S*?)(-\d+)?(\s|$)`)
	failRE  = regexp.MustCompile(`^(\s*--- FAIL: |FAIL\s|FAIL$|panic: )`)
	countRE = regexp.MustCompile(`^\s*(\d+)\t`)
)

// Parse reads go test -bench output (plain text, not -json). Output the
// benchmarks or the servers they run print to stdout or stderr may come
// between a benchmark's name and its results, which go test prints only
// once the benchmark has finished: a name without results on its line is
// kept until a line of results follows.
func Parse(r io.Reader) (Run, error) {
	var run Run
	pending := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "pkg: "):
			run.Pkg = strings.TrimSpace(strings.TrimPrefix(line, "pkg: "))
			continue
		case strings.HasPrefix(line, "cpu: "):
			run.CPU = strings.TrimSpace(strings.TrimPrefix(line, "cpu: "))
			continue
		case failRE.MatchString(line):
			run.Failed = true
			continue
		}
		if m := skipRE.FindStringSubmatch(line); m != nil {
			run.Skipped = append(run.Skipped, m[1])
			if pending == m[1] {
				pending = ""
			}
			continue
		}
		rest := line
		if m := nameRE.FindStringSubmatch(line); m != nil {
			pending = m[1]
			rest = line[len(m[0]):]
		}
		if pending == "" {
			continue
		}
		if n, metrics, ok := parseResults(rest); ok {
			run.Results = append(run.Results, Result{Name: pending, N: n, Metrics: metrics})
			pending = ""
		}
	}
	return run, sc.Err()
}

// parseResults parses "N\tV unit\tV unit...", the part of a result line
// after the name.
func parseResults(s string) (int64, []Metric, bool) {
	s = strings.TrimLeft(s, " \t")
	if !countRE.MatchString(s + "\t") {
		return 0, nil, false
	}
	fields := strings.Split(s, "\t")
	n, err := strconv.ParseInt(strings.TrimSpace(fields[0]), 10, 64)
	if err != nil {
		return 0, nil, false
	}
	var metrics []Metric
	for _, f := range fields[1:] {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, unit, ok := strings.Cut(f, " ")
		if !ok {
			return 0, nil, false
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, nil, false
		}
		metrics = append(metrics, Metric{Value: x, Unit: strings.TrimSpace(unit)})
	}
	if len(metrics) == 0 {
		return 0, nil, false
	}
	return n, metrics, true
}

// A Figure is every value one benchmark reported in one unit over the
// repetitions of a run (-count).
type Figure struct {
	Name   string
	Unit   string
	Values []float64
}

// Median returns the median of the values (the mean of the middle two for
// an even count).
func (f Figure) Median() float64 {
	v := slices.Clone(f.Values)
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// Range returns the smallest and the largest value.
func (f Figure) Range() (lo, hi float64) {
	return slices.Min(f.Values), slices.Max(f.Values)
}

// Figures groups results by benchmark and unit, benchmarks in the order
// they first appear and units in the order the benchmark printed them.
func Figures(results []Result) []Figure {
	var out []Figure
	index := map[[2]string]int{}
	for _, r := range results {
		for _, m := range r.Metrics {
			k := [2]string{r.Name, m.Unit}
			i, ok := index[k]
			if !ok {
				i = len(out)
				index[k] = i
				out = append(out, Figure{Name: r.Name, Unit: m.Unit})
			}
			out[i].Values = append(out[i].Values, m.Value)
		}
	}
	// Keep each benchmark's figures together even when a later repetition
	// adds a unit the first did not report.
	order := map[string]int{}
	for _, f := range out {
		if _, ok := order[f.Name]; !ok {
			order[f.Name] = len(order)
		}
	}
	slices.SortStableFunc(out, func(a, b Figure) int { return order[a.Name] - order[b.Name] })
	return out
}
