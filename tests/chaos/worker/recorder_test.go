package worker

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/tests/chaos/journal"
)

// TestRecorderJournalsAClaimTransactionAsACreate checks that a single claim
// taken through a transaction (a store with Txn) is journaled as the create
// it is, with its answer, so the linearizability check covers the claim key;
// refused because the key is held, the answer carries the holder's entry.
func TestRecorderJournalsAClaimTransactionAsACreate(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal")
	j, err := journal.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ms := memstore.New()
	defer ms.Close()
	rec := &recorder{Store: ms, j: j, worker: "w", pid: 1, key: "chaos"}
	l, err := backends.NewLocker(rec)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := backends.NewHolder("a")
	b, _ := backends.NewHolder("b")
	won, err := l.TryAcquire(ctx, "chaos", a, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryAcquire(ctx, "chaos", b, time.Minute); !errors.Is(err, backends.ErrHeld) {
		t.Fatalf("second acquisition: %v, want held", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	recs, err := journal.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []journal.OpRec
	for _, r := range recs {
		if r.Op != nil {
			got = append(got, *r.Op)
		}
	}
	if len(got) != 4 {
		t.Fatalf("journal = %+v, want the call and return of two creates", got)
	}
	for i, o := range got {
		if o.Kind != "create" || o.Key != "chaos" || o.Ret != (i%2 == 1) {
			t.Errorf("record %d = %+v, want a create of %q (return: %v)", i, o, "chaos", i%2 == 1)
		}
	}
	if r := got[1]; !r.OK || r.OutCreate != won.Token || r.OutRev != won.Revision {
		t.Errorf("the won create's return = %+v, want ok with token %d", r, won.Token)
	}
	if r := got[3]; r.OK || !r.Found || r.OutCreate != won.Token || r.Unknown {
		t.Errorf("the refused create's return = %+v, want found, the holder's token %d", r, won.Token)
	}
}
