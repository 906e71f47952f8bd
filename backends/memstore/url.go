package memstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/storeurl"
)

// A program that imports this package opens a memory store by URL with
// storeurl.Open(ctx, "mem://"): every Open makes a new, empty store.
func init() {
	storeurl.Register(storeurl.Scheme{
		Name: "mem",
		Form: "mem://",
		Parse: func(u *url.URL) (storeurl.Opener, error) {
			if u.Host != "" || u.Path != "" || u.RawQuery != "" {
				return nil, errors.New("want mem:// with nothing after it")
			}
			return func(_ context.Context, req storeurl.Request) (backends.Store, error) {
				if req.ReadOnly {
					return nil, fmt.Errorf("memstore: a mem:// store is new and empty at every Open: there is nothing to read: %w", backends.ErrMissingResource)
				}
				return New(), nil
			}, nil
		},
	})
}
