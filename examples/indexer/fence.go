package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tenure-go/tenure/backends"
)

// endpoint is what a serving indexer publishes: where to reach it, under the
// token of the term it serves in.
type endpoint struct {
	ID    string `json:"id"`
	Addr  string `json:"addr"`
	Slot  int    `json:"slot"`
	Token int64  `json:"token"`
}

// errStale is returned by publish when the key already carries a record
// from a later term.
var errStale = errors.New("indexer: stale token")

// endpointKey is where the indexer serving slot i of group publishes. It is
// outside the keys the slot group owns.
func endpointKey(group string, slot int) string {
	return fmt.Sprintf("%s/endpoint-%d", group, slot)
}

// publish writes ep to key unless the record there carries a higher token.
// The comparison and the write are one compare-and-set on the key's
// revision, so a holder whose term has ended cannot overwrite its
// successor's record, however long it was paused: this is the fenced write.
// A record that does not decode is refused with an error wrapping
// backends.ErrCorrupt (class fatal).
func publish(ctx context.Context, store backends.Store, key string, ep endpoint) error {
	value, err := json.Marshal(ep)
	if err != nil {
		return err
	}
	for {
		cur, err := store.Get(ctx, key)
		switch {
		case errors.Is(err, backends.ErrNotFound):
			_, err = store.CreateIfAbsent(ctx, key, value, 0)
		case err != nil:
			return fmt.Errorf("indexer: publish %q: %w", key, err)
		default:
			var old endpoint
			if derr := json.Unmarshal(cur.Value, &old); derr != nil {
				// Its token cannot be read, so it cannot be fenced: never
				// overwritten, and no retry will make it readable.
				return fmt.Errorf("indexer: publish %q: malformed record at revision %d: %w: %v", key, cur.Revision, backends.ErrCorrupt, derr)
			}
			if old.Token > ep.Token {
				return fmt.Errorf("indexer: publish %q with token %d, record has %d: %w", key, ep.Token, old.Token, errStale)
			}
			_, err = store.CompareAndSet(ctx, key, cur.Revision, value, 0)
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, backends.ErrConflict) {
			return fmt.Errorf("indexer: publish %q: %w", key, err)
		}
		// Someone wrote in between: compare again.
	}
}
