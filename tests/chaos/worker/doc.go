// Package worker is the fault campaign's worker process: it campaigns
// through the public API over a store it opens by URL, acts while it
// leads, writes to the fenced resource with its token, and journals what
// it did and every store operation on the claim's keys.
package worker
