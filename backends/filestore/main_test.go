package filestore

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// childEnv, when set, makes the test binary run one child role (see
// child_test.go) instead of the tests: the cross-process tests re-execute
// the binary to get real, killable processes.
const childEnv = "TENURE_FILESTORE_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(runChild(role))
	}
	goleak.VerifyTestMain(m)
}

// childRoles are the roles a re-executed test binary can play. A child
// talks to its parent in lines: commands on stdin, answers on stdout.
var childRoles = map[string]func() error{
	"racer":      childRacer,
	"readonly":   childReadOnly,
	"crash":      childCrash,
	"elector":    childElector,
	"handover":   childHandover,
	"nospace":    childNoSpace,
	"permission": childPermission,
	"probe":      childProbe,
	"resumed":    childResumed,
	"stall":      childStall,
}

// runChild runs a child role and returns its exit code.
func runChild(role string) int {
	f, ok := childRoles[role]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown child role %q\n", role)
		return 2
	}
	if err := f(); err != nil {
		fmt.Fprintf(os.Stderr, "child %s: %v\n", role, err)
		return 1
	}
	return 0
}
