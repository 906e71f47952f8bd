package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/spf13/cobra"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/storeurl"
)

// defaultTimeout is --timeout's default: how long opening a store may take.
const defaultTimeout = 10 * time.Second

// causeWait is how long, past --timeout, opening a store is given to
// return its own error.
const causeWait = 200 * time.Millisecond

// envPassword names the environment variable tenure reads a store's
// password from, for a --store URL that names a user and no password.
const envPassword = "TENURE_STORE_PASSWORD"

// storeFlags are the flags about the store every subcommand shares.
type storeFlags struct {
	timeout      time.Duration // --timeout
	passwordFile string        // --password-file
}

func (f *storeFlags) register(root *cobra.Command) {
	root.PersistentFlags().DurationVar(&f.timeout, "timeout", defaultTimeout,
		"how long opening the store may take; past it, exit status 69")
	root.PersistentFlags().StringVar(&f.passwordFile, "password-file", "",
		"read the store's password from this file (its first line), for a --store URL that names a user and no password; "+envPassword+" is read otherwise")
}

// withPassword gives loc the password of --password-file, or of
// $TENURE_STORE_PASSWORD, so that it need not be in the URL, where the
// process list shows it. The environment variable applies only to a URL
// that names a user and no password; --password-file is a usage error
// for any other.
func (f *storeFlags) withPassword(loc *storeurl.Location) (*storeurl.Location, error) {
	var pw string
	switch {
	case f.passwordFile != "":
		b, err := os.ReadFile(f.passwordFile)
		if err != nil {
			return nil, usagef("--password-file: %v", err)
		}
		pw, _, _ = strings.Cut(string(b), "\n")
		pw = strings.TrimSuffix(pw, "\r")
		if pw == "" {
			return nil, usagef("--password-file %s: the file's first line is empty", f.passwordFile)
		}
		l, err := loc.WithPassword(pw)
		if err != nil {
			return nil, usagef("--password-file: %v", err)
		}
		return l, nil
	case os.Getenv(envPassword) != "":
		if user, has := loc.User(); user == "" || has {
			return loc, nil
		}
		l, err := loc.WithPassword(os.Getenv(envPassword))
		if err != nil {
			return nil, usagef("$%s: %v", envPassword, err)
		}
		return l, nil
	}
	return loc, nil
}

// storeError is a store that cannot be opened or read: reported in one
// line, as a usage error is, with exit status 69.
type storeError struct{ err error }

func (e storeError) Error() string { return e.err.Error() }
func (e storeError) Unwrap() error { return e.err }

// openStore opens loc, giving up after timeout. It logs what it connects
// to (the URL without its password). The wait is bounded here whatever
// the backend does with ctx: a store whose opening returns after the
// timeout is closed as soon as it does.
func openStore(ctx context.Context, log *slog.Logger, loc *storeurl.Location, timeout time.Duration) (backends.Store, error) {
	log.Info("opening store", "store", loc.String(), "timeout", timeout.String())
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("no answer within --timeout %v", timeout))
	defer cancel()
	type result struct {
		s   backends.Store
		err error
	}
	res := make(chan result, 1)
	go func() {
		s, err := loc.Open(ctx)
		// Open wraps the store's error in one that names the URL again,
		// which the line below names already: one naming is enough.
		var ue *storeurl.Error
		if inner := errors.Unwrap(err); inner != nil && !errors.As(err, &ue) {
			err = inner
		}
		res <- result{s, err}
	}()
	select {
	case r := <-res:
		if r.err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("open store %s: %w: %w", loc, context.Cause(ctx), r.err)
			}
			return nil, fmt.Errorf("open store %s: %w", loc, r.err)
		}
		return r.s, nil
	case <-ctx.Done():
	}
	// A backend that honours ctx answers now with its own error, which
	// says more (the endpoint, the dial error) than the timeout alone.
	t := clock.New().Timer(causeWait)
	defer t.Stop()
	select {
	case r := <-res:
		if r.err == nil {
			r.s.Close()
			r.err = errors.New("opened too late")
		}
		return nil, fmt.Errorf("open store %s: %w: %w", loc, context.Cause(ctx), r.err)
	case <-t.C:
		go func() {
			if r := <-res; r.err == nil {
				r.s.Close()
			}
		}()
		return nil, fmt.Errorf("open store %s: %w", loc, context.Cause(ctx))
	}
}
