// Package elector runs a leader election over a backends.Locker: a process
// wraps its main loop in an Elector, which campaigns for a claim, renews it
// while it leads, and tells the process exactly when it must stop acting.
//
// This is the page to read first. To use tenure: make a Locker (package
// backends states the contract; backends/memstore, backends/filestore,
// backends/etcd, backends/kube (Kubernetes), backends/nats (NATS) and
// backends/postgres (PostgreSQL) implement it), fill a Config (its
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
// then: the lead is there so that the leader's work is told to stop before
// the deadline even when the Elector's timer runs late.
//
//   - IsLeader is true only while the state is leader and the clock has not
//     reached the term's end. It is computed from the clock at each call,
//     so it turns false at the end whatever the Elector's own goroutines are
//     doing: blocked in a backend call, recovering a panic, starved. Once
//     false it stays false for that term.
//   - The context handed to OnElected is done from the term's end on: its
//     Err reads the clock at each call and returns an error from the end
//     on, and Done is closed by then (a call to Err or Done past the end
//     ends the term itself, as the Elector's timer would). A timer armed for
//     the end closes Done without anyone asking, so a leader blocked on
//     Done hears of the end before the local deadline unless that timer
//     runs more than CancelLead late. The context is also cancelled at any
//     demotion, and its Deadline method reports the term's current end.
//     Contexts derived from it (context.WithCancel and the like) are
//     cancelled when it is, so their Err does not read the clock: poll the
//     leader's context itself.
//   - A renewal answered after the term's end does not extend it: the term
//     has ended and is demoted, never revived. An acquisition answered
//     after the end of the term it would have granted is released, not led.
//   - The claim is released only after OnElected has returned. If it has not
//     returned within Config.DrainTimeout, the claim is left to expire, never
//     released under running work, and the Elector does not campaign again
//     until OnElected has returned: one process never runs two terms' work.
//   - Each renewal goes out Config.RenewPeriod (jittered only earlier, and
//     aligned with the renewals of the other Electors over its Store,
//     whatever their Identity)
//     after the send time of the request the deadline counts from, and
//     Config.Validate requires RenewPeriod + RenewTimeout + SafetyMargin +
//     CancelLead < TTL: a renewal answered within RenewTimeout always
//     extends the term before it ends, so a term meeting no error never
//     ends for want of time.
//   - Renew errors are classified with backends.Classify: lost demotes at
//     once; transient is retried with jittered exponential backoff until the
//     term's end, then demotes; fatal demotes at once and is reported (error
//     log, the Trace hooks RenewFailed and Demoted, and ReasonFatal in
//     OnDemoted).
//   - Fatal errors are those no retry can fix, as backends.Classify sorts
//     them: permission denied (backends.ErrPermission, fs.ErrPermission), a
//     missing backend resource (ErrMissingResource), a corrupt or malformed
//     record (ErrCorrupt), an invalid argument (ErrInvalid), an unsupported
//     operation (ErrUnsupported, errors.ErrUnsupported) and a closed store
//     (ErrClosed). After a fatal error, on a renewal or an acquisition, the
//     Elector tries again with backoff (RetryPeriod, then twice and four
//     times that, jittered), in case the fault is being repaired. When four
//     attempts in a row have failed with fatal errors, with no answer from
//     the backend in between, it ends as if stopped: the state becomes
//     stopped, Done is closed, Err returns the last error (wrapped, naming
//     the key), Run returns it, Start returns ErrStopped, and a term it led
//     has had its OnDemoted.
//   - A usage error the backend answers plainly (backends.ErrUsage: a
//     single claim asked on a key that is a slot group) is not retried:
//     the Elector ends at the first one, as above, and Err wraps
//     backends.ErrUsage and names the problem.
//   - Every goroutine is panic-safe. A panic in the Elector's loop (for
//     example in a Locker) demotes, releases where that is safe, reports,
//     and campaigns again; a panic in a callback is recovered and demotes the
//     current term with ReasonPanic. After a loss, an expiry, transient
//     errors or a panic the Elector campaigns again (with backoff after
//     panics), for as long as it runs: it never idles as a zombie standby.
//     It stops campaigning only when stopped, or on repeated fatal errors,
//     and then says so.
//   - Stop releases a leader's claim after OnElected returns, so a follower
//     can take over within milliseconds; Stop and every Release are bounded
//     by timeouts. Cancelling the context given to Start behaves like Stop.
//     Stop does not cancel an attempt in flight (it is bounded by
//     RenewTimeout): a claim it wins is released, and one whose answer is
//     lost is looked up and released.
//   - Followers watch the claim when the Locker implements
//     backends.ClaimWatcher and try at once when it changes. When the
//     watch also signals expiry (ClaimWatcher.ExpiryEvents), a follower
//     waits for the watch: it sends nothing while the holder renews,
//     except one attempt about ten TTLs past the expiry it last observed,
//     so that a signal the watch failed to deliver delays a takeover,
//     never prevents it.
//     Otherwise, and when no watch runs, they time the next attempt to the
//     expiry the backend reported (plus a little jitter), not to a fixed
//     poll. A backoff after an error, though, is waited out whatever the
//     watch signals meanwhile: other holders' writes, and the Elector's own
//     failed attempts, do not turn it into a spin against a failing
//     backend. Every retry wait is jittered; renewal waits are jittered, then
//     moved to the grid of their Store (see Config.RenewPeriod).
//   - All time comes from Config.Clock.
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
// returns, in order. OnDemoted is called exactly once after each
// OnElected, and never for a term whose OnElected was not called
// (OnElected is skipped if its term ended before its turn came). Callbacks
// may call the Elector's query methods, and Stop from a goroutine of their
// own; Stop called from a callback waits for that same callback and so
// times out.
//
// The hooks are called synchronously, where the event happens, so that a
// metric is up to date while OnElected still runs; they must not block.
// Who runs each kind:
//
//	kind                   goroutine                           may block       order
//	OnElected              the Elector's callback goroutine    yes (1)         event order, with the callbacks
//	OnDemoted              the Elector's callback goroutine    should not (2)  after its term's OnElected returned
//	OnNewLeader            the Elector's callback goroutine    should not (2)  event order, with the callbacks
//	Trace.StateChanged     any that moves the state (3)        no              one at a time, in transition order
//	Trace.Demoted          the one that ends the term (3)      no              once per term, as it ends
//	Trace.Panicked         the one that recovered it (4)       no              -
//	Trace.ElectionWon,     the Elector's campaign goroutine    no              event order, among these five
//	  ElectionLost,
//	  Renewed,
//	  RenewFailed,
//	  DuplicateIdentity
//
// Notes to the table:
//
//  1. OnElected is the leader's work: it may run until its context is
//     done. The claim is not released before it returns (up to
//     DrainTimeout; past that, the claim is left to expire), and later
//     callbacks wait for it.
//  2. OnDemoted and OnNewLeader may block, but every later callback, the
//     next term's OnElected included, and Stop wait for them.
//  3. A term ends, and the state moves, on the Elector's campaign
//     goroutine (a lost, fatal or late renewal; an attempt; a stop), on
//     the clock timer armed for the term's end, on the goroutine calling
//     Stop (or cancelling Start's context, through the Elector's own
//     goroutine), on the callback goroutine when a callback panics, or on
//     the goroutine calling the leader's context's Err or Done when that
//     call finds the term past its end. StateChanged is called by that
//     goroutine, or by another one delivering the transitions queued
//     before it; it never runs concurrently with itself.
//  4. The campaign goroutine (a panicking Locker), the callback goroutine
//     (a panicking callback), or the one ending a term at its end (the
//     timer, or a caller of the leader's context's Err or Done).
//
// Hooks run concurrently with the callbacks and, across goroutines, with
// each other; Trace documents each hook's arguments. A panicking callback
// is recovered and demotes the current term (ReasonPanic); a panicking
// hook is only recovered and logged.
package elector
