package filestore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/storeurl"
)

// A program that imports this package opens a file store by URL with
// storeurl.Open: file:///DIR names the store in directory DIR, which must
// exist, and file:///DIR?create=true makes DIR (and its parents) if it
// does not (see WithCreate).
func init() {
	storeurl.Register(storeurl.Scheme{
		Name:   "file",
		Form:   "file:///DIR[?create=true]",
		Create: true,
		Parse: func(u *url.URL) (storeurl.Opener, error) {
			dir, err := urlDir(u)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, req storeurl.Request) (backends.Store, error) {
				var opts []Option
				if req.Create {
					opts = append(opts, WithCreate())
				}
				if req.ReadOnly {
					opts = append(opts, WithReadOnly())
				}
				return Open(ctx, dir, opts...)
			}, nil
		},
	})
}

// urlDir is the directory of a file:// URL: absolute, cleaned.
// file://localhost/DIR is file:///DIR. A relative directory is refused,
// because in file://rel/dir "rel" is a host name, not a directory.
func urlDir(u *url.URL) (string, error) {
	switch {
	case u.Host != "" && u.Host != "localhost":
		return "", fmt.Errorf("host %q: want file:///ABSOLUTE/DIR (a relative directory is not accepted)", u.Host)
	case u.Path == "" || u.Path == "/":
		return "", errors.New("no directory: want file:///ABSOLUTE/DIR")
	case !filepath.IsAbs(u.Path):
		return "", fmt.Errorf("directory %q is not absolute", u.Path)
	}
	return filepath.Clean(u.Path), nil
}
