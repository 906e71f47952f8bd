package shards

import (
	"testing"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/internal/wire"
)

func put(key, id string, token int64) backends.Event {
	return backends.Event{Kind: backends.EventPut, Entry: backends.Entry{Key: key, Value: wire.EncodeClaim(wire.Claim{ID: id, Nonce: "n"}), CreateRevision: token, Revision: token}}
}

func del(key string, token int64) backends.Event {
	return backends.Event{Kind: backends.EventDelete, Entry: backends.Entry{Key: key, CreateRevision: token, Revision: token}}
}

// TestViewOrdersReadsAndEvents checks that a read applies only to the keys no
// event touched since it began; events about older entries than the one known
// change nothing.
func TestViewOrdersReadsAndEvents(t *testing.T) {
	v := newView("g", layout{count: 3})
	start := v.seq
	// Events that arrive while a read is under way: member b joins, shard 1
	// is taken with token 7.
	v.apply(put(memberKey("g", "b"), "b", 5))
	v.apply(put(shardKey("g", 1), "b", 7))
	// The read saw a alone, shard 1 free and shard 2 held by a.
	v.applyRead(start, map[string]int64{"a": 2}, []Owner{{}, {}, {Holder: backends.Holder{ID: "a", Nonce: "n"}, Token: 3}})
	if got := v.memberList(); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("members %v, want [a b]", got)
	}
	if o := v.owners[1]; o.Holder.ID != "b" || o.Token != 7 {
		t.Errorf("shard 1 owner %v, want b with token 7 (the event is newer than the read)", o)
	}
	if o := v.owners[2]; o.Holder.ID != "a" || o.Token != 3 {
		t.Errorf("shard 2 owner %v, want a with token 3 (from the read)", o)
	}
	// A late delete of an older entry of shard 1 leaves the newer one.
	v.apply(del(shardKey("g", 1), 6))
	if o := v.owners[1]; o.Token != 7 {
		t.Errorf("shard 1 after the delete of token 6: %v, want token 7 kept", o)
	}
	// The delete of the entry known, or of one the event does not name,
	// removes it.
	v.apply(del(shardKey("g", 1), 7))
	v.apply(del(memberKey("g", "a"), 0))
	if o := v.owners[1]; o.Token != 0 {
		t.Errorf("shard 1 after its delete: %v, want no owner", o)
	}
	if got := v.memberList(); len(got) != 1 || got[0] != "b" {
		t.Errorf("members %v, want [b]", got)
	}
	// A later read that began before an event does not undo it; one that
	// began after applies everywhere.
	start = v.seq
	v.apply(put(memberKey("g", "c"), "c", 9))
	v.applyRead(start, map[string]int64{"b": 5}, make([]Owner, 3))
	if got := v.memberList(); len(got) != 2 || got[1] != "c" {
		t.Errorf("members %v, want [b c]", got)
	}
	v.applyRead(v.seq, map[string]int64{"b": 5}, make([]Owner, 3))
	if got := v.memberList(); len(got) != 1 {
		t.Errorf("members %v after a read that saw c gone, want [b]", got)
	}
	// Keys outside the group's layout are ignored.
	v.apply(put("g/shard/9", "x", 10))
	v.apply(put("g/shard/01", "x", 10))
	v.apply(put(memberKey("g", "d"), "someone-else", 11))
	if got := v.memberList(); len(got) != 1 {
		t.Errorf("members %v after foreign keys, want [b]", got)
	}
}
