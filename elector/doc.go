// Package elector runs a leader election over a backends.Locker: a process
// wraps its main loop in an Elector, which campaigns for a claim, renews it
// while it leads, and tells the process exactly when it must stop acting.
//
// This is the page to read first. To use tenure: make a Locker (package
// backends states the contract; backends/memstore, backends/filestore,
// backends/etcd, backends/kube (Kubernetes), backends/nats (NATS),
// backends/postgres (PostgreSQL) and backends/dynamodb (DynamoDB)
// implement it), fill a Config (its
// OnElected is the leader's work) and call New and Run; the Example shows
// a whole run. Then read, by need: the safety model below (what a leader
// may rely on); package lifecycle (the states State reports);
// package slots (N holders of one key, when one leader is not enough);
// package failuremodes (every known way leader election goes wrong, and
// the test showing how tenure handles it); package clocktest (the fake
// clock the tests step). Config.Logger turns logging on (it is off by
// default); Config.Trace carries the instrumentation hooks.
//
// # Safety model
//
// The local deadline of a term is the clock reading taken before the
// acquiring or renewing request was sent, plus the TTL, minus
// Config.SafetyMargin. The backend counts the claim's TTL from the moment it
// applied the request, which is later, so the holder's deadline always comes
// before the backend lets another holder in (up to clock-rate drift, which
// the margin covers). A term ends Config.CancelLead before its local
// deadline (Term.Deadline) unless a renewal has moved the deadline on by
// then, so that the leader's work is told to stop before the deadline even
// when the Elector's timer runs late.
//
//   - IsLeader is true only while the state is leader and the clock has not
//     reached the term's end. It reads the clock at each call, so it turns
//     false at the end whatever the Elector's goroutines are doing (blocked
//     in a backend call, recovering a panic, starved), and stays false for
//     that term.
//   - The context handed to OnElected is done from the term's end on, and
//     at any demotion; Config.OnElected says how. Contexts derived from it
//     are cancelled when it is, but their Err does not read the clock: poll
//     the leader's context itself.
//   - A renewal answered after the term's end does not extend it: the term
//     is demoted, never revived. An acquisition answered after the end of
//     the term it would have granted is released, not led.
//   - The claim is released only after OnElected has returned. If it has not
//     returned within Config.DrainTimeout, the claim is left to expire, never
//     released under running work, and the Elector does not campaign again
//     until OnElected has returned: one process never runs two terms' work.
//   - A renewal answered within RenewTimeout always extends the term before
//     it ends (Config.Validate's rule), so a term meeting no error never
//     ends for want of time.
//   - Errors are acted on by their backends.Classify class: lost demotes at
//     once; transient is retried with jittered backoff until the term's end;
//     fatal demotes at once and is reported. After four fatal errors in a
//     row, with no answer from the backend in between, the Elector ends as if
//     stopped: Done is closed, Err and Run return the last error (wrapped,
//     naming the key), and a term it led has had its OnDemoted. A usage
//     error (backends.ErrUsage) ends it at the first one.
//   - A panic in the Elector's loop or in a callback is recovered: it
//     demotes the current term (ReasonPanic), releases where that is safe,
//     is reported, and the Elector campaigns again. After a loss, an expiry,
//     transient errors or a panic it campaigns again for as long as it runs;
//     it stops only when stopped or on repeated fatal errors, and says so.
//   - Stop releases a leader's claim after OnElected returns, so a follower
//     can take over at once; Stop and every Release are bounded by
//     timeouts. Cancelling the context given to Start behaves like Stop. A
//     claim won, or written with a lost answer, by an attempt in flight
//     during Stop is released.
//     A test that needs an Elector to stop without releasing, as a killed
//     process does, runs it over backends/crashtest's store wrapper.
//   - Followers watch the claim when the Locker implements
//     backends.ClaimWatcher, and otherwise time their next attempt to the
//     expiry the backend reported, not to a fixed poll; every wait is
//     jittered, and a backoff after an error is waited out whatever the watch
//     signals meanwhile. Where the Locker's store judges expiry by local
//     observation (backends.Capabilities.ObservedExpiry, told through a
//     Store method as backends.StoreLocker and slots.Group have) and no
//     watch signals expiry, a follower reads the claim at least every
//     RenewPeriod, so that it takes a crashed holder's claim within TTL +
//     RenewPeriod of the holder's last renewal, not up to two TTLs after.
//   - During a store outage the Elector backs off: its attempts after errors
//     wait from RetryPeriod, doubling up to a cap of TTL, jittered, and the
//     backoff restarts at the first answer.
//   - All time comes from Config.Clock.
//
// docs/safety.md gives the reasons for each rule and how renewals and
// attempts are timed.
//
// # Transfer
//
// Elector.Transfer hands a led claim to a named candidate. It is a
// demotion first and keeps every rule above: IsLeader turns false at the
// call, the leader's context is cancelled, and the claim leaves only once
// OnElected has returned; if it has not within DrainTimeout, nothing is
// handed over and the claim is left to expire. Then, in one step, the
// claim is released and reserved for the target for
// Config.TransferBound: the target's next attempt takes it at a greater
// token, every other candidate's is refused (backends.ReservedError), and
// after the bound the claim is open to all. OnDemoted follows, paired with
// the term's OnElected as always, with ReasonTransferred (and the error,
// if the hand-over failed and the claim was released plainly or left to
// expire). The old leader campaigns again only after the bound. The target
// leads under its own local deadline, counted from its own request, like
// any new leader: no deadline or context crosses the transfer.
// docs/transfer.md gives the store-level steps and why none of their
// interleavings makes two holders.
//
// # Preferred candidates
//
// With Config.Candidacy, an Elector keeps a candidacy entry for the claim
// (its Priority and advertised value) while it follows, renewed like a
// claim and withdrawn at the end; a leader with Candidacy reads the
// candidacies at each renewal and, once a candidate whose Priority is
// above its own has stayed present at that Priority for
// Config.SettleTime, transfers the claim to it exactly as Transfer does
// (same demotion, drain and callbacks, ReasonTransferred); a leader
// stopped before that hands the claim to such a candidate at once rather
// than releasing it to a race (OnDemoted still says ReasonStopped). Only a
// strictly higher Priority moves the claim, so candidates of equal
// priority never do, and a candidate that comes and goes restarts its
// settle time each time it comes back. Such a leader also acts on a
// transfer request left beside the candidacies by a process that does
// not lead (backends.Candidacies.RequestTransfer, the tenure transfer
// command), at its next renewal. Preference never overrides safety: a
// transfer it starts that fails leaves the claim as Stop would.
//
// # Observing a claim
//
// Observe follows a claim for a process that does not campaign (a client
// routing requests to the leader's advertised address, a dashboard). It
// delivers the claim's state on a channel: held (by whom, at which token
// and slot, advertising what), free (released or expired), or unknown
// (the store could not be read), first as the first read finds it and
// then at every change. It never reports a holder the store has not
// reported, nor one past the expiry the store last reported without
// reading the claim again; it is watch-driven where the Locker watches,
// and paced like a follower elsewhere. A slow consumer gets the latest
// state, not a backlog. An observation is a hint: only a holder's own
// Elector knows it leads, and fencing tokens protect what it writes.
// docs/observer.md says how reads are timed on each kind of store.
//
// # What it does not promise
//
//   - A leader blocked on the context's Done channel, rather than polling
//     Err or IsLeader, depends on the Elector's timer: in a process starved
//     for longer than CancelLead, Done is closed after the local deadline.
//   - No leader-election library can stop a process that pauses (a GC pause,
//     a stopped VM, a swapped-out page) after checking IsLeader and before
//     writing: the write lands after the deadline, maybe after another
//     holder was elected. Protect shared resources with the fencing token:
//     every write carries Term.Token and the resource rejects tokens lower
//     than the highest it has seen.
//   - Code that polls IsLeader gets no drain: the claim is released as soon
//     as the term ends. Work that must finish before another holder starts
//     belongs in OnElected, which is awaited (up to DrainTimeout).
//   - The margin covers clock rate drift, not clock jumps of the host that
//     judges expiry, and not a backend that judges expiry wrongly. The
//     guarantees hold within the scope of the backend (one process for a
//     memory store, one host for a file store).
//   - Leader and OnNewLeader report what this Elector last observed; the
//     claim may have changed hands since.
//
// # Callbacks and hooks
//
// An application is told what it acts on by three callbacks in Config:
// OnElected, OnDemoted and OnNewLeader. Instrumentation (metrics, traces)
// is told by the hooks of Config.Trace. Logs go to Config.Logger.
//
// The callbacks are delivered on one goroutine owned by the Elector, one
// at a time, in the order the events happened; they never run
// concurrently with each other. While OnElected blocks (doing the leader's
// work), callbacks queued meanwhile wait and are delivered after it
// returns, in order; OnDemoted and OnNewLeader may block too, but every
// later callback and Stop wait for them. OnDemoted is called exactly once
// after each OnElected, and never for a term whose OnElected was not called
// (OnElected is skipped if its term ended before its turn came). Callbacks
// may call the Elector's query methods, and Stop from a goroutine of their
// own; Stop called from a callback waits for that same callback and so
// times out.
//
// The hooks are called synchronously where the event happens, so that a
// metric is up to date while OnElected still runs; they must not block, and
// they run concurrently with the callbacks. Trace says which goroutine calls
// each hook. A panicking callback is recovered and demotes the current term
// (ReasonPanic); a panicking hook is only recovered and logged.
package elector
