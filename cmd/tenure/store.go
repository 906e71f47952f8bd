package main

import (
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/storeurl"
)

// parseStore checks a --store URL before anything is opened; a URL that
// cannot name a shared store is a usage error.
func parseStore(raw string) (*storeurl.Location, error) {
	if raw == "" {
		return nil, usagef("--store is required (%s)", storeurl.Forms)
	}
	loc, err := storeurl.Parse(raw)
	if err != nil {
		return nil, usageError{err}
	}
	if loc.Scheme == storeurl.SchemeMem {
		return nil, usagef("--store %s: a memory store lives in one process; tenure needs one shared with others", loc)
	}
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
