// Package storebench measures elections over any backends.Store in one way,
// so that the figures of different stores compare: what holding claims
// with competitors costs (requests and CPU per second, requests per
// renewal, terms), how long a graceful handover takes, how long a
// transfer to a named follower takes, how long a crashed leader's claim
// takes to move, and how soon an observer reports a new leader.
//
// Every candidate is a process as far as the store can tell: a Store on a
// connection of its own, running one elector per claim. The caller opens
// those processes and counts their requests (each store has its own way);
// this package drives the electors and does the arithmetic.
//
// It is benchmark support: figures from a shared machine are indicative,
// and nothing here is a timed assertion. It promises nothing to programs.
package storebench
