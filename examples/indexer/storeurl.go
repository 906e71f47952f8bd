package main

import (
	"context"
	"fmt"
	"net/url"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
	"github.com/tenure-go/tenure/backends/filestore"
)

// openStore opens the store a --store URL names. ctx bounds start-up.
func openStore(ctx context.Context, raw string) (backends.Store, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("--store %q: %w", raw, err)
	}
	switch u.Scheme {
	case "file":
		dir := u.Host + u.Path // file:///abs and file://rel/dir alike
		if dir == "" {
			return nil, fmt.Errorf("--store %q: no directory", raw)
		}
		return filestore.Open(dir)
	case etcd.Scheme:
		return etcd.OpenURL(ctx, u)
	}
	return nil, fmt.Errorf("--store %q: unknown scheme %q (want file, etcd or kube)", raw, u.Scheme)
}
