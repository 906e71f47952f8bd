// Package faults wraps a backends.Store so that tests can inject the faults
// real backends show: latency, errors of every class, partitions, stale reads,
// responses lost after a write committed, and calls held at a barrier.
//
// A [Store] made by [Wrap] passes every call to the inner store unless a
// fault installed on it says otherwise. Faults are installed and removed at
// run time, from any goroutine, while calls are in flight:
//
//	f := faults.Wrap(inner, clk)
//	throttle := f.Fail(faults.OpKeepAlive, 3, backends.ErrThrottled) // the next 3 renewals
//	cut := f.Partition(faults.PartitionBlock)                     // every call hangs until its ctx ends
//	cut.Remove()                                                  // heal
//
// Time is the injected clock's: an added delay blocks the call on a timer of
// that clock, so a test built on a fake clock advances it (after waiting for
// the timer to be armed) and stays deterministic. Nothing in the package
// sleeps or reads the real time.
//
// A test knows a call is in flight before it moves the clock: AwaitHolding
// returns once a fault holds that many calls (delayed, partitioned, gated),
// and a Gate hands each held call to the test. Calls counts what reached
// the wrapper, per operation.
//
// Wrap one store several times to give each participant its own faults: a
// partition installed on one wrapper cuts off only the participant that
// writes through it.
//
// # Guarantees
//
//   - With no fault installed the wrapper is transparent: every method returns
//     exactly what the inner store returned.
//   - Capabilities declares what the inner store declares, minus CapWatch and
//     CapTxn where the inner store does not implement Watcher or Txner, so
//     backends.Require answers for the wrapper as for the inner store. [Hide]
//     builds the opposite, a store that declares a capability whose method it
//     lacks, to prove that Require fails closed.
//   - Faults act in the order they were installed. A fault limited to n calls
//     acts on the next n matching calls that reach it, then is spent.
//   - An injected error wraps the sentinel it was given (or ErrUnavailable for
//     partitions and lost responses), so backends.Classify sorts it as a real
//     backend error of that kind would be sorted.
//   - A call whose write may have been applied (a lost response, a wait after
//     the inner call cut short by its context) returns an error wrapping
//     backends.ErrUnavailable: its outcome is unknown, as it is for a real
//     timeout.
//   - Every call that blocks in the wrapper returns when its context is done.
//     Removing a fault wakes the calls it holds.
//   - The wrapper holds no lock across a call to the inner store or a wait.
//
// # What it does not do
//
//   - Faults act when a call is made. A watch stream established before a
//     fault was installed keeps delivering the inner store's events; Watch
//     calls themselves are subject only to faults that act before the call
//     (errors, partitions, delays, gates at [BeforeCall]).
//   - Close is passed through untouched.
//   - Clock faults (jumps, rate skew) are not store faults: give each
//     participant its own fake clock and move them apart in the test.
//   - Stale reads answer Get and List from a snapshot; conditional writes
//     always reach the inner store. The snapshot's remaining times keep
//     running down on the wrapper's clock and are not clamped: an entry whose
//     time ran out is still returned, with Remaining zero or negative, as a
//     lagging replica reports the expiry it last knew.
package faults
