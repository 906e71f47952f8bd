package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the repository's root, two directories up from this
// package's.
const repoRoot = "../.."

// storesNamed are the stores every list of them names, each with the words
// that may name it.
var storesNamed = []struct {
	name  string
	words []string
}{
	{"memstore", []string{"memstore"}},
	{"filestore", []string{"filestore"}},
	{"etcd", []string{"etcd"}},
	{"Kubernetes", []string{"Kubernetes"}},
	{"NATS", []string{"NATS"}},
	{"PostgreSQL", []string{"PostgreSQL"}},
	{"DynamoDB", []string{"DynamoDB"}},
}

// packageDoc returns the package comment of the Go file at path.
func packageDoc(t *testing.T, path string) string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	if f.Doc == nil {
		t.Fatalf("%s has no package comment", path)
	}
	return f.Doc.Text()
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDocsNameEveryStore checks that every place that lists the stores names
// all seven of them: the README's introduction, the elector's and the
// conformance suite's package docs, and the allocator's page.
func TestDocsNameEveryStore(t *testing.T) {
	readme := readDoc(t, "README.md")
	intro, _, _ := strings.Cut(readme, "\n## ")
	allocator := readDoc(t, "docs/allocator.md")
	allocIntro, _, _ := strings.Cut(allocator, "```")
	for _, d := range []struct{ where, text string }{
		{"README.md's introduction", intro},
		{"go doc ./elector", packageDoc(t, filepath.Join(repoRoot, "elector", "doc.go"))},
		{"go doc ./backends/backendtest", packageDoc(t, filepath.Join(repoRoot, "backends", "backendtest", "doc.go"))},
		{"docs/allocator.md's introduction", allocIntro},
	} {
		text := strings.Join(strings.Fields(d.text), " ")
		for _, s := range storesNamed {
			found := false
			for _, w := range s.words {
				found = found || strings.Contains(text, w)
			}
			if !found {
				t.Errorf("%s does not name %s", d.where, s.name)
			}
		}
	}
}

// TestDocsAgreeWithCommand checks that the docs say what the command does.
// The service example in operating.md catches SIGTERM as well as Ctrl-C;
// every exit status of tenure run is in operating.md's table and in go doc
// ./cmd/tenure; the resize status that go doc gives is the one it exits with;
// the README's example of a one-off job has --once; the README says how to
// use the module before it is published.
func TestDocsAgreeWithCommand(t *testing.T) {
	operating := readDoc(t, "docs/operating.md")
	if !regexp.MustCompile(`(?m)signal\.NotifyContext\(.*os\.Interrupt.*syscall\.SIGTERM.*$`).MatchString(operating) {
		t.Errorf("operating.md's service example does not catch SIGTERM")
	}
	cmdDoc := packageDoc(t, "doc.go")
	_, table, _ := strings.Cut(operating, "| exit status | `tenure run` |")
	table, _, _ = strings.Cut(table, "\n\n")
	_, docTable, _ := strings.Cut(cmdDoc, "Exit status:")
	docTable, _, _ = strings.Cut(docTable, "\n\n\n")
	for _, code := range []string{"1", "2", "69", "75", "124", "126", "127", "128+N"} {
		if !regexp.MustCompile(`\| (\d+, )?` + regexp.QuoteMeta(code) + `( |,)`).MatchString(table) {
			t.Errorf("operating.md's exit status table lacks %s:\n%s", code, table)
		}
		if !regexp.MustCompile(`(?m)^\s+(\d+, )?` + regexp.QuoteMeta(code) + `[ ,]`).MatchString(docTable) {
			t.Errorf("go doc ./cmd/tenure's exit status table lacks %s:\n%s", code, docTable)
		}
	}
	_, resizeDoc, _ := strings.Cut(cmdDoc, "# tenure resize")
	resizeDoc, _, _ = strings.Cut(resizeDoc, "# tenure")
	if !strings.Contains(strings.Join(strings.Fields(resizeDoc), " "), "2 for bad usage (a KEY that is not a slot group included)") {
		t.Errorf("go doc ./cmd/tenure does not give the status resize exits with for a key that is no group (2):\n%s", resizeDoc)
	}
	readme := readDoc(t, "README.md")
	for _, l := range strings.Split(readme, "\n") {
		if strings.HasPrefix(l, "tenure run ") && strings.Contains(l, "nightly") && !strings.Contains(l, "--once") {
			t.Errorf("README's one-off job runs again and again without --once: %s", l)
		}
	}
	if !strings.Contains(readme, "`replace`") {
		t.Errorf("README does not say that using the module before it is published needs a replace line")
	}
}
