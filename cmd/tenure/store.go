package main

import (
	"strings"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/storeurl"

	// The stores tenure opens by URL: each makes its scheme known to
	// storeurl when linked in.
	_ "github.com/tenure-go/tenure/backends/dynamodb"
	_ "github.com/tenure-go/tenure/backends/etcd"
	_ "github.com/tenure-go/tenure/backends/filestore"
	_ "github.com/tenure-go/tenure/backends/kube"
	_ "github.com/tenure-go/tenure/backends/nats"
	_ "github.com/tenure-go/tenure/backends/postgres"
)

// storeFlagHelp is the help of every subcommand's --store flag: the URL
// forms of the stores tenure links in.
func storeFlagHelp() string {
	return "store URL (required), one of: " + storeurl.Forms()
}

// parseStore checks a --store URL before anything is opened; a URL that
// cannot name a shared store is a usage error. A store that does not exist
// is refused when opened, unless the URL asks for create=true.
func parseStore(raw string) (*storeurl.Location, error) {
	if raw == "" {
		return nil, usagef("--store is required (%s)", storeurl.Forms())
	}
	// The memory store is not linked in, so that no help offers it; its
	// URLs are refused here with the reason.
	if scheme, _, ok := strings.Cut(raw, ":"); ok && strings.EqualFold(scheme, "mem") {
		return nil, usagef("--store %s: a memory store lives in one process; tenure needs one shared with others", raw)
	}
	loc, err := storeurl.Parse(raw)
	if err != nil {
		return nil, usageError{err}
	}
	return loc, nil
}

// parseExistingStore is parseStore for a command that works on a store
// that exists (resize): such a command never makes one, and ignores a
// create=true in the URL, so that the --store value of tenure run works
// here as it is.
func parseExistingStore(raw string) (*storeurl.Location, error) {
	loc, err := parseStore(raw)
	if err != nil {
		return nil, err
	}
	loc.Create = false
	return loc, nil
}

// parseReadStore is parseExistingStore for a command that only reads a
// store (holders, watch): the store is opened read-only, so that the
// command writes nothing, not even where no store is yet.
func parseReadStore(raw string) (*storeurl.Location, error) {
	loc, err := parseExistingStore(raw)
	if err != nil {
		return nil, err
	}
	loc.ReadOnly = true
	return loc, nil
}

// checkKey checks a --key value; a missing or invalid key is a usage error.
func checkKey(key string) error {
	if err := backends.ValidateKey(key); err != nil {
		if key == "" {
			return usagef("--key is required")
		}
		return usagef("--key %q: %v", key, err)
	}
	return nil
}
