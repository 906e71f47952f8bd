package main

// A Section is one group of benchmarks the docs quote, run by one go test
// command and shown under one heading of docs/performance.md. Docs link to
// a section by the anchor of its Title (see Slug).
type Section struct {
	Title string // heading; its slug is the anchor docs link to
	About string // what the figures measure, in a sentence or two
	Pkg   string // package pattern, relative to the module root
	Bench string // the -bench regular expression

	// Benchtime is the -benchtime of a full run, Short that of a -short
	// run ("" for go test's default). Trials that measure one event per
	// iteration take a count ("20x").
	Benchtime, Short string

	// Args go after -args: the benchmarks' own flags, for a full and a
	// short run.
	Args, ShortArgs []string

	// Hide lists units not shown: ns/op of a benchmark whose iteration is
	// a whole trial says nothing the other metrics do not. Show, when set,
	// lists the only units shown, in that order.
	Hide, Show []string

	// Columns, when above 0, lays the figures out side by side: the
	// element of each benchmark's name at that depth (1: the first
	// sub-benchmark's) names a column, and a row is the rest of the name
	// and a unit. For benchmarks that measure the same things on several
	// subjects (BenchmarkStores/etcd/…, BenchmarkStores/nats/…).
	Columns int

	// Kube marks benchmarks that need the real kube-apiserver, which is
	// built (or found in its cache) only when such a section runs.
	Kube bool
}

// Sections is the set `make bench-report` runs. On 2 cores a full run takes
// about twenty minutes (estimated from short runs on a loaded machine; the
// first build of the kube-apiserver aside), most of it in trials that last
// a TTL each and in windows that count requests.
var Sections = []Section{
	{
		Title:     "Elector handover and crash failover",
		About:     "Three candidates on a memstore in real time, TTL 2 s, renewals every 500 ms. Handover: the leader stops and the next one leads; crash: the leader stops renewing and its claim expires. overlaps counts two leaders at once (must be 0).",
		Pkg:       "./elector",
		Bench:     "^(BenchmarkHandover|BenchmarkCrashFailover)$",
		Benchtime: "20x", Short: "5x",
		Hide: []string{"ns/op"},
	},
	{
		Title:     "memstore operations",
		About:     "One store operation on the in-memory store, single-threaded.",
		Pkg:       "./backends/memstore",
		Bench:     ".",
		Short:     "200ms",
		Benchtime: "",
	},
	{
		Title: "filestore operations",
		About: "One store operation on a directory of the test's temp dir (a write is a temp file written and fsynced, a rename, a directory fsync). VersusRaw reports a write's cost as a multiple of a bare publish on the same disk (x-raw); Burst, 64 writes at once from one Store (ack-p50-ms, ack-max-ms); Decode, parsing one key file.",
		Pkg:   "./backends/filestore",
		Bench: "^(BenchmarkGet|BenchmarkKeepAlive|BenchmarkCreateIfAbsent|BenchmarkCompareAndSet|BenchmarkRawPublish|BenchmarkVersusRaw|BenchmarkBurst|BenchmarkDecode)$",
		Short: "200ms",
	},
	{
		Title:     "Competing claims on etcd",
		About:     "One etcd server process with default timings and fsync; n claims with three candidates each, one client per candidate process; TTL 2 s, renew and retry every 500 ms. tenure with a lease per claim and with one shared lease per process, beside etcd's concurrency.Election with a session per candidate and one session per process. req/s counts every gRPC request (unary calls and stream messages); cpu-ms/s is the CPU of the whole test process and of the etcd server's; terms is the elections won in the 6 s window (0 for a steady leader). names=per-process gives every elector of a process one Identity, names=per-claim each claim's elector its own (the cost must not depend on it). handover/…: graceful handover on the same server, p50-ms and max-ms from the leader stopping to the next one leading; shared-lease/holding candidates each lead a claim of their own, so their lease is kept alive between terms.",
		Pkg:       "./backends/etcd",
		Bench:     "^BenchmarkCompetingClaims$",
		Benchtime: "1x", Short: "1x",
		Hide: []string{"ns/op"},
	},
	{
		Title:     "Handover and failover on etcd",
		About:     "Three candidates on the fast etcd server process the tests use. Handover: from the moment the old leader stopped acting to the moment the next one learns it leads, 40 rounds; failover: from closing the leader's client (it never releases) to the next leader, 12 rounds. overlaps counts new leaders elected before the old one stopped acting. A tenure candidate that stepped down rejoins the race in its own process, as a resigned Election campaigns again on its session.",
		Pkg:       "./backends/etcd",
		Bench:     "^(BenchmarkHandover|BenchmarkFailover)$",
		Benchtime: "1x", Short: "1x",
		Hide: []string{"ns/op"},
	},
	{
		Title:     "etcd, NATS, PostgreSQL and DynamoDB side by side",
		About:     "These four stores and memstore, the reference, in one run: memstore in the test process itself, one Store per measurement shared by every candidate (memstore has no handle of its own: each candidate reaches it through a crashtest.Store of its own, which a failover crashes), the others each on its own server: an etcd server process with default timings and fsync, a nats-server syncing every write, a PostgreSQL server started by the test (fsync off), a dynalite process (DynamoDB's API on LevelDB: the DynamoDB store is measured against it, not against AWS); postgres-batched is PostgreSQL with WithBatchedKeepAlive; postgres-pgbouncer is PostgreSQL through a PgBouncer 1.18 in transaction mode (pooler=transaction, no direct connection to listen on: no watch, so followers time their attempts to the claim's observed expiry, and a handover waits for it); dynamodb has no watch either, and its followers read the claim once per renew period. TTL 2 s, renew and retry every 500 ms, three candidates per claim, each its own connection and Store. claims=n: n claims held for a 6 s window after one TTL of settling; req/s counts what the candidates' connections send (memstore, which sends nothing: the calls that reach the shared Store, a watch opened counting one and its events none; etcd: gRPC unary calls and stream messages; NATS: published messages; PostgreSQL: statements, batched ones included; DynamoDB: HTTP requests), req/renewal those per renewal, terms the terms begun in the window (0: no term changes hands without a fault); cpu-ms/s is the CPU of the whole test process (memstore's included) and, for etcd, NATS and DynamoDB, of their server's process, server-cpu-ms/s that of the PostgreSQL server's processes. handover: from the leader stopping gracefully to the next one leading (15 rounds); failover: from the leader's connection cut under it (memstore: its crashtest.Store crashed; no release) to the next one leading (5 rounds); overlaps counts new leaders elected while the old one still reported that it led (must be 0); transfer: from the leader calling Elector.Transfer to the follower it names (one that has seen the claim held) leading, 15 rounds, each old leader then replaced by a fresh process, with overlaps as for handover, missed, transfers another candidate won (0 unless the target did not take the claim within the bound, a TTL), and failed, transfers whose store requests failed (the claim then released plainly or left to expire; timed all the same, to the next election); observe: from a new leader sending the request that took the claim (so the write's own round trip included) to an observer (elector.Observe, its own connection and Store) reporting it, over 15 graceful handovers, and stale, observations of an older leader after a newer one (must be 0).",
		Pkg:       "./tests/storebench",
		Bench:     "^BenchmarkStores$",
		Benchtime: "1x", Short: "1x",
		Hide:    []string{"ns/op"},
		Columns: 1,
	},
	{
		Title:     "Rolling updates with preferred candidates",
		About:     "Three candidates with Candidacy, replaced one by one by three of higher priority, each new process started (and its candidacy listed) before its old one stops, over the filestore and a real etcd server process, TTL 2 s; one iteration is one rollout. changes/rollout: leader changes per rollout (one is the aim; plain resignation moves the claim up to three times); overlaps: terms whose work overlapped another's (must be 0); leaderless-ms/rollout: the time from one leader's work ending to the next one's starting, summed over a rollout, as a mean over the rollouts; leaderless-p50-ms: the same, the median rollout; handover-ms: beside them, the median of 20 graceful handovers without candidacies on the same store.",
		Pkg:       "./tests/rollout",
		Bench:     "^BenchmarkRollout$",
		Benchtime: "100x", Short: "5x",
		Hide: []string{"ns/op"},
	},
	{
		Title:     "Many claims in one process",
		About:     "One process holds C claims (1,000 and 10,000; 1,000 only in a short run), each claim its own elector, every elector over the process's one Store and with one identity, TTL 10 s, renewals at the elector's default (TTL/3); the servers as in the side-by-side section; etcd-shared is etcd with WithSharedLease, postgres-batched PostgreSQL with WithBatchedKeepAlive, kube-session Kubernetes in session mode (WithSession) on a kube-apiserver over an etcd server process (its requests are HTTP requests, its cpu-ms/s the test process's alone). lead-s: from starting the electors until every claim has a leader (led instead: how many had one after two minutes, when not all did). Then, after one TTL of settling, over one TTL: req/s (counted as in the side-by-side section), req/renewal, terms (terms begun in the window: 0 unless a leader lost its claim), cpu-ms/s as there; at the window's end rss-mb, the resident memory of the test process (the clients only: every server is a process of its own), and goroutines/claim, those the electors and the store added, per claim (a leader's own OnElected included).",
		Pkg:       "./tests/storebench",
		Bench:     "^BenchmarkScale$",
		Benchtime: "1x", Short: "1x",
		Hide:    []string{"ns/op"},
		Columns: 1,
		Kube:    true,
	},
	{
		Title:     "Session mode on Kubernetes",
		About:     "One real kube-apiserver over an etcd server process; per-claim mode (the default) beside session mode (WithSession). claims=1000: one process renews 1000 claims every 2 s (TTL 6 s); req/s is what it sends, failed/s the renewals that timed out. elections=100: 100 elections of three candidates, one per process, TTL 2 s, renewal and retry every 500 ms, beside client-go's leaderelection; req/s of all three processes, and moves, the times leadership changed hands in the steady state (0 unless renewals were answered too late: an overloaded machine). handover: the leader stops gracefully; crash: its connection to the API server is cut; both until another candidate leads.",
		Pkg:       "./backends/kube",
		Bench:     "^BenchmarkSession$",
		Benchtime: "1x", Short: "1x",
		Hide: []string{"ns/op"},
		Kube: true,
	},
	{
		Title:     "Shard placement",
		About:     "shards.Place at S = 256 shards and M = 1…8 members over 2000 random sets of member names (the same sets every run): imbalance (max − min shards per member), and the shards moved by one join (moved/min) and by one leave (leave-moved/min) over the minimum such a change must move, the worst and the 99th percentile.",
		Pkg:       "./shards",
		Bench:     "^BenchmarkPlace$/^M=",
		Benchtime: "1x", Short: "1x",
		Hide: []string{"ns/op"},
	},
	{
		Title: "Shard placement cost",
		About: "The time of one shards.Place call, which every member pays at each membership change: at S = 256 with 8 members, and at the largest count with 64 and 256 members.",
		Pkg:   "./shards",
		Bench: "^BenchmarkPlace$/^call",
		Short: "200ms",
	},
	{
		Title:     "Shard handover",
		About:     "Four members, 256 shards: a member owning 64 leaves gracefully (Leave, one leave per iteration) or is cut off from the store (Crash). handover-ms and handover-max-ms are the median and maximum over every shard of every leave, from the leave to the shard's new owner acting; all-owned-ms until all of the leaver's shards are owned elsewhere. LeaveProcesses runs each member in its own process on one filestore. The filestore is in the test's temp dir: set TMPDIR to measure another disk.",
		Pkg:       "./shards",
		Bench:     "^(BenchmarkLeave|BenchmarkLeaveProcesses)$",
		Benchtime: "20x", Short: "4x",
		Show: []string{"handover-ms", "handover-max-ms", "all-owned-ms", "all-owned-max-ms", "shards/leave", "cpu-ms/leave"},
	},
	{
		Title:     "Changing the shard count",
		About:     "Four members of a group of 256 shards over one memstore in real time, TTL 2 s: each iteration doubles the count with shards.Resize while they run and then halves it back. settled-ms and settled-max-ms: the median and the longest, over the changes, from Resize's call until every shard of the new count acts on the member it is placed on; resize-ms: until Resize returned (every old claim sealed; it looks at most every 100 ms); ends/old-shard: the terms of the old count that ended per old shard (1: one handover each); overlaps: pairs of acting terms that shared a key (must be 0).",
		Pkg:       "./shards",
		Bench:     "^BenchmarkResize$",
		Benchtime: "10x", Short: "3x",
		Hide: []string{"ns/op"},
	},
	{
		Title:     "Shard crash",
		About:     "Four members, 256 shards; one owning 64 is cut off from the store, as a crashed process is: the time until all its shards are owned elsewhere (at least a TTL of 2 s).",
		Pkg:       "./shards",
		Bench:     "^BenchmarkCrash$",
		Benchtime: "5x", Short: "2x",
		Hide: []string{"ns/op"},
	},
	{
		Title:     "Shards at scale",
		About:     "100 members of a group of 10,000 shards (10 members of 1,000 in a short run: the sub-benchmark's name gives S and M) over one memstore in one process, TTL 10 s. start_s: from the first member's Start to the last one's return; converge_s: from the last Start until every shard has exactly one owner and every member its share; leave_s and leave_settled_s: from one member's graceful Stop until every shard is owned again, and balanced again; crash_s and crash_settled_s: the same after another member is cut off from the store (at least a TTL, ttl_s); rss_mb and goroutines once converged; violations: pairs of terms of one shard that acted at once or kept a token (must be 0).",
		Pkg:       "./shards",
		Bench:     "^BenchmarkScale$",
		Benchtime: "1x", Short: "1x",
		Hide: []string{"ns/op"},
	},
	{
		Title:     "Shard crash on PostgreSQL",
		About:     "Four members of a group of 64 shards, each over its own Store on the PostgreSQL server the tests start (fsync off), TTL 2 s, renewals every 500 ms; one member is cut off from the store, as a crashed process is: takeover-ms and takeover-max-ms, the median and the longest time from the cut until a shard of its is owned again, beside the TTL (ttl-ms).",
		Pkg:       "./backends/postgres",
		Bench:     "^BenchmarkShardsCrash$",
		Benchtime: "5x", Short: "2x",
		Hide: []string{"ns/op"},
	},
	{
		Title:     "Shards on etcd",
		About:     "The same leaves and crashes on a real etcd server process, with a lease per claim and with one shared lease per member.",
		Pkg:       "./tests/shards",
		Bench:     "^(BenchmarkEtcdLeave|BenchmarkEtcdCrash)$",
		Benchtime: "5x", Short: "2x",
		Show: []string{"handover-ms", "handover-max-ms", "all-owned-ms", "all-owned-max-ms", "shards/leave", "cpu-ms/leave", "takeover-ms", "takeover-max-ms", "ttl-ms"},
	},
	{
		Title:     "Steady shards on etcd",
		About:     "Every etcd request of four settled members holding S shards (S/4 each), at the elector's default timings (TTL 15 s, renewals every 5 s) with a shared lease per member batched every interval: req/s for the four together, which should not grow with S.",
		Pkg:       "./tests/shards",
		Bench:     "^BenchmarkEtcdSteady$",
		Benchtime: "1x", Short: "1x",
		Args:      []string{"-shards.steady=20s"},
		ShortArgs: []string{"-shards.steady=5s"},
		Hide:      []string{"ns/op"},
	},
	{
		Title:     "Shards at scale on etcd",
		About:     "32 members of a group of 10,000 shards (8 of 2,000 in a short run) over one etcd server process, each member with a client and a shared lease of its own, batched every batch, at the elector's default timings (TTL 15 s, renewals every 5 s). converge_s, leave_s, crash_s and the rest as in the memstore section above; req/s/member: every etcd request of the members once converged and settled for a TTL, over 20 s (5 s in a short run), per second and per member.",
		Pkg:       "./tests/shards",
		Bench:     "^BenchmarkEtcdScale$",
		Benchtime: "1x", Short: "1x",
		Args:      []string{"-shards.steady=20s"},
		ShortArgs: []string{"-shards.steady=5s"},
		Hide:      []string{"ns/op"},
	},
	{
		Title: "ID allocator",
		About: "Allocate of a key this process already uses (from memory), of a key the watched cache knows (requests per call), new IDs per second with 8 allocators at once, and one garbage-collection pass over 10 000 referenced IDs (memstore, filestore in the test's temp dir).",
		Pkg:   "./allocator",
		Bench: ".",
		Short: "200ms",
	},
	{
		Title:     "ID allocator on etcd",
		About:     "New IDs per second with 8 allocators, each with its own client, and one garbage-collection pass over 10 000 referenced IDs, on a real etcd server process.",
		Pkg:       "./tests/allocator",
		Bench:     ".",
		Benchtime: "", Short: "1x",
	},
	{
		Title: "Fake clock",
		About: "clocktest's Add: the benbjohnson mock it wraps sleeps 1 ms of real time at every move and after every timer or tick it fires, which is most of these figures.",
		Pkg:   "./clocktest",
		Bench: ".",
		Short: "200ms",
	},
}
