// Package failuremodes is the catalogue of the ways a lease-based leader
// election goes wrong, each one reproduced in a test and shown handled by
// tenure. The package has no code: this comment is the catalogue and the
// tests are the evidence.
//
// Entries FM-01 to FM-18 are the rows of the Failure Modes tables of the
// shardcoordinator README, with its backend-specific rows restated for any
// backend; FM-19 to FM-30 come from the coordination-primitives proposal's
// test list and the known flaws of client-go's leaderelection and etcd's
// concurrency package; FM-31 from a review of the file store. FM-32 and
// FM-33 are the seed's DynamoDB-specific rows (FM-13 and FM-14) run again
// against the DynamoDB store over a real server: their tests live in the
// backends/dynamodb module, since this module links no AWS package.
// FM-34 to FM-38 are the ways a planned transfer of leadership can go
// wrong, FM-39 and FM-40 those of preferred candidates, and FM-41 to
// FM-43 the ways an observer of a claim (elector.Observe) can mislead the
// clients that route by it.
//
// Each mode's test runs the scenario against tenure, asserting what is
// promised below, and where that makes sense against a deliberately naive
// elector kept in the test package (renew returns false on any error, no
// local deadline, IsLeader a stored bool, no jitter, Stop reads the state
// then cancels, no nonce, no timeouts), asserting that it fails. The test's
// comment gives the trigger, what the naive elector does and how tenure
// avoids it. Every test runs on the fake clock (package clocktest) and the
// fault-injecting store wrapper (package internal/testrig/faults), over memstore
// unless it says otherwise; none sleeps. Run them with
//
//	go test -race ./failuremodes/
//
// # The catalogue
//
//   - FM-01 Error-blind renewal: a transient renewal error does not demote
//     a leader before its local deadline (TestFM01ErrorBlindRenewal).
//   - FM-02 Zombie leader after a loop panic: IsLeader turns false at the
//     deadline whatever the loop does; a panic demotes, is reported, and the
//     elector campaigns again (TestFM02ZombieLeaderAfterLoopPanic).
//   - FM-03 Stop skips Release: a claim taken while Stop runs is released,
//     not led (TestFM03StopReleasesAcquiredClaim).
//   - FM-04 Double Start: a second Start returns an error and one loop runs
//     (TestFM04DoubleStart).
//   - FM-05 Parent context cancelled: it stops the elector as Stop does
//     (TestFM05ParentContextCancelled).
//   - FM-06 Clock offset between holders: no timestamp crosses hosts, so
//     offsets change nothing (TestFM06ClockOffsetBetweenHolders).
//   - FM-07 Wall clock stepped: a step of the wall clock moves no deadline
//     (TestFM07WallClockStep).
//   - FM-08 Slow renewal answer: the deadline counts from the send, and a
//     late answer extends nothing (TestFM08SlowRenewResponse).
//   - FM-09 No jitter: renewals and retries are jittered, so holders over
//     different Stores do not stay in step (TestFM09Jitter).
//   - FM-10 Stale read steals a live claim: acquiring is one conditional
//     write, so a stale read can delay an attempt, never make one succeed
//     (TestFM10StaleReadCannotSteal).
//   - FM-11 Rate limits exhausted: throttling is transient and retried with
//     backoff; the leader keeps leading (TestFM11SustainedThrottling).
//   - FM-12 Owner id with a space: any UTF-8 holder id round-trips
//     (TestFM12AnyHolderIDRoundTrips).
//   - FM-13 Throttling causes a false demotion: a throttled renewal does not
//     demote (TestFM13ThrottledRenewal).
//   - FM-14 Duplicate owner ids: two processes with one identity are two
//     holders, and the duplicate is reported (TestFM14DuplicateIdentity).
//   - FM-15 Partition from the backend: the leader leads until its term's
//     end and not after; a follower takes over at the expiry
//     (TestFM15PartitionFromBackend).
//   - FM-16 Stop hangs on a slow Release: Stop and every Release are
//     bounded (TestFM16StopBoundedWhenReleaseHangs).
//   - FM-17 Crash without Stop: a follower takes over right after the
//     expiry, with no polling period on top (TestFM17CrashedHolderTakeover).
//   - FM-18 Backend resource deleted or permission revoked: fatal, reported,
//     retried a few times, then Run returns the error
//     (TestFM18FatalBackendError).
//   - FM-19 Crash leftovers in a file store: nothing a dead writer leaves
//     blocks or confuses the store (TestFM19FileStoreCrashLeftovers).
//   - FM-20 Claim of an earlier incarnation: an old holder with the same
//     identity neither renews nor releases the new claim
//     (TestFM20StaleClaimOfEarlierIncarnation).
//   - FM-21 Concurrent acquisition at scale: of a thousand candidates,
//     exactly one leads (TestFM21ThousandElectorsOneLeader).
//   - FM-22 Release while leader work runs: the claim is never released
//     while OnElected runs (TestFM22NoReleaseUnderRunningWork).
//   - FM-23 OnDemoted for a holder that never led: OnDemoted runs exactly
//     once after each OnElected, and never otherwise
//     (TestFM23NoDemotedWithoutElected).
//   - FM-24 Zombie standby after a loss: the elector campaigns again for as
//     long as it runs (TestFM24CampaignsAgainAfterLoss).
//   - FM-25 A campaign answered after its lease expired: it does not make a
//     leader (TestFM25LateAcquireDoesNotLead).
//   - FM-26 A write whose outcome is unknown: it is transient; a claim that
//     turns out to be its own is released and taken afresh
//     (TestFM26UnknownOutcome).
//   - FM-27 A wrapper that hides a capability: undeclared or unreachable
//     capabilities fail closed (TestFM27HiddenCapabilityFailsClosed).
//   - FM-28 Clock jumps: the deadline is on the monotonic clock; each store
//     declares who judges expiry (TestFM28ClockJumps).
//   - FM-29 Clock rate skew: drift within SafetyMargin over one TTL never
//     overlaps (TestFM29ClockRateSkew).
//   - FM-30 Stop-the-world pause past the lease: no elector can stop it; the
//     fencing token makes the stale write refusable
//     (TestFM30PauseFencedByToken).
//   - FM-31 Host suspend longer than the lease: filestore's judge and its
//     holders stop together, so the leader keeps its claim
//     (TestFM31HostSuspend).
//   - FM-32 Throttling causes a false demotion, on DynamoDB: a leader whose
//     renewals get ProvisionedThroughputExceededException keeps leading
//     while its deadline allows, and steps down by it when the throttling
//     outlasts it (backends/dynamodb: TestFM32ThrottledRenewalOnDynamoDB,
//     TestFaultThrottledPastDeadline; run against dynalite, behind a proxy
//     that answers DynamoDB's throttling errors).
//   - FM-33 Duplicate owner ids, on DynamoDB: two processes with one
//     identity over one table are two holders; the second neither renews
//     nor releases the first's claim, reports the duplicate, and leads
//     with a higher token only after the first stops (backends/dynamodb:
//     TestFM33DuplicateIdentityOnDynamoDB).
//   - FM-34 Planned handover to a named candidate: the leader stops
//     acting before the claim goes, the target leads next at a greater
//     token, no third candidate in between, never two leaders, with and
//     without a store transaction (TestFM34TransferMovesTheClaim).
//   - FM-35 Leader dies midway through a transfer: a lost answer leaves
//     the transfer done; a leader that reserved and then lost the store
//     leaves its claim to expire, after which only the target may take
//     it (TestFM35TransferLeaderDiesMidway).
//   - FM-36 Transfer target never comes: the claim is reserved for it
//     only for Config.TransferBound, then open to all, and the others wait
//     the reservation out instead of contending
//     (TestFM36TransferTargetNeverComes).
//   - FM-37 Store fails during a transfer: the term stays ended; the claim
//     is released plainly or left to expire, and the error is reported
//     (TestFM37TransferStoreFails).
//   - FM-38 Two transfers at once: one hands the claim over, the other
//     gets ErrNotLeader; a stale claim cannot reserve for anyone
//     (TestFM38TwoTransfersAtOnce).
//   - FM-39 Rolling update bounces the leadership: with preferred
//     candidates, replacing three candidates by preferred new processes
//     moves the claim once, to the first of them
//     (TestFM39RollingUpdateMovesLeadershipOnce).
//   - FM-40 Flapping preferences bounce the claim: a preferred candidate
//     must stay present for SettleTime, and equal priorities never move
//     the claim (TestFM40FlappingPreferenceCannotBounce).
//   - FM-41 An observer that never reports a leader gone: the observer
//     reports a release and an expiry as no leader, and the next leader at
//     its greater token (TestFM41ObserverSeesReleaseAndExpiry).
//   - FM-42 An observer cut off from the store: it reports unknown, not
//     the last leader, once a read fails, at the latest at the expiry the
//     store last reported (TestFM42ObserverCutOffFromTheStore).
//   - FM-43 An observer over a silent watch: a watch that stays open and
//     delivers nothing does not keep a leader reported past the expiry the
//     store reported (TestFM43ObserverOverASilentWatch).
package failuremodes
