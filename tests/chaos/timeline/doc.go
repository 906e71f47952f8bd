// Package timeline draws a fault campaign's run as an SVG picture, from
// its journal alone: a lane per worker with its terms, acts and writes, the
// faults that hit it, the servers' lanes, and what the checker found.
package timeline
