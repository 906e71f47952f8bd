package journal

// OpRec is one store operation on a claim key as a worker saw it: the call
// is journaled before the request goes out and the return after its
// answer, so an operation cut off by a kill or a pause shows as a call with
// no return, whose outcome is unknown.
type OpRec struct {
	Seq   int64  `json:"seq"`
	Kind  string `json:"kind"` // get, create, cas, delete, keepalive, txn
	Key   string `json:"key"`
	Rev   int64  `json:"rev,omitempty"` // the revision compared (cas, delete, keepalive)
	TTL   int64  `json:"ttl,omitempty"` // ns
	Value string `json:"val,omitempty"`
	Ret   bool   `json:"ret,omitempty"` // this is the return record

	// The answer, on the return record.
	OK        bool   `json:"ok,omitempty"`    // the write happened, the key was found
	Found     bool   `json:"found,omitempty"` // on a conflict: the key was present
	Unknown   bool   `json:"unk,omitempty"`   // an error that leaves the outcome unknown
	OutRev    int64  `json:"orev,omitempty"`
	OutCreate int64  `json:"ocre,omitempty"`
	OutValue  string `json:"oval,omitempty"`
}
