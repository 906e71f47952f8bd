// Package health serves an Elector's health over HTTP, for the liveness
// and readiness probes of an orchestrator (Kubernetes, Nomad, a load
// balancer).
//
//	h := health.New(e, health.Config{Key: cfg.Key})
//	http.Handle("/healthz", h)                                            // liveness
//	http.Handle("/leader", health.New(e, health.Config{Key: cfg.Key, RequireLeader: true})) // readiness, active/passive only
//
// It is a package of its own, built only on the Elector's query methods,
// so that package elector stays free of net/http and JSON.
//
// The handler answers 200 when healthy and 503 when not, with a JSON body
// (Report) saying why: the state, the key, this holder, the leader it last
// saw, the token and the time left to the local deadline while it leads.
// Holders are given as their configured identity and their nonce, in two
// fields each (holder, holder_nonce; leader, leader_nonce).
//
// # Which probe
//
// Use the default handler for liveness. It fails only when the Elector's
// own view is stuck, which a restart can cure:
//
//   - the state is still leader more than Config.Tolerance after the term's
//     local deadline (the loop that should have demoted it is not running:
//     the process is wedged or starved);
//   - the state has been demoting for more than Tolerance, as seen by
//     successive probes (the leader's work did not return when told to
//     stop, so the Elector can neither release the claim nor campaign);
//   - the Elector has ended on its own after repeated fatal errors (Err is
//     not nil).
//
// Liveness must not fail because this process is a follower. Followers
// are the standbys that make failover possible: an orchestrator that
// restarts every process that does not lead keeps killing the standbys
// (and, as the leader's claim passes to one of them, the new leader's
// old peers, in a loop), so that no standby is ever warm, and during a
// backend outage it restarts the whole fleet at once. Being a follower is
// the normal state of all but one process.
//
// Set Config.RequireLeader only for a readiness probe, and only when
// traffic must go to the leader alone (an active/passive service behind
// one address): it also answers 503 while this process does not lead.
// Never use it for liveness.
//
// # What it does not detect
//
//   - A follower whose loop has stalled: a follower legitimately sends
//     nothing for long stretches (it waits for a watch or for the claim's
//     expiry), and the Elector's query methods do not show its progress.
//   - A stuck demotion between probes: demoting is timed from the first
//     probe that saw it, so it is reported up to one probe period late.
//   - Anything about the backend: a reachable, healthy backend says
//     nothing about whether this process may lead, so a probe must not
//     fail for a backend outage (the Elector already demotes in time).
package health
