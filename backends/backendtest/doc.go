// Package backendtest is the conformance suite every backends.Store runs:
// memstore, filestore, etcd, kube (Kubernetes), nats (NATS), postgres
// (PostgreSQL) and dynamodb (DynamoDB, against dynalite) all call [Run]
// from their tests, against a real server where they have one.
//
// Run checks the contract of package backends, each property in a subtest
// named after it: create-if-absent races, compare-and-set conflicts and lost
// updates, revision and token monotonicity (across delete, expiry and, where
// the store persists, restart), keep-alive, expiry as absence for every
// operation, listing, watch and transactions where declared, arbitrary keys
// and values, rejection of bad input without panics, the TTL bound
// (backends.MaxTTL) on every write that takes a TTL, truthful capability
// declarations, the Locker built over the store, and a linearizability check
// of a concurrent history.
//
// # Guarantees
//
//   - The suite never sleeps. With [Harness.Elapse] set, time passes only
//     when the suite calls it; without it, the suite waits for expiry by
//     polling under a deadline of the TTL plus five seconds.
//   - Each subtest works on a fresh store from [Harness.New] and writes only
//     keys it names, so a failure names the property that broke.
//   - Checks of optional capabilities (watch, txn) run only where the store
//     declares them, and the declaration itself is checked.
//
// # What it does not promise
//
//   - Run is not safe to call concurrently on one Harness whose Elapse
//     drives a shared clock: subtests advance that clock.
//   - It checks the contract, not performance; benchmarks live with each
//     backend.
//   - Expiry events on a watch are not required (the contract makes them
//     optional); Watch/ReportsExpiry checks them only where the store
//     declares Capabilities.ExpiryEvents.
package backendtest
