package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// Exit statuses of tenure itself; any other status is the child's.
const (
	exitInternal = 1   // an error of tenure's own
	exitUsage    = 2   // bad flags or arguments
	exitStore    = 69  // the store cannot be opened or fails fatally (EX_UNAVAILABLE)
	exitLost     = 75  // --once: the term ended before the child exited (EX_TEMPFAIL)
	exitTry      = 124 // --try: the claim was not acquired in time (as timeout(1) reports a timeout)
	exitNoExec   = 126
	exitNotFound = 127
)

// usageError is a mistake in the command line: reported in one line, exit
// status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// failure is an error of tenure's own that the user should read: one line
// on stderr, exit status 1.
type failure struct{ err error }

func (e failure) Error() string { return e.err.Error() }
func (e failure) Unwrap() error { return e.err }

// exitCode carries a subcommand's exit status through cobra.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

func main() {
	if len(os.Args) > 1 && os.Args[1] == superviseArg {
		os.Exit(supervise(os.Args[2:]))
	}
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
}

// execute runs the command line args and returns the exit status.
func execute(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	var code exitCode
	switch {
	case err == nil:
		return 0
	case errors.As(err, &code):
		return int(code)
	}
	name := "tenure"
	if cmd != nil {
		name = cmd.CommandPath()
	}
	// One line, even for joined errors.
	msg := strings.ReplaceAll(err.Error(), "\n", "; ")
	var fe failure
	if errors.As(err, &fe) {
		fmt.Fprintf(stderr, "%s: %s\n", name, msg)
		return exitInternal
	}
	var ce commandError
	if errors.As(err, &ce) {
		fmt.Fprintf(stderr, "%s: %s\n", name, msg)
		return ce.code
	}
	var se storeError
	if errors.As(err, &se) {
		fmt.Fprintf(stderr, "%s: %s\n", name, msg)
		return exitStore
	}
	// Every other error cobra returns is about the command line: an unknown
	// flag or subcommand, a bad value, a missing argument.
	fmt.Fprintf(stderr, "%s: %s (see %s --help)\n", name, msg, name)
	return exitUsage
}

// options are the flags every subcommand shares.
type options struct {
	logLevel string
	storeFlags
	stdout io.Writer
	stderr io.Writer
}

// logger returns the stderr logger at the level --log-level names, once
// the flags every subcommand shares are checked.
func (o *options) logger() (*slog.Logger, error) {
	if o.timeout <= 0 {
		return nil, usagef("--timeout %v: want a positive duration", o.timeout)
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", o.logLevel)
	}
	return slog.New(slog.NewTextHandler(o.stderr, &slog.HandlerOptions{Level: lvl})), nil
}

// examples is a subcommand's Example text: s without its surrounding blank
// lines, every line kept as indented.
func examples(s string) string {
	return strings.Trim(s, "\n")
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	o := &options{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "tenure",
		Short: "Run a command under leader election, and inspect claims",
		Long: strings.TrimSpace(`
tenure runs a command only while this process holds a claim in a shared
store (a file store directory on one host, or etcd, Kubernetes, NATS or
PostgreSQL), and shows who holds a claim. Stores are named by URL:
file:///DIR (one host), etcd://HOST:PORT[,HOST:PORT]/PREFIX,
kube://NAMESPACE, nats://HOST:PORT/BUCKET or
postgres://USER@HOST:PORT/DATABASE (each subcommand's --store help gives
every form with its parameters). etcd:// takes ?lease=shared (one etcd
lease per process, renewed in batches) and kube:// takes session=DURATION
(one session Lease per process, renewed once per DURATION); both default
to a lease per claim. Only run makes a store, and only when its URL says
create=true; the other subcommands take the same URL and create nothing.
A password can stay out of the URL, where the process list shows it:
--password-file, or $TENURE_STORE_PASSWORD, for a URL that names a user.

Every command logs the store it opens (without its password) and gives up
opening it after --timeout (default 10s): it then prints one line naming
the store and the error, and exits with status 69.`),
		Version:       buildVersion(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&o.logLevel, "log-level", "info", "log level on stderr: debug, info, warn or error")
	o.storeFlags.register(root)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newRunCmd(o), newHoldersCmd(o), newWatchCmd(o), newResizeCmd(o), newReleaseCmd(o), newTransferCmd(o))
	root.CompletionOptions.DisableDefaultCmd = true
	return root
}
