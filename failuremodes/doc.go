// Package failuremodes is the catalogue of the ways a lease-based leader
// election goes wrong, each one reproduced in a test and shown handled by
// tenure. The package has no code: this comment is the catalogue and the
// tests are the evidence.
//
// Entries FM-01 to FM-18 are the rows of the Failure Modes tables of the
// shardcoordinator README (coordinator logic; clock and timing;
// Route53-specific; DynamoDB-specific; network and infrastructure), with the
// backend-specific rows restated for any backend. Entries FM-19 to FM-30
// come from the coordination-primitives proposal's test list and from the
// known flaws of client-go's leaderelection and etcd's concurrency package;
// FM-31 from a review of the file store.
//
// Each entry gives the trigger, what a naive elector does (the
// consequence the README lists), what tenure does instead, and the test. A
// test runs the same scenario twice where that makes sense: against tenure,
// asserting the behaviour promised here, and against a deliberately naive
// elector kept in the test package (the README's loop: renew returns false
// on any error, no local deadline, IsLeader a stored bool, no jitter, Stop
// reads the state then cancels, no nonce, no timeouts), asserting that it
// shows the failure. Where no naive variant makes sense the test asserts the
// failing behaviour directly.
//
// Every test runs on a fake clock (package clocktest) and the
// fault-injecting store wrapper (package internal/faults), over
// memstore unless it says otherwise; none sleeps. Where a fault has to
// ignore the caller's context (an answer already received, a loop wedged
// in code deaf to its context, a process paused) the test wraps the Locker
// instead. Clock skew between holders uses clocktest's Skewed views and
// offset views of one fake clock. Run them with
//
//	go test -race ./failuremodes/
//
// # FM-01 Error-blind renewal
//
//   - Trigger: a transient backend error (timeout, unavailable) on a renewal.
//   - Naive: renew returns false on any error, so the leader demotes while
//     its lease is still valid: needless leadership churn.
//   - Tenure: renewal errors are classified with backends.Classify. A
//     transient one is retried with backoff until the local deadline; only
//     a lost claim or a fatal error demotes at once.
//   - Test: TestFM01ErrorBlindRenewal.
//
// # FM-02 Zombie leader after a loop panic
//
//   - Trigger: a panic inside the election loop (here: in the Locker's
//     Renew), or a loop wedged in a call that ignores its context.
//   - Naive: the loop dies, IsLeader returns its last value forever, and
//     once the lease expires another node leads too.
//   - Tenure: IsLeader is computed at each call from the local deadline, so
//     it turns false at the deadline whatever the loop is doing, and the
//     leader's context is cancelled then. A panic is recovered: the term is
//     demoted (cause ReasonPanic), the claim released, the panic reported,
//     and the elector campaigns again.
//   - Test: TestFM02ZombieLeaderAfterLoopPanic.
//
// # FM-03 Stop skips Release (check-then-act)
//
//   - Trigger: the loop acquires the claim between Stop's read of the state
//     and its cancelling of the loop.
//   - Naive: Stop read "follower", so it does not release; the claim is held
//     by nobody until its TTL runs out.
//   - Tenure: Stop marks the elector stopping under the same mutex the loop
//     takes to become leader. An answer that arrives after that is not led
//     but released; a term that began before is demoted and released.
//     Stop does not cancel an acquiring request in flight: it waits for
//     the answer, at most RenewTimeout. If the backend applied the request
//     but the answer is lost, the outcome is unknown (FM-26); the stopping
//     elector then reads the claim and releases it if it is its own, so
//     the claim is free when Stop returns, not only after its TTL.
//   - Test: TestFM03StopReleasesAcquiredClaim.
//
// # FM-04 Double Start
//
//   - Trigger: Start called twice.
//   - Naive: a second loop runs; the first one's cancel is lost, so Stop
//     stops only one of them.
//   - Tenure: a second Start (or a Start after Stop) returns
//     elector.ErrAlreadyStarted (or ErrStopped); one loop runs, and nothing
//     is left running after Stop.
//   - Test: TestFM04DoubleStart.
//
// # FM-05 Stale leadership after the parent context is cancelled
//
//   - Trigger: the context given to Start is cancelled without Stop.
//   - Naive: the loop exits, the state stays leader, IsLeader returns true
//     with an expired lease, and the claim is not released.
//   - Tenure: a cancelled parent context behaves like Stop: the term is
//     demoted (ReasonStopped), the claim released, the state becomes
//     stopped and Done is closed.
//   - Test: TestFM05ParentContextCancelled.
//
// # FM-06 Clock offset between holders
//
//   - Trigger: the wall clocks of two holders disagree (NTP drift of more
//     than a second).
//   - Naive: the holder writes its expiry as a wall-clock time and others
//     judge it by theirs: a node whose clock runs ahead sees a live lease as
//     expired and takes it. Two leaders.
//   - Tenure: no timestamp crosses hosts. The store judges expiry by its
//     own clock; each holder counts its deadline on its own monotonic clock
//     from the moment it sent the request. Offsets between clocks change
//     nothing.
//   - Test: TestFM06ClockOffsetBetweenHolders.
//
// # FM-07 Wall clock stepped backward
//
//   - Trigger: NTP steps a holder's wall clock back (or forward).
//   - Naive: the renew condition compares stored wall-clock expiries with a
//     stepped "now": the leader's own renewal fails (false demotion) or a
//     follower's acquire succeeds (split brain), depending on the direction.
//   - Tenure: the elector reads no wall clock, and Go's clock readings carry
//     a monotonic component that Sub and Before use, so a step of the wall
//     clock moves no deadline. Which judges of expiry are immune is FM-28.
//   - Test: TestFM07WallClockStep.
//
// # FM-08 Slow response: the lease expires between ticks
//
//   - Trigger: a renewal succeeds at the backend but its answer takes longer
//     than TTL minus the renew period.
//   - Naive: the holder believes it leads until its next tick, after the
//     lease has expired at the backend and another node took it. Two
//     leaders.
//   - Tenure: the deadline counts from when the request was sent, never from
//     the answer; IsLeader turns false at the deadline, which comes before
//     the backend's expiry, and an answer arriving after the deadline
//     extends nothing (elector.ErrLateAnswer).
//   - Test: TestFM08SlowRenewResponse.
//
// # FM-09 No jitter
//
//   - Trigger: many holders with the same configuration start together.
//   - Naive: every tick of every node lands on the same instant: bursts of
//     contention on the backend.
//   - Tenure: every renewal and every retry wait is jittered (renewals only
//     ever earlier), so attempts spread out. Renewals then move to a grid
//     whose phase comes from the Store the holder's Locker runs over (and
//     a seed drawn once per process): the many claims of one process renew
//     together, however their Electors are named, so a backend can send
//     them as one burst, while holders over different Stores (different
//     processes) stay apart, by the random phases of their grids.
//   - Test: TestFM09Jitter (holders over ten Stores);
//     TestRenewalsOverOneStoreAlign in package elector.
//
// # FM-10 Stale read lets an acquire steal a live claim
//
//   - Trigger: a read answered from a stale replica (Route53's eventual
//     consistency): it shows the claim expired although its holder renewed
//     it, with the revision still current (a keep-alive does not change it).
//   - Naive: acquiring is read-then-write: the stale read says "expired",
//     the write is conditioned on the revision read, which still matches, and
//     it succeeds. Two leaders.
//   - Tenure: acquiring is one conditional write (create-if-absent); reads
//     only time the next attempt. A stale read can delay an attempt, never
//     make one succeed.
//   - Test: TestFM10StaleReadCannotSteal.
//
// # FM-11 Rate limits exhausted
//
//   - Trigger: the backend throttles every call for a while (Route53's five
//     changes per second per zone).
//   - Naive: every node's renewal fails and every leader demotes: nobody
//     leads until the throttling stops.
//   - Tenure: throttling (backends.ErrThrottled) is transient: the leader
//     retries with backoff, at a bounded rate, and keeps leading if a retry
//     succeeds before its deadline; followers back off too.
//   - Test: TestFM11SustainedThrottling.
//
// # FM-12 Owner id with a space
//
//   - Trigger: an owner id with a space (from a host name), or any other
//     character a record format splits on.
//   - Naive: the record parser splits on the space; the owner it reads back
//     is not the one it wrote, so the claim can never be renewed or
//     released.
//   - Tenure: a holder id may be any valid UTF-8 (spaces, unicode, slashes,
//     quotes): claims are encoded as JSON and every id round-trips on every
//     backend available in-process (memstore, filestore).
//   - Test: TestFM12AnyHolderIDRoundTrips.
//
// # FM-13 Throttling causes a false demotion
//
//   - Trigger: one throttled renewal (DynamoDB's
//     ProvisionedThroughputExceededException).
//   - Naive: treated as a failed renewal: the leader demotes.
//   - Tenure: transient; retried; no demotion before the deadline.
//   - Test: TestFM13ThrottledRenewal.
//
// # FM-14 Duplicate owner ids
//
//   - Trigger: two processes configured with the same owner id.
//   - Naive: each one's condition "owner = me" is satisfied by the other's
//     claim: both renew it, both lead. No mutual exclusion.
//   - Tenure: a holder is the configured identity plus a per-instance
//     nonce. The two are different holders: exactly one leads, neither can
//     renew or release the other's claim, and the follower reports the
//     duplicate (the Trace.DuplicateIdentity hook and a log line).
//   - Test: TestFM14DuplicateIdentity.
//
// # FM-15 Partition from the backend
//
//   - Trigger: the leader loses connectivity to the backend: calls fail, or
//     hang without an answer.
//   - Naive: failing calls demote the leader at once although its lease
//     still runs (a leaderless gap until it expires); hanging calls, with no
//     timeout, wedge it as a leader forever while another node takes over
//     after the TTL.
//   - Tenure: each request is bounded by RenewTimeout; the leader keeps
//     leading until its term's end (CancelLead before its local deadline)
//     and stops exactly then, before the claim expires at the backend; a follower that can reach the backend
//     takes over right after the expiry. When the partition heals the old
//     leader follows.
//   - Test: TestFM15PartitionFromBackend.
//
// # FM-16 Stop hangs on a slow Release
//
//   - Trigger: Stop while the backend is slow or unreachable.
//   - Naive: Release has no timeout of its own: Stop blocks as long as the
//     backend does.
//   - Tenure: Stop, and every Release, are bounded (ReleaseTimeout, and
//     Stop's own bound of RenewTimeout + DrainTimeout + ReleaseTimeout); an
//     unreleased claim is left to expire.
//   - Test: TestFM16StopBoundedWhenReleaseHangs.
//
// # FM-17 Crash without Stop
//
//   - Trigger: the leader is killed (OOM, SIGKILL, power loss).
//   - Naive: the claim stays until its TTL; followers notice on their next
//     tick, so the leaderless gap is the remaining TTL plus up to a whole
//     renew period.
//   - Tenure: the claim also stays until its TTL (nothing can tell a crash
//     from a pause), but followers time their next attempt to the expiry the
//     backend reported, so one takes over right after it, with no polling
//     period on top.
//   - Test: TestFM17CrashedHolderTakeover.
//
// # FM-18 Backend resource deleted or permission revoked
//
//   - Trigger: the table, namespace or directory is deleted, or the
//     credentials lose their rights.
//   - Naive: every call fails with an infrastructure error that the loop
//     swallows: nodes sit leaderless with nothing reported.
//   - Tenure: backends.ErrPermission and backends.ErrMissingResource are
//     fatal: the leader demotes at once (ReasonFatal in OnDemoted, the
//     error in Cause.Err, the Trace.RenewFailed hook with ClassFatal, an
//     error log line). It campaigns again with backoff (RetryPeriod, twice, four
//     times that) and leads again if the backend is restored by then. If
//     it is not, the fourth fatal error in a row ends the elector as if
//     stopped: Run returns the error (wrapped, naming the key), Done is
//     closed and Err returns it, so a supervisor or a health check sees it
//     instead of a node retrying in silence.
//   - Test: TestFM18FatalBackendError.
//
// # FM-19 Crash leftovers in a file store
//
//   - Trigger: a writer dies mid-write, leaving a temp file, or dies while
//     holding the per-key operation lock.
//   - Naive: a lock-file (mkdir) scheme without stale recovery stays locked
//     forever after its holder died; readers that list the directory see
//     temp files as keys.
//   - Tenure: filestore's operation lock is an OFD lock the kernel drops when
//     its holder dies, so a dead holder never blocks anyone; temp files are
//     never read as entries and are removed once their lock is free; an
//     elector over the directory campaigns and leads as usual.
//   - Test: TestFM19FileStoreCrashLeftovers.
//
// # FM-20 Stale or expired claim of an earlier incarnation
//
//   - Trigger: a holder pauses past its TTL; meanwhile its replacement, with
//     the same configured id (a restarted pod), takes the claim; then the
//     old one wakes and renews.
//   - Naive: "owner = me" holds for the old incarnation too: it renews the
//     new one's claim and both lead.
//   - Tenure: an expired claim is absent to everyone. The new holder gets a
//     higher token; the old holder's renewal is refused as lost (its nonce
//     and token are not the claim's) and its release does not touch the new
//     claim.
//   - Test: TestFM20StaleClaimOfEarlierIncarnation.
//
// # FM-21 Concurrent acquisition at scale
//
//   - Trigger: a thousand candidates campaign for one claim at once.
//   - Naive: list-then-register (the race the primitives proposal was
//     written for): every candidate lists, sees nobody, and registers.
//     Many leaders.
//   - Tenure: acquisition is one create-if-absent: exactly one of the 1000
//     electors on memstore leads, the others follow, and after the leader
//     stops exactly one takes over.
//   - Test: TestFM21ThousandElectorsOneLeader.
//
// # FM-22 Release while leader work still runs
//
//   - Trigger: a leader is demoted (or stopped) while its work has not
//     finished.
//   - Naive: the claim is released at once while the work goes on (client-go
//     does not await its OnStartedLeading); another node starts the same
//     work. Two workers.
//   - Tenure: the claim is released only after OnElected has returned; if
//     it does not return within DrainTimeout the claim is left to expire,
//     never released, and the elector does not campaign again until the
//     work has returned.
//   - Test: TestFM22NoReleaseUnderRunningWork.
//
// # FM-23 OnDemoted for a holder that never led
//
//   - Trigger: Stop on a node that never led.
//   - Naive: the stop callback runs anyway (client-go calls
//     OnStoppedLeading for a process that never led), and code that cleans up
//     after leadership runs on a follower.
//   - Tenure: OnDemoted runs exactly once after each OnElected, and never
//     otherwise; a term that ended before OnElected's turn gets neither.
//   - Test: TestFM23NoDemotedWithoutElected.
//
// # FM-24 Zombie standby after a loss
//
//   - Trigger: a leader loses its claim (taken over, deleted).
//   - Naive: a one-shot campaign (client-go's Run, etcd's Campaign) returns
//     and never campaigns again: the node is a standby that never stands in.
//   - Tenure: after a loss, an expiry, transient errors or a panic the
//     elector campaigns again, for as long as it runs, and leads when the
//     claim is free. It stops campaigning only when stopped, or after
//     repeated fatal errors (FM-18), and then Run returns the error.
//   - Test: TestFM24CampaignsAgainAfterLoss.
//
// # FM-25 A campaign answered after its lease expired
//
//   - Trigger: the acquiring request succeeds at the backend, but its answer
//     arrives after the deadline the acquisition would grant (etcd's
//     Campaign can return success after its session expired).
//   - Naive: success means leader, however late: it leads on a claim that
//     has already expired and been taken by another node.
//   - Tenure: the deadline counts from the request's send time; an answer
//     arriving after it is not led (the claim is released if still held).
//   - Test: TestFM25LateAcquireDoesNotLead.
//
// # FM-26 A write whose outcome is unknown
//
//   - Trigger: an acquire or a renewal is applied by the backend, but the
//     answer is lost (a timeout after commit).
//   - Naive: a lost acquire answer looks like failure; the next attempt
//     finds the claim held (by itself) and waits a whole TTL: leaderless.
//   - Tenure: the error is transient (outcome unknown). A renewal is retried
//     (keep-alive is idempotent). An acquire whose claim turns out to be its
//     own is released, not led (its deadline is unknown), and taken afresh
//     on the next attempt.
//   - Test: TestFM26UnknownOutcome.
//
// # FM-27 A wrapper that hides a capability
//
//   - Trigger: a store wrapper (logging, metrics) embeds backends.Store and
//     so drops Watch or Txn while still declaring them; or a store that
//     does not enforce what a caller needs.
//   - Naive: a type assertion finds no method and the caller silently falls
//     back, or finds a method the store does not enforce.
//   - Tenure: backends.Require checks the declaration and the method; it
//     fails closed with an error wrapping errors.ErrUnsupported, and so do
//     NewLocker and WatchClaim. An elector over such a store does not
//     watch; it times attempts to the observed expiry.
//   - Test: TestFM27HiddenCapabilityFailsClosed.
//
// # FM-28 Clock jumps forward and backward
//
//   - Trigger: the clock of a holder, or of the host that judges expiry,
//     jumps.
//   - Naive: expiry written as wall time and judged by wall time moves with
//     every jump.
//   - Tenure: the elector's deadline is on the monotonic clock: readings of
//     the default clock carry Go's monotonic component, so a step of the
//     wall clock moves no deadline, and a forward jump of the holder's own
//     clock can only end its term early (IsLeader turns false at once; the
//     renewal answered after the jump extends nothing). Judges of expiry, as
//     each backend declares in Capabilities.ExpiryJudge: filestore uses the
//     boot id and CLOCK_MONOTONIC and never the wall clock; kube judges by
//     this process's own observation on its monotonic clock; etcd's server
//     judges its leases; memstore's judge is its injected clock, documented
//     as process-local: a jump of that clock expires entries for every user
//     of the store alike, and the default clock's readings are monotonic.
//   - Test: TestFM28ClockJumps.
//
// # FM-29 Clock rate skew
//
//   - Trigger: a holder's clock runs slower than the clock that judges
//     expiry.
//   - Naive: with no margin, a slow holder's deadline falls after the
//     backend's expiry: overlap.
//   - Tenure: the local deadline is TTL minus SafetyMargin after the send
//     time; a rate skew whose drift over one TTL stays within the margin
//     never overlaps. The term ends CancelLead earlier still, which hides a
//     little more drift but eats the time kept for a late timer; a skew
//     beyond both overlaps, which the test also shows: the margin must be
//     configured for the clocks in use.
//   - Test: TestFM29ClockRateSkew.
//
// # FM-30 Stop-the-world pause past the lease
//
//   - Trigger: the leader's process pauses (GC, a stopped VM) longer than
//     the lease while its work runs, then resumes and writes.
//   - Naive: nothing stops the write: it lands after another holder was
//     elected.
//   - Tenure: no elector can stop a paused process (the package doc says
//     so); every term carries a fencing token, the claim's CreateRevision,
//     strictly higher for each new holder, and a downstream resource that
//     accepts only tokens at least as high as the highest it has seen rejects
//     the stale write.
//   - Test: TestFM30PauseFencedByToken.
//
// # FM-31 Host suspend longer than the lease
//
//   - Trigger: the host of a leader and of its store is suspended to memory
//     or disk for longer than the TTL, then resumes. Go's monotonic clock,
//     CLOCK_MONOTONIC, stands still while the host is suspended, so every
//     holder's deadline is where it was.
//   - Naive: a store that judges expiry on a clock that counts the suspend
//     (CLOCK_BOOTTIME) finds the claim expired on resume and lets a new
//     candidate in while the old leader, whose deadline has not passed on
//     its own clock, still reports IsLeader: two leaders until the old
//     one's next renewal.
//   - Tenure: filestore judges expiry on CLOCK_MONOTONIC (with the boot id,
//     as the clock restarts at boot), the clock of every holder's deadline
//     on the host: a suspend stops the judge and the holders alike, and
//     after it the leader renews on while the candidate is refused. A
//     judge and holders that both count the suspend are safe too: the
//     deadline passes with the expiry. Processes in time namespaces with
//     different monotonic offsets do not share a clock; the filestore doc
//     excludes them.
//   - Test: TestFM31HostSuspend, and on the real clocks, with a child
//     process in a time namespace whose CLOCK_BOOTTIME reads as after a
//     suspend, TestSuspendedHostKeepsTheHolder in backends/filestore.
package failuremodes
