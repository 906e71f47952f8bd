// Package journaltest builds fault campaign journals by hand, for the
// tests of the checker and the timeline.
package journaltest
