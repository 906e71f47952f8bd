package shards

import (
	"slices"
	"strings"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/internal/wire"
)

// view is what a member knows of its group: the live members and each
// shard's owner, from a full read of the group and the watch's events since.
//
// The watch is opened before the first read, so every change after the read
// also arrives as an event, in order; a change of a key between the watch's
// opening and the read arrives both ways. A read applies only to the keys no
// event has touched since the read began: those it saw later than any event
// did, while an event that arrived after the read began is at least as new
// as the read, or followed by the events that bring its key up to date. Events
// are thus the fast path, and a read (at start, after the watch reopens, and
// on a schedule) is needed only for what a store's watch does not report
// (expiry on a filestore).
type view struct {
	group    string
	countKey string // the group's record, compared with every event's key
	gen      int    // the generation whose shards owners describes
	count    int    // its shard count

	// lay is the group's record as last seen (zero until seen), and
	// laySeq the seq of the last event on its key.
	lay    layout
	laySeq uint64

	seq       uint64            // events applied so far
	members   map[string]int64  // live member identity -> its entry's token
	list      []string          // the identities of members, sorted; nil once they changed
	memberSeq map[string]uint64 // identity -> seq of the last event on its key
	owners    []Owner           // by shard
	ownerSeq  []uint64          // by shard, seq of the last event on its key
}

func newView(group string, lay layout) *view {
	return &view{
		group: group, countKey: countKey(group), gen: lay.gen, count: lay.count, lay: lay,
		members: map[string]int64{}, memberSeq: map[string]uint64{},
		owners: make([]Owner, lay.count), ownerSeq: make([]uint64, lay.count),
	}
}

// reshard makes the view describe the shards of generation lay: their
// owners are unknown until events or a read show them. The members stay.
func (v *view) reshard(lay layout) {
	v.gen, v.count = lay.gen, lay.count
	v.owners, v.ownerSeq = make([]Owner, lay.count), make([]uint64, lay.count)
}

// noteLayout records a read of the group's record made when seq was
// start, unless an event on its key came since.
func (v *view) noteLayout(start uint64, lay layout) {
	if v.laySeq <= start && lay.gen >= v.lay.gen {
		v.lay = lay
	}
}

// shardOf parses a shard key of the group.
func (v *view) shardOf(key string) (int, bool) {
	// Not a shard of this generation and count: a key of a nested group,
	// another generation's, or none.
	return parseShardKey(v.group, v.gen, v.count, key)
}

// apply applies a watch event. An event about an older entry than the one
// known (a lower token) changes nothing; a delete event that does not say
// which entry it removed (token 0) removes the one known.
func (v *view) apply(ev backends.Event) {
	v.seq++
	e := ev.Entry
	if e.Key == v.countKey {
		v.laySeq = v.seq
		if l, ok := parseLayout(e.Value); ok && ev.Kind == backends.EventPut && l.gen >= v.lay.gen {
			v.lay = l
		}
		return
	}
	if id, ok := strings.CutPrefix(e.Key, memberPrefix(v.group)); ok {
		v.memberSeq[id] = v.seq
		switch {
		case ev.Kind == backends.EventPut && e.CreateRevision >= v.members[id]:
			if got, err := wire.DecodeClaim(e.Value); err == nil && got.ID == id {
				v.setMember(id, e.CreateRevision)
			}
		case ev.Kind == backends.EventDelete && (e.CreateRevision == 0 || e.CreateRevision >= v.members[id]):
			v.deleteMember(id)
		}
		return
	}
	shard, ok := v.shardOf(e.Key)
	if !ok {
		return
	}
	v.ownerSeq[shard] = v.seq
	cur := v.owners[shard].Token
	switch {
	case ev.Kind == backends.EventPut && e.CreateRevision >= cur && isSeal(e.Value, 0):
		v.owners[shard] = Owner{} // sealed by a later count: no owner here
	case ev.Kind == backends.EventPut && e.CreateRevision >= cur:
		if c, err := wire.DecodeClaim(e.Value); err == nil {
			v.owners[shard] = Owner{Holder: backends.Holder{ID: c.ID, Nonce: c.Nonce, Advertised: c.Advertised}, Token: e.CreateRevision}
		}
	case ev.Kind == backends.EventDelete && (e.CreateRevision == 0 || e.CreateRevision >= cur):
		v.owners[shard] = Owner{}
	}
}

// applyRead applies a read that began when seq was start: to each key no
// event has touched since. owners is nil for a read of the members alone.
func (v *view) applyRead(start uint64, members map[string]int64, owners []Owner) {
	for id := range v.members {
		if _, ok := members[id]; !ok && v.memberSeq[id] <= start {
			v.deleteMember(id)
		}
	}
	for id, tok := range members {
		if v.memberSeq[id] <= start {
			v.setMember(id, tok)
		}
	}
	if owners == nil {
		return
	}
	for shard := range v.owners {
		if v.ownerSeq[shard] <= start {
			v.owners[shard] = owners[shard]
		}
	}
}

func (v *view) setMember(id string, token int64) {
	if _, ok := v.members[id]; !ok {
		v.list = nil
	}
	v.members[id] = token
}

func (v *view) deleteMember(id string) {
	if _, ok := v.members[id]; ok {
		v.list = nil
		delete(v.members, id)
	}
}

// memberList is the live identities, sorted. The slice is shared until the
// members change, and never written once returned: the loop compares it
// with the list it placed at each of its turns, which in a large group come
// at every batch of watch events.
func (v *view) memberList() []string {
	if v.list != nil {
		return v.list
	}
	out := make([]string, 0, len(v.members))
	for id := range v.members {
		out = append(out, id)
	}
	slices.Sort(out)
	v.list = out
	return out
}
