package storeurl_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/tenure-go/tenure/backends"
	_ "github.com/tenure-go/tenure/backends/filestore" // file://
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/storeurl"
)

// A program takes its store from a URL (a --store flag) and runs a Locker
// over it. The filestore is linked in by a blank import of
// backends/filestore; a directory that does not exist is made only when
// the URL asks for it.
func Example() {
	dir, err := os.MkdirTemp("", "storeurl-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	raw := "file://" + filepath.Join(dir, "claims")
	_, err = storeurl.Open(ctx, raw)
	fmt.Println("without create=true:", errors.Is(err, backends.ErrMissingResource))

	store, err := storeurl.Open(ctx, raw+"?create=true")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	locker, err := backends.NewLocker(store)
	if err != nil {
		fmt.Println(err)
		return
	}
	holder, err := backends.NewHolder("indexer a")
	if err != nil {
		fmt.Println(err)
		return
	}
	claim, err := locker.TryAcquire(ctx, "indexer", holder, time.Minute)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s holds %q with token %d\n", claim.Holder.ID, claim.Key, claim.Token)
	// Output:
	// without create=true: true
	// indexer a holds "indexer" with token 1
}

// Parse checks a URL without opening anything. A URL it refuses is a usage
// error: it wraps backends.ErrInvalid, and its text says what is wrong.
func ExampleParse() {
	for _, raw := range []string{
		"file://var/lib/claims",
		"file://user:secret@/var/lib/claims",
		"nats://127.0.0.1:4222/claims",
	} {
		_, err := storeurl.Parse(raw)
		fmt.Println(errors.Is(err, backends.ErrInvalid), err)
	}
	// Output:
	// true storeurl: "file://var/lib/claims": host "var": want file:///ABSOLUTE/DIR (a relative directory is not accepted)
	// true storeurl: "file://user:xxxxx@/var/lib/claims": file:// takes no user or password
	// true storeurl: "nats://127.0.0.1:4222/claims": scheme nats is not linked in: import _ "github.com/tenure-go/tenure/backends/nats"
}

// A backend registers its scheme from an init function of its own; this
// one, scratch://, opens a new memory store.
func ExampleRegister() {
	storeurl.Register(storeurl.Scheme{
		Name: "scratch",
		Form: "scratch://",
		Parse: func(u *url.URL) (storeurl.Opener, error) {
			if u.Host != "" || u.Path != "" {
				return nil, errors.New("want scratch:// with nothing after it")
			}
			return func(context.Context, storeurl.Request) (backends.Store, error) { return memstore.New(), nil }, nil
		},
	})

	_, err := storeurl.Parse("scratch://x")
	fmt.Println(err)
	s, err := storeurl.Open(context.Background(), "scratch://")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	fmt.Println("scope:", s.Capabilities().Scope)
	// Output:
	// storeurl: "scratch://x": want scratch:// with nothing after it
	// scope: process
}
