// Package metrics exports what electors do as Prometheus metrics, through
// the elector's instrumentation hooks (elector.Trace).
//
// One Metrics serves every Elector of a process; each gets the hooks for
// its key:
//
//	m := metrics.New(prometheus.DefaultRegisterer)
//	cfg.Trace = m.Trace(cfg.Key)
//
// To keep hooks of your own as well, join them: cfg.Trace =
// metrics.Join(m.Trace(cfg.Key), mine).
//
// # Series
//
// Every series is labelled by key, never by token, holder or nonce, so
// their number does not grow with terms or restarts; tenure_leader_info
// adds the value the leader advertises, which is fixed for an Elector's
// life, so it too gives one series per key and Elector.
//
//	tenure_leader{key}                               gauge: electors of this process leading key (0 or 1 per Elector)
//	tenure_state_transitions_total{key,from,to}     counter: lifecycle transitions
//	tenure_elections_won_total{key}                  counter: attempts that took the claim
//	tenure_elections_lost_total{key,class}           counter: attempts that did not (lost, transient, fatal)
//	tenure_renew_duration_seconds{key}               histogram: renewal round trips, answered or failed
//	tenure_renew_failures_total{key,class}           counter: failed renewals by class
//	tenure_deadline_remaining_seconds{key}           gauge: time from the scrape to the local deadline, while leading
//	tenure_demotions_total{key,reason}               counter: ended terms by reason (stopped, lost, expired, fatal, panic)
//	tenure_duplicate_identities_total{key}           counter: other holders seen with this Elector's identity
//	tenure_panics_total{key,where}                   counter: panics the elector recovered
//	tenure_leader_info{key,advertised}               gauge: electors of this process leading key, by the value they advertise
//
// Every series but tenure_deadline_remaining_seconds and
// tenure_leader_info is present as soon as
// Trace is called for a key: the counters of every known label value (each
// error class, demotion reason, lifecycle transition, and place the elector
// recovers panics in) start at zero, so rate() and absent-series alerts
// work from the first scrape. tenure_deadline_remaining_seconds is computed at each
// scrape from the deadline the last renewal set, so it falls between
// renewals and goes negative if a leader's own view is stuck past its
// deadline; it is absent while the key is not led, and so is
// tenure_leader_info, which carries the value the leader advertises
// (elector.Config.Advertise, empty if none) as a label. The value is safe
// as one: at most backends.MaxAdvertisedBytes of UTF-8 without control
// characters, fixed for the Elector's life. Joined on key and instance,
// it tells a dashboard where the leader serves.
//
// # Guarantees
//
//   - The hooks never block: they update in-memory values under short
//     locks and do no I/O. They are safe on any goroutine the elector
//     calls them from (see the table in package elector).
//   - Only this package imports github.com/prometheus/client_golang: a
//     program that does not import it does not depend on it.
//
// # What it does not do
//
//   - Two Electors traced under the same key share its series: the
//     counters add up and tenure_leader counts both. Give each Elector its
//     own key (as the claims do), or its own Metrics and registry.
//   - Series of a key are kept after its Elector stops; a process that
//     creates electors for ever-new keys grows its series.
//   - A panicking hook stops Join from calling the hooks after it in that
//     event (the elector recovers and logs the panic).
package metrics
