// Package timelinetest reads a timeline the fault campaign drew back with
// encoding/xml, for the tests of the timeline and of the campaign.
package timelinetest
