// Package shards spreads a number of shards, which Resize changes while the
// group runs, over the live members of a group, with one fenced owner per shard, so that work keyed by a string can be
// routed to one serialization point per key: ShardOf(key) names the shard,
// Owner(shard) the member to send the work to, and that member acts under the
// shard's term and its fencing token.
//
// Every shard is a claim run by its own elector (package elector), with all of
// the elector's rules: the local deadline counted from before the send, the
// ownership context cancelled before it, drain before release, error classes,
// panic safety, bounded stops. This package adds who campaigns for what; it
// holds no safety logic of its own.
//
// # Layout in the store
//
// A group G owns the store keys
//
//	G/count        the shard count S, written without TTL
//	G/member/<id>  one claim per live member, held by its membership elector
//	G/shard/<i>    the claim of shard i, 0 ≤ i < S
//
// The first member to start records S; a member configured with another
// count refuses to start (ErrCountMismatch).
//
// # Changing the count
//
// Resize moves a running group from S to S′ shards. Each count is a
// generation: the group's first is generation 0, whose shard claims are
// G/shard/<i>; generation N ≥ 1 has its claims at G/shard/gN/<i>, and the
// record at G/count names the generation and, while the change is in
// flight, the count before it. Resize writes that record (one
// compare-and-set), and from then on:
//
//   - Every member, as soon as its watch (or its next read of the group)
//     shows the record, stops its electors of the old count, each draining
//     and releasing as at any handover, and campaigns for the shards of
//     the new count placed on it (Place over the same members).
//   - A key k is in shard h(k) mod S under the old count and h(k) mod S′
//     under the new one, so a shard j of S′ draws keys from the old
//     shards i ≡ j (mod gcd(S, S′)): one when S′ is a multiple of S
//     (doubling splits each old shard in two), two when S′ is half of S.
//     A member starts the elector of j only once each of those old claims
//     has been released or has expired, as the store judges it, and is
//     sealed: a permanent entry written by create-if-absent where the
//     claim was, which no elector can take (a member of the old count that
//     has not seen the change yet finds the key present and no claim in
//     it). So the owner under the old count has stopped acting on a key,
//     by its own deadline, before any owner under the new count starts,
//     and no key ever has two owners. On one member, the callbacks of an
//     old shard have returned before those of a new shard that draws on
//     it are called.
//   - Resize seals the old claims no member holds, waits until all are
//     sealed, and records the new count alone; a member configured with
//     either count may start meanwhile, only the new one after.
//
// While the change is in flight, a member routes by the new count as soon
// as it has seen the change (ShardOf, Count, Owner and Term answer for the
// new count); a key's shard under it has no owner until the old shards
// it draws on have ended, which for a graceful handover is one release and
// one create later, and Owner reports none meanwhile: work routed there
// waits, or is retried, as for any handover. A term's own keys are those
// of its Span (SpanOf), fixed for the term's life. Each old shard moves
// once: its term ends, and the new shards drawing on it are taken once
// each. The tokens of a new count's claims are those of new keys: on a
// store whose tokens are per key (Kubernetes, DynamoDB) they may be lower
// than the old count's, so a resource fenced across a change compares the
// span's Generation first, then the token. The seals stay in the store,
// one per shard of every earlier count.
//
// # Placement
//
// A member is live while its membership claim (a claim like any other, with
// the template's TTL) is held; Members lists the live identities. Every member
// computes the same placement from the same list (Place: rendezvous hashing
// with quotas of ⌊S/M⌋ or ⌈S/M⌉ shards per member) and campaigns for the
// shards placed on its identity. When the list changes, a member stops the
// electors of the shards no longer placed on it (each drains and releases)
// and starts electors for the shards newly placed on it, which follow the
// previous owner's claim and take it when it is released or expires. A
// member that leaves (Stop) releases its membership and, at the same time,
// drains and releases its shards, so the others follow each shard's claim
// while its work stops and take it as soon as it is released. A
// member whose process dies or stalls stops renewing its membership and its
// shard claims; after a TTL both have expired, the others place its shards
// elsewhere and take them at once (a test crashes a member this way by
// running it over backends/crashtest's store wrapper). Without expiry events from the store
// (Capabilities.ExpiryEvents), members list the members every TTL/6, so a
// takeover comes at most TTL/6 later; where expiry is also judged by local
// observation (Capabilities.ObservedExpiry: PostgreSQL), they list the
// shards with them, so that their stores have seen every shard claim's
// last keep-alive within TTL/6 and a crashed member's claims expire for
// them with its membership, not a TTL after they first look at them.
//
// # What it costs
//
// Each member holds one watch of the group (on stores that can watch), which
// also serves the claim watches of all its electors, and follows the group
// through its events, received as they come whatever else the member is
// doing; it reads the group whole (a Get of its count record, a List of the
// members and one of the shards) only when it starts, when its watch broke and could not be
// reopened at once, and every ten TTLs, and on a store without expiry
// events it lists the members every TTL/6 (and the shards with them where
// expiry is judged by local observation). A watch the store ended (one
// that fell behind, as when many members hand shards over at once) and the
// member reopened at once costs a list of the members then and a whole
// read within a TTL, and the electors' claim watches go on, signalled that
// their claims may have changed meanwhile. On a store that cannot watch, it
// reads the group whole every TTL/6. During a store outage it backs off:
// after a failed read the next waits from TTL/6, doubling up to a cap of one TTL, with the elector
// template's jitter, until a read succeeds (the electors back off as package
// elector documents). Each owned shard costs what its elector costs: on etcd with
// etcd.WithSharedLease, a member's renewals are answered in batches of one
// keep-alive whatever the number of its shards (BenchmarkEtcdSteady in
// tests/shards counts the requests of four members holding 256 shards;
// its figures are in docs/performance.md, "Shards on etcd").
//
// # Guarantees
//
//   - Per shard, everything the elector guarantees for a claim: at most one
//     member acts on a shard by its own deadline, tokens strictly increase,
//     and a claim is released only after OnAcquired has returned.
//   - Per shard, OnAcquired and OnReleased are delivered in order, paired
//     (one OnReleased after each OnAcquired) and never concurrently: a
//     member runs at most one elector per shard at a time, and starts a new
//     one only once the previous one has finished, its callbacks included.
//   - Across shards there is no order: the callbacks of different shards run
//     on different goroutines and may run concurrently.
//   - Warm-up: a member that restarts with the same identity never acts on a
//     shard before it has acquired a fresh claim on it, with a new token; the
//     store grants that claim only once the previous holder's claim has been
//     released or has expired, and the previous holder stopped acting by its
//     own deadline, before that expiry. A member acts only inside a term
//     (OnAcquired's context, or Term), so nothing it did before the restart,
//     and nothing it remembers, can make it act early.
//   - A member changes only the entries its own store wrote: its membership
//     and shard claims are created with CreateIfAbsent once absent, then
//     renewed and released by that member's store alone; no member ever
//     deletes, rewrites or compare-and-sets another member's membership or
//     shard entry, nor those of an earlier instance of itself (a restarted
//     member waits for them to be released or to expire). This is the rule
//     of use the etcd store's one-keep-alive renewals rely on.
//   - ShardOf and Place are stable: the same answers in every process and
//     release.
//
// # What it does not promise
//
//   - Owner and Members report what this member last read; the claim may
//     have changed hands since. Routing by them is a hint: the
//     member that receives work checks Term, and the resource checks the
//     token.
//   - Members may disagree briefly on the membership, and so on the
//     placement, while a change propagates: two members may campaign for
//     one shard, and one of them wins; no shard ever has two owners.
//   - A shard whose placed member is live but cannot take it (its elector
//     keeps failing) stays unowned: only a member's departure moves its
//     shards.
//   - Balance holds once the membership is stable; movement on one join or
//     leave is close to the minimum but not always at it (see Place;
//     BenchmarkPlace's figures are in docs/performance.md, "Shard
//     placement").
package shards
