package main

import (
	"runtime/debug"
	"strings"
)

// buildVersion is what --version prints after "tenure version ": the
// module version tenure was built at ("(devel)" from a checkout), and,
// from a checkout, the VCS revision and whether the tree was modified,
// then the Go version.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := []string{bi.Main.Version}
	if v[0] == "" {
		v[0] = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		}
	}
	if rev != "" {
		v = append(v, rev+modified)
	}
	return strings.Join(append(v, bi.GoVersion), " ")
}
