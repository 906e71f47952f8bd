package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// storeFlags are the flags about the store every subcommand shares.
type storeFlags struct {
	timeout time.Duration // --timeout
}

func (f *storeFlags) register(root *cobra.Command) {
	root.PersistentFlags().DurationVar(&f.timeout, "timeout", defaultTimeout,
		"how long opening the store may take; past it, exit status 69")
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
