package metrics

import "github.com/tenure-go/tenure/elector"

// Join returns a Trace whose every hook calls the hooks of ts that are set,
// in the order of ts. A hook none of ts sets stays nil (and costs nothing).
// The elector's rules hold for the joined hooks as for each: quick, never
// blocking, safe for concurrent use.
func Join(ts ...elector.Trace) elector.Trace {
	var j elector.Trace
	for _, t := range ts {
		j.StateChanged = join2(j.StateChanged, t.StateChanged)
		j.ElectionWon = join2(j.ElectionWon, t.ElectionWon)
		j.ElectionLost = join2(j.ElectionLost, t.ElectionLost)
		j.Renewed = join3(j.Renewed, t.Renewed)
		j.RenewFailed = join4(j.RenewFailed, t.RenewFailed)
		j.Demoted = join2(j.Demoted, t.Demoted)
		j.DuplicateIdentity = join1(j.DuplicateIdentity, t.DuplicateIdentity)
		j.Panicked = join1(j.Panicked, t.Panicked)
	}
	return j
}

func join1[A any](f, g func(A)) func(A) {
	switch {
	case f == nil:
		return g
	case g == nil:
		return f
	}
	return func(a A) { f(a); g(a) }
}

func join2[A, B any](f, g func(A, B)) func(A, B) {
	switch {
	case f == nil:
		return g
	case g == nil:
		return f
	}
	return func(a A, b B) { f(a, b); g(a, b) }
}

func join3[A, B, C any](f, g func(A, B, C)) func(A, B, C) {
	switch {
	case f == nil:
		return g
	case g == nil:
		return f
	}
	return func(a A, b B, c C) { f(a, b, c); g(a, b, c) }
}

func join4[A, B, C, D any](f, g func(A, B, C, D)) func(A, B, C, D) {
	switch {
	case f == nil:
		return g
	case g == nil:
		return f
	}
	return func(a A, b B, c C, d D) { f(a, b, c, d); g(a, b, c, d) }
}
