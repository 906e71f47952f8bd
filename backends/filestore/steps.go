package filestore

import "time"

// step names a point in a write at which the crash tests stop a writer.
type step string

// The points of a write, in order. The key's operation lock is held from
// before-rename to after-rename only.
const (
	stepBeforeTempWrite step = "before-temp-write"
	stepAfterTempWrite  step = "after-temp-write"
	stepAfterTempSync   step = "after-temp-sync"
	stepBeforeRename    step = "before-rename"
	stepAfterRename     step = "after-rename"
	stepBeforeDirSync   step = "before-dir-sync"
)

// stepHook is nil in production. Only the test binary's child role sets it,
// before it opens a store, to stop at a step until it is killed.
var stepHook func(step)

func atStep(s step) {
	if h := stepHook; h != nil {
		h(s)
	}
}

// lockHeldHook is nil in production. A benchmark sets it, before it opens a
// store, to learn how long each conditional write held its key's lock.
var lockHeldHook func(time.Duration)
