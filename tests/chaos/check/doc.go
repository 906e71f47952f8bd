// Package check is the fault campaign's checker: it judges a run from its
// journal alone (one holder per slot at a time, tokens that only grow, the
// fenced resource's verdicts, recovery after the last fault), and checks
// the store operations the workers journaled against a linearizability
// model of a store.
package check
