package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-go/tenure/internal/tools/toolbuild"
)

func main() {
	out := flag.String("o", "docs/performance.md", "the page to write")
	count := flag.Int("count", 1, "go test -count: repetitions of each benchmark")
	short := flag.Bool("short", false, "a short run: go test -short, with each section's Short benchtime and arguments")
	only := flag.String("only", "", "run only the sections whose title matches this regular expression")
	raw := flag.String("raw", filepath.Join(os.TempDir(), "tenure-bench-report"), "directory for each section's raw output")
	from := flag.String("from", "", "render from the raw output kept in this directory; run nothing")
	keepGoing := flag.Bool("keep-going", false, "write the page even when a section fails")
	timeout := flag.Duration("timeout", 30*time.Minute, "go test -timeout of each section")
	flag.Parse()

	if err := run(*out, *count, *short, *only, *raw, *from, *keepGoing, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func run(out string, count int, short bool, only, raw, from string, keepGoing bool, timeout time.Duration) error {
	sel, err := selection(only)
	if err != nil {
		return err
	}
	if from != "" {
		rep, err := renderKept(from, sel)
		if err != nil {
			return err
		}
		return write(out, rep)
	}
	rep, failed, err := measure(raw, sel, count, short, timeout)
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		fmt.Fprintln(os.Stderr, "benchreport: failed sections:\n  "+strings.Join(failed, "\n  "))
		if !keepGoing {
			return errors.New("not writing " + out + " (use -keep-going to write it anyway)")
		}
		defer fmt.Fprintln(os.Stderr, "benchreport: wrote", out, "with failed sections marked")
	}
	return write(out, rep)
}

// selector tells the sections a run measures (-only) from the others.
// Every section keeps its heading, so that links into the page hold; one
// not selected says so.
type selector struct {
	re   *regexp.Regexp // nil: every section
	only string
}

func (sel selector) selected(s Section) bool { return sel.re == nil || sel.re.MatchString(s.Title) }

// skipped is the result of a section sel did not select.
func (sel selector) skipped(s Section, count int, short bool) SectionResult {
	return SectionResult{Section: s, Command: command(s, count, short), Err: fmt.Sprintf("not selected in this run (-only %q)", sel.only)}
}

// selection compiles -only, and refuses one that selects no section.
func selection(only string) (selector, error) {
	sel := selector{only: only}
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			return selector{}, fmt.Errorf("-only: %w", err)
		}
		sel.re = re
	}
	for _, s := range Sections {
		if sel.selected(s) {
			return sel, nil
		}
	}
	return selector{}, fmt.Errorf("no section matches -only %q", only)
}

// renderKept is the report of the output a run kept in from. The machine,
// date and commit are those of the run that kept the output, not of this
// rendering.
func renderKept(from string, sel selector) (Report, error) {
	m, err := readMachine(from)
	if err != nil {
		return Report{}, err
	}
	m.Mode += "; rendered from its kept output (-from)"
	rep := Report{Machine: m}
	for _, s := range Sections {
		if !sel.selected(s) {
			rep.Sections = append(rep.Sections, sel.skipped(s, m.Count, m.Short))
			continue
		}
		sr := SectionResult{Section: s, Command: command(s, m.Count, m.Short)}
		f, err := os.Open(rawPath(from, s))
		if err != nil {
			sr.Err = "no output kept for it"
		} else {
			sr.Run, err = Parse(f)
			f.Close()
			if err != nil {
				return Report{}, err
			}
			sr.Err = runError(sr.Run)
		}
		rep.Sections = append(rep.Sections, sr)
	}
	return rep, nil
}

// measure runs the selected sections' benchmarks, keeping each one's
// output in raw, and returns the report and what failed.
func measure(raw string, sel selector, count int, short bool, timeout time.Duration) (Report, []string, error) {
	rep := Report{Machine: machine(count, short)}
	if err := os.MkdirAll(raw, 0o755); err != nil {
		return Report{}, nil, err
	}
	var kube kubeOnce
	var failed []string
	start := time.Now()
	load0 := loadAverage()
	for _, s := range Sections {
		if !sel.selected(s) {
			rep.Sections = append(rep.Sections, sel.skipped(s, count, short))
			continue
		}
		sr, fail, err := measureSection(s, raw, count, short, timeout, &kube, start)
		if err != nil {
			return Report{}, nil, err
		}
		if fail != "" {
			failed = append(failed, fail)
		}
		rep.Sections = append(rep.Sections, sr)
	}
	rep.Machine.Load = load0 + " / " + loadAverage()
	if err := writeMachine(raw, rep.Machine); err != nil {
		return Report{}, nil, err
	}
	fmt.Fprintf(os.Stderr, "benchreport: done in %s; raw output in %s\n", time.Since(start).Round(time.Second), raw)
	return rep, failed, nil
}

// kubeOnce builds the kube-apiserver for the first section that needs it,
// and remembers the outcome for the others.
type kubeOnce struct {
	bin string
	err error
}

func (k *kubeOnce) get() (string, error) {
	if k.bin == "" && k.err == nil {
		k.bin, k.err = kubeAPIServer()
	}
	return k.bin, k.err
}

// measureSection runs one section's benchmarks, keeping the output in raw.
// fail says what failed, if it did; err is for what ends the whole run.
func measureSection(s Section, raw string, count int, short bool, timeout time.Duration, kube *kubeOnce, start time.Time) (sr SectionResult, fail string, err error) {
	sr = SectionResult{Section: s, Command: command(s, count, short)}
	env := os.Environ()
	if s.Kube {
		apiserver, err := kube.get()
		if err != nil {
			sr.Err = "the kube-apiserver could not be built"
			return sr, s.Title + ": " + err.Error(), nil
		}
		env = append(env, "TENURE_KUBE_APISERVER="+apiserver)
	}
	fmt.Fprintf(os.Stderr, "benchreport: %s (%s since start)\n  %s\n", s.Title, time.Since(start).Round(time.Second), sr.Command)
	output, err := goTest(s, count, short, timeout, env)
	if werr := os.WriteFile(rawPath(raw, s), output, 0o644); werr != nil {
		return sr, "", werr
	}
	sr.Run, _ = Parse(bytes.NewReader(output))
	if err != nil || sr.Run.Failed {
		sr.Err = "its benchmarks failed"
		return sr, fmt.Sprintf("%s: %v (output in %s)", s.Title, err, rawPath(raw, s)), nil
	}
	sr.Err = runError(sr.Run)
	return sr, "", nil
}

// runError says why a run that did not fail has no figures.
func runError(r Run) string {
	if r.Failed {
		return "its benchmarks failed"
	}
	if len(r.Results) == 0 && len(r.Skipped) > 0 {
		return "its benchmarks were skipped (" + strings.Join(r.Skipped, ", ") + ")"
	}
	return ""
}

func write(out string, rep Report) error {
	var b bytes.Buffer
	if err := Render(&b, rep); err != nil {
		return err
	}
	return os.WriteFile(out, b.Bytes(), 0o644)
}

// rawPath names the file a section's output is kept in.
func rawPath(dir string, s Section) string {
	return filepath.Join(dir, Slug(s.Title)+".txt")
}

// args returns the go test arguments of a section. A short run passes
// -short, so that a benchmark that has a small variant for testing.Short
// runs that one.
func args(s Section, count int, short bool, timeout time.Duration) []string {
	benchtime, extra := s.Benchtime, s.Args
	if short {
		benchtime, extra = s.Short, s.ShortArgs
	}
	a := []string{"test", "-run", "^$", "-bench", s.Bench}
	if benchtime != "" {
		a = append(a, "-benchtime", benchtime)
	}
	if short {
		a = append(a, "-short")
	}
	a = append(a, "-count", strconv.Itoa(count))
	if timeout > 0 {
		a = append(a, "-timeout", timeout.String())
	}
	a = append(a, s.Pkg)
	if len(extra) > 0 {
		a = append(append(a, "-args"), extra...)
	}
	return a
}

// command is a section's go test command as a reader would type it.
func command(s Section, count int, short bool) string {
	var b strings.Builder
	b.WriteString("go")
	for _, a := range args(s, count, short, 0) {
		b.WriteByte(' ')
		if strings.ContainsAny(a, "^$|()*?[] ") {
			a = "'" + a + "'"
		}
		b.WriteString(a)
	}
	return b.String()
}

func goTest(s Section, count int, short bool, timeout time.Duration, env []string) ([]byte, error) {
	cmd := exec.Command("go", args(s, count, short, timeout)...)
	cmd.Env = env
	var buf bytes.Buffer
	// Progress to stderr as it comes, the whole output kept for parsing.
	w := io.MultiWriter(&buf, os.Stderr)
	cmd.Stdout, cmd.Stderr = w, w
	err := cmd.Run()
	return buf.Bytes(), err
}

// kubeAPIServer returns the path of the test kube-apiserver: the one
// TENURE_KUBE_APISERVER names, or the one its build script builds once
// and caches outside the repository.
func kubeAPIServer() (string, error) { return toolbuild.KubeAPIServer.Path() }

// machineFile keeps, beside a run's raw output, the machine it ran on.
const machineFile = "machine.json"

func writeMachine(dir string, m Machine) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, machineFile), append(b, '\n'), 0o644)
}

func readMachine(dir string) (Machine, error) {
	var m Machine
	b, err := os.ReadFile(filepath.Join(dir, machineFile))
	if err != nil {
		return m, fmt.Errorf("-from %s: %w (it is written at the end of a run)", dir, err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("-from %s: %w", filepath.Join(dir, machineFile), err)
	}
	return m, nil
}

// machine describes this machine and the run.
func machine(count int, short bool) Machine {
	m := Machine{
		Date:      time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		GoVersion: goVersion(),
		CPU:       cpuModel(),
		Cores:     runtime.NumCPU(),
		Memory:    memTotal(),
		Commit:    commit(),
		Count:     count,
		Short:     short,
	}
	m.Mode = fmt.Sprintf("full: each section's benchtime, -count %d", count)
	if short {
		m.Mode = fmt.Sprintf("short (-short): small benchtimes, -count %d; indicative only", count)
	}
	return m
}

func goVersion() string {
	out, err := exec.Command("go", "env", "GOVERSION", "GOOS", "GOARCH").Output()
	if err != nil {
		return runtime.Version()
	}
	f := strings.Fields(string(out))
	if len(f) != 3 {
		return strings.TrimSpace(string(out))
	}
	return f[0] + " " + f[1] + "/" + f[2]
}

func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(string(out))
	// Changes to tracked Go files change what was measured; the page
	// itself and other untracked output do not.
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--", "*.go", "*go.mod", "*go.sum", "go.work").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		c += " + uncommitted changes"
	}
	return c
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return ""
			}
			return fmt.Sprintf("%.1f GiB", kb/(1<<20))
		}
	}
	return ""
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
