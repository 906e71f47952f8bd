// Package crashtest lets a test crash a process without killing it: a
// [Store] made by [Wrap] passes every call to the store it wraps until
// [Store.Crash] is called, and from then on answers nothing. An elector, a
// shard member or an allocator running over it stops renewing and never
// releases, as a killed process does, while the test goes on in one process
// with other participants on the same inner store, so failover code can be
// tested without starting processes.
//
// A crashed participant keeps running: its calls fail, its local deadlines
// pass, and its leadership ends by its own deadline (the elector's OnDemoted
// reports ReasonExpired and the leader's context is done by then). The
// others take its claims once the inner store lets them expire, a TTL after
// its last renewal, as they would after a real crash. Stop it when the test
// ends; its release fails, and Stop still returns within its bounds.
//
//	inner := memstore.New(memstore.WithClock(clk))
//	a := crashtest.Wrap(inner) // the store of the participant to crash
//	... start an elector over a, and others over inner ...
//	a.Crash() // a stops renewing; its claim expires after its TTL
//
// # Guarantees
//
//   - Until Crash, the wrapper is transparent: every call returns what the
//     inner store returned, and Capabilities declares what the inner store
//     declares (minus watch and transactions where the inner store lacks the
//     method), so every package takes the same paths over it.
//   - From the moment Crash returns, no call made through the wrapper reaches
//     the inner store, and every call fails with an error wrapping
//     backends.ErrUnavailable (class transient: nothing answered).
//   - A call in flight when Crash is called may still be applied by the
//     inner store, as a request sent just before a process died may be; its
//     caller gets an error, never the answer.
//   - Watches opened through the wrapper end (their channels are closed) at
//     Crash, and deliver nothing after it.
//   - Crash is idempotent and safe to call from any goroutine, while calls
//     are in flight.
//
// # What it does not do
//
//   - It crashes only what goes through it. A store that keeps a session of
//     its own alive for all the claims written through it (etcd's shared
//     lease, Kubernetes' session mode) keeps running under the wrapper: such
//     a store expires an entry nobody kept alive for its TTL, so a crashed
//     participant's claims still end a TTL after its last renewal. Wrap one
//     inner store per participant there, as each process would open its own.
//   - Close closes only the wrapper, never the inner store: the test that
//     opened the inner store closes it (often it is shared by every
//     participant).
//   - There is no restart: a process that restarts is a new participant.
//     Start one over the inner store, or over a new wrapper of it.
package crashtest
