package filestore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tenure-go/tenure/backends"
)

// Child parameters travel in the environment.
const (
	envDir  = "TENURE_FILESTORE_DIR"
	envID   = "TENURE_FILESTORE_ID"
	envOp   = "TENURE_FILESTORE_OP"
	envStep = "TENURE_FILESTORE_STEP"
)

// childRacer serves commands on stdin until it closes:
//
//	create <key>          -> "win <token>" | "lose <current revision>"
//	delete <key> <rev>    -> "deleted"
//	incr <key> <n>        -> "incremented" after n successful CAS increments
func childRacer() error {
	s, err := Open(context.Background(), os.Getenv(envDir), WithCreate())
	if err != nil {
		return err
	}
	defer s.Close()
	id := os.Getenv(envID)
	ctx := context.Background()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		switch {
		case len(f) == 2 && f[0] == "create":
			e, err := s.CreateIfAbsent(ctx, f[1], []byte(id), 0)
			var ce *backends.ConflictError
			switch {
			case err == nil:
				fmt.Printf("win %d\n", e.CreateRevision)
			case errors.As(err, &ce) && ce.Found:
				fmt.Printf("lose %d\n", ce.Current.Revision)
			default:
				return err
			}
		case len(f) == 3 && f[0] == "delete":
			rev, _ := strconv.ParseInt(f[2], 10, 64)
			if err := s.CompareAndDelete(ctx, f[1], rev); err != nil {
				return err
			}
			fmt.Println("deleted")
		case len(f) == 3 && f[0] == "incr":
			n, _ := strconv.Atoi(f[2])
			for n > 0 {
				cur, err := s.Get(ctx, f[1])
				if err != nil {
					return err
				}
				v, _ := strconv.Atoi(string(cur.Value))
				_, err = s.CompareAndSet(ctx, f[1], cur.Revision, []byte(strconv.Itoa(v+1)), 0)
				if errors.Is(err, backends.ErrConflict) {
					continue
				}
				if err != nil {
					return err
				}
				n--
			}
			fmt.Println("incremented")
		default:
			return fmt.Errorf("bad command %q", in.Text())
		}
	}
	return in.Err()
}

// child is a running copy of the test binary in a child role.
type child struct {
	t     testing.TB
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string   // stdout, line by line; closed at EOF
	done  chan struct{} // closed when the reader goroutine has exited
}

// startChild runs the test binary in role, with env added to its
// environment. Cleanup closes its stdin, kills it if it is still running,
// and waits for it.
func startChild(t testing.TB, role string, attr *syscall.SysProcAttr, env ...string) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return startChildExe(t, exe, role, attr, env...)
}

// startChildExe is startChild with another copy of the test binary.
func startChildExe(t testing.TB, exe, role string, attr *syscall.SysProcAttr, env ...string) *child {
	t.Helper()
	return startChildVia(t, nil, exe, role, attr, env...)
}

// startChildVia is startChildExe with the binary started by a launcher
// command line (such as unshare(1)) that runs the program named after it.
func startChildVia(t testing.TB, launcher []string, exe, role string, attr *syscall.SysProcAttr, env ...string) *child {
	t.Helper()
	argv := append(slices.Clone(launcher), exe, "-test.run=^$")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(childEnviron(role), env...)
	cmd.Stderr = &prefixWriter{t: t, prefix: role}
	cmd.SysProcAttr = attr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child %s: %v", role, err)
	}
	c := &child{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 16), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		c.stdin.Close()
		c.cmd.Process.Kill()
		// Wait closes stdout after the process exits, which ends the reader;
		// drain what it still holds so it is never stuck on a send.
		go func() {
			for range c.lines {
			}
		}()
		c.cmd.Wait()
		<-c.done
	})
	return c
}

// childEnviron is the environment of a child in role. Under the race
// detector a process lingers a second at exit unless told otherwise.
func childEnviron(role string) []string {
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	return append(os.Environ(), childEnv+"="+role, "GORACE="+gorace)
}

func (c *child) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
		c.t.Fatalf("send %q to child: %v", line, err)
	}
}

// recv returns the child's next line, failing the test if it ends first or
// the test's deadline passes.
func (c *child) recv(ctx context.Context) string {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatalf("child exited before answering: %v", c.cmd.Wait())
		}
		return l
	case <-ctx.Done():
		c.t.Fatalf("child did not answer in time")
	}
	return ""
}

// kill sends SIGKILL and waits for the child to die.
func (c *child) kill() {
	c.t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatalf("kill child: %v", err)
	}
	for range c.lines {
	}
	err := c.cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		c.t.Fatalf("child did not die of SIGKILL: %v", err)
	}
}

// prefixWriter copies a child's stderr into the test log.
type prefixWriter struct {
	t      testing.TB
	prefix string
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.t.Logf("[%s] %s", w.prefix, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
