package filestore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
	"golang.org/x/sys/unix"
)

// suspendedFor is how far CLOCK_BOOTTIME runs ahead of CLOCK_MONOTONIC in
// the time namespace of TestSuspendedHostKeepsTheHolder's child: what a host
// looks like after a suspend that long.
const suspendedFor = 2 * time.Hour

// TestHostJudgeUsesMonotonic checks that the default judge reads
// CLOCK_MONOTONIC and the host's boot id.
func TestHostJudgeUsesMonotonic(t *testing.T) {
	j, err := hostJudge()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(bootIDPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimSpace(string(b)); j.bootID != want {
		t.Errorf("boot id = %q, want %q", j.bootID, want)
	}
	if err := judgeReadsMonotonic(j); err != nil {
		t.Error(err)
	}
}

// judgeReadsMonotonic checks that a reading of j falls between two readings
// of CLOCK_MONOTONIC. Where CLOCK_BOOTTIME has run ahead of it (a host that
// has been suspended since boot, or a time namespace with a boottime
// offset), a judge that reads CLOCK_BOOTTIME falls outside.
func judgeReadsMonotonic(j judge) error {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return err
	}
	before := ts.Nano()
	got := j.now()
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return err
	}
	if after := ts.Nano(); got < before || got > after {
		return fmt.Errorf("judge now = %d, not within CLOCK_MONOTONIC readings [%d, %d] (%v after the first)",
			got, before, after, time.Duration(got-before))
	}
	return nil
}

// TestSuspendedHostKeepsTheHolder runs a leader in this process and, in a
// child process whose CLOCK_BOOTTIME reads two hours ahead of this one's
// (a time namespace with a boottime offset), a candidate over the same
// store. The child sees the host as it is after a two-hour suspend: its
// CLOCK_BOOTTIME has moved on while CLOCK_MONOTONIC, the clock of the
// leader's deadline, has not. The store must judge the leader's claim live,
// as the leader does: the candidate is refused while IsLeader holds. With a
// judge on CLOCK_BOOTTIME the candidate took the claim at once, and both
// held it.
func TestSuspendedHostKeepsTheHolder(t *testing.T) {
	unshare := timeNamespace(t)
	dir := t.TempDir()
	ctx := ctxT(t)
	s, err := Open(context.Background(), dir, WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	locker, err := backends.NewLocker(s)
	if err != nil {
		t.Fatal(err)
	}
	elected := make(chan elector.Term, 1)
	e, err := elector.New(locker, elector.Config{
		Key:      electionKey,
		Identity: "before-suspend",
		TTL:      time.Minute,
		Clock:    clock.New(),
		OnElected: func(ctx context.Context, t elector.Term) {
			elected <- t
			<-ctx.Done()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Stop(stopCtx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()
	var term elector.Term
	select {
	case term = <-elected:
	case <-ctx.Done():
		t.Fatal("not elected in time")
	}

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := startChildVia(t, unshare, exe, "resumed", nil, envDir+"="+dir)
	var lines []string
	for l := range c.lines {
		lines = append(lines, l)
	}
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("child: %v (said %q)", err, lines)
	}
	leading := e.IsLeader()
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "ok "):
			t.Log(l)
		case strings.HasPrefix(l, "acquired ") && leading:
			t.Errorf("two holders: the resumed candidate %s while the leader (token %d, deadline in %v) still leads",
				l, term.Token, time.Until(term.Deadline).Round(time.Millisecond))
		default:
			t.Error(l)
		}
	}
	if !leading {
		t.Error("the leader lost its term during the test")
	}
}

// childResumed judges the store in envDir from a time namespace whose
// CLOCK_BOOTTIME is suspendedFor ahead of its parent's. It reports the
// judge's clock, then tries to take the claim the parent leads:
//
//	ok <check> | fail <check>: <why>
//	held <holder>            refused: the claim is live
//	acquired <token>         taken: the claim was judged expired
func childResumed() error {
	var boot, mono unix.Timespec
	unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot)
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono)
	if ahead := time.Duration(boot.Nano() - mono.Nano()); ahead < suspendedFor-time.Second {
		return fmt.Errorf("CLOCK_BOOTTIME is only %v ahead of CLOCK_MONOTONIC, want %v", ahead, suspendedFor)
	}
	s, err := Open(context.Background(), os.Getenv(envDir), WithCreate())
	if err != nil {
		return err
	}
	defer s.Close()
	if err := judgeReadsMonotonic(s.judge); err != nil {
		fmt.Printf("fail the judge's clock: %v\n", err)
	} else {
		fmt.Println("ok the judge reads CLOCK_MONOTONIC")
	}
	locker, err := backends.NewLocker(s)
	if err != nil {
		return err
	}
	holder, err := backends.NewHolder("after-suspend")
	if err != nil {
		return err
	}
	l, err := locker.TryAcquire(context.Background(), electionKey, holder, time.Minute)
	var held *backends.HeldError
	switch {
	case err == nil:
		fmt.Printf("acquired token %d\n", l.Token)
	case errors.As(err, &held) && len(held.Holders) > 0:
		fmt.Printf("ok the claim is held by %s\n", held.Holders[0].Holder.ID)
	default:
		return err
	}
	return nil
}

// timeNamespace returns the launcher that runs a program in a new time
// namespace whose CLOCK_BOOTTIME is suspendedFor ahead of this one's, or
// skips the test if this host cannot make one.
func timeNamespace(t *testing.T) []string {
	t.Helper()
	path, err := exec.LookPath("unshare")
	if err != nil {
		t.Skipf("no unshare(1) to make a time namespace: %v", err)
	}
	argv := []string{path, "--time", "--boottime", fmt.Sprint(int(suspendedFor.Seconds()))}
	if os.Geteuid() != 0 {
		argv = append(argv, "--user", "--map-root-user")
	}
	if out, err := exec.Command(argv[0], append(argv[1:], "true")...).CombinedOutput(); err != nil {
		t.Skipf("cannot make a time namespace with a boottime offset: %v: %s", err, out)
	}
	return append(argv, "--")
}
