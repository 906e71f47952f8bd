// Package clocktest is a deterministic fake [clock.Clock] for tests: time
// moves only when the test says so, and the test can wait until the code
// under test has armed its timers before moving it.
//
// Time in tenure comes from an injected github.com/benbjohnson/clock Clock.
// That module's [clock.Mock] has no way to tell whether a goroutine has
// armed its timer yet, so tests built on it end up sleeping. A [Clock] wraps
// a Mock and adds the missing barrier:
//
//	c := clocktest.New(time.Time{})   // 2026-01-01T00:00:00Z
//	go elect(ctx, c)                  // code under test, given c as its clock
//	c.AdvanceWhenBlocked(ctx, 1, ttl) // wait for its timer, then fire it
//
// A test step is then: wait until the goroutines under test have armed the
// timers they block on ([Clock.BlockUntil]), move time ([Clock.Add]), and
// check the effect after the next BlockUntil, when the goroutines have
// handled the firing and armed their next timers.
//
// # Guarantees
//
//   - Now changes only in Add and Set (and Skewed views move with it). Add
//     and Set may be called from any goroutine; they are serialised.
//   - Add(d) fires every timer and ticker due by the new time, in deadline
//     order, with Now reading each deadline as it fires; the time sent on a
//     timer's channel is its deadline. Ties fire in an unspecified order.
//     When Add returns: Now reads the new time; each due channel timer's
//     value is in its channel (a ticker's tick is dropped if its one-slot
//     channel is full, as with time.Ticker); each due AfterFunc has been
//     started in its own goroutine; every context from WithDeadline or
//     WithTimeout whose deadline has passed is done with
//     context.DeadlineExceeded, as is every context derived from one of them
//     with the context package.
//   - A timer made while an Add fires (by a goroutine that a fired timer
//     woke) is armed from the time reached so far, and fires in the same
//     Add if it falls due by its end. No timer fires twice.
//   - [Clock.Waiters] is exact at the instant it reads: the number of timers
//     and tickers registered with the mock, read under the mock's own mutex.
//   - [Clock.BlockUntil] returns nil only after it has seen Waiters() >= n,
//     and so it is a barrier: whatever a goroutine did before arming a timer
//     happens before BlockUntil returns (the race detector agrees). It
//     never sleeps. It waits for a signal, sent whenever a timer is armed
//     through the Clock or one of its views and at every Add and Set; see
//     below for the one case in which it polls.
//   - Contexts from WithDeadline and WithTimeout are safe to poll with Err
//     from any goroutine while the clock moves. (The mock's own read their
//     error without a lock: a data race under -race.)
//   - Zero and negative durations: Sleep returns at once; Timer and After
//     fire at once; AfterFunc runs f at once in its own goroutine, without
//     waiting for an Add; Ticker panics and Tick returns nil, as in package
//     time.
//
// # What Waiters counts
//
// Waiters counts timers, not goroutines. Armed timers and tickers count
// whoever waits on them: Sleep, After, AfterFunc, Timer, Ticker, Tick and
// the timer behind each live WithDeadline or WithTimeout context, from the
// moment they are armed until they fire or are stopped. So:
//
//   - a ticker counts from creation until Stop, whether or not anyone is
//     receiving; Tick's ticker can never be stopped and counts for ever;
//   - an After whose select was won by another case still counts until it
//     fires: in code under test, prefer Timer and Stop in a select that can
//     give up;
//   - two goroutines waiting on one timer count once, and a goroutine blocked
//     on anything but a timer (a channel, a lock, a network call) counts
//     zero;
//   - a Timer or Ticker re-armed with its own Reset counts again;
//   - a zero-duration timer fires as it is armed, so it counts for an
//     instant at most.
//
// Count what the code under test will have armed when it is idle, not how
// many goroutines it runs.
//
// # When BlockUntil polls
//
// Once a Clock (or one of its views) has handed out a Timer, an AfterFunc
// timer or a Ticker, its BlockUntil no longer waits for signals: it
// re-reads the count, yielding between reads, until the count is reached or
// ctx is done. A Clock used only through Sleep, After, Tick, WithDeadline
// and WithTimeout never polls. Polling costs CPU while a test waits, never
// correctness. Always give BlockUntil a context with a deadline, so that a
// wait for a timer that is never armed fails instead of hanging.
//
// # What it does not promise
//
//   - Speed. The mock sleeps 1 ms of real time at the end of every move of
//     its time and after every timer or tick it fires, inside the
//     dependency, and Add moves it once per deadline it fires, so advancing
//     far past a short ticker costs real seconds (BenchmarkAdd*; figures in
//     docs/performance.md, "Fake clock"). Advance in steps the code
//     under test cares about, and prefer long ticker periods in tests. The
//     sleeps are no synchronisation either; use BlockUntil.
//   - When an AfterFunc's f runs. Add starts it in a new goroutine and does
//     not wait for it.
//   - Prompt propagation from a parent. A WithDeadline context learns of its
//     parent's cancellation from a goroutine the context package starts, so
//     it may still be live just after the parent's cancel returns.
//   - time.Timer's Go 1.23 semantics. The channel of a Timer has one slot,
//     and Stop and Reset do not drain it. Resetting a fired Timer whose value
//     was never received deadlocks the next Add that fires it (the mock
//     sends while holding its lock): receive from C before Reset.
//   - Stop racing an Add. The mock releases its lock between choosing the
//     next timer and firing it, so a Stop in that window can return true for
//     a timer that fires anyway. Code under test that balances Stop's result
//     against its callback must tolerate both happening.
//   - Monotonic timers. Timers keep their deadlines as instants: Set to an
//     earlier time moves Now back and delays every timer by as much, unlike
//     a wall-clock jump under package time.
//   - The dependency's layout. Waiters reads the mock's unexported timer list
//     through reflect and unsafe, under the mock's mutex; New panics with a
//     clear message if clock.Mock is not v1.3.5's, and TestMockLayout fails
//     first.
//
// # Skewed views
//
// [Clock.Skewed] returns a clock.Clock that reads the same fake time
// running at a different rate, for clock-drift tests. Its timers, tickers
// and deadlines are armed on the Clock, count in Waiters and wake
// BlockUntil, and fire at the first base nanosecond at which the view has
// moved on by their duration. The time sent on their channels is the base
// clock's, and their Reset takes a base duration.
package clocktest
