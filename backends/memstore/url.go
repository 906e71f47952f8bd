package memstore

import (
	"context"
	"errors"
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
			return func(context.Context, bool) (backends.Store, error) { return New(), nil }, nil
		},
	})
}
