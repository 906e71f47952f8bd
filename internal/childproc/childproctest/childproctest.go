// Package childproctest helps tests check that a child process survives
// what package childproc guards it against: the end of the OS thread it
// was started from. It is test support: import it only from _test.go
// files.
package childproctest

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// threadGoneWithin bounds the wait for a retired thread to disappear; it
// only ends a failing test, since the runtime ends such a thread at once.
const threadGoneWithin = 30 * time.Second

// OnRetiredThread runs f on a goroutine locked to its OS thread and never
// unlocked, so that the Go runtime ends the thread once f returns (or
// calls t.FailNow), and returns once the thread is gone. By then, a child
// process forked from that thread with a parent-death signal, outside
// childproc, has been sent that signal.
func OnRetiredThread(t testing.TB, f func()) {
	t.Helper()
	tid := 0
	release := make(chan struct{})
	defer close(release)
	for try := 0; tid == 0; try++ {
		if try == 3 {
			t.Fatal("childproctest: no goroutine ran on a thread other than the main one")
		}
		done := make(chan int, 1)
		go func() {
			runtime.LockOSThread()
			id := syscall.Gettid()
			if id == syscall.Getpid() {
				// The runtime never ends the main thread, it only parks
				// it. Keep it, so that the next try runs on another.
				done <- 0
				<-release
				runtime.UnlockOSThread()
				return
			}
			defer func() { done <- id }()
			f()
		}()
		tid = <-done
	}
	task := "/proc/self/task/" + strconv.Itoa(tid)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(threadGoneWithin)
	defer deadline.Stop()
	for {
		_, err := os.Stat(task)
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("childproctest: thread %d still exists %v after its locked goroutine ended", tid, threadGoneWithin)
		}
	}
}
