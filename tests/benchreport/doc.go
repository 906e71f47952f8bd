// Command benchreport runs the benchmarks the docs quote and writes
// docs/performance.md from their output: the machine (CPU model, cores,
// memory, load), the Go version, the date and commit, and every figure with
// its benchmark's name and unit. `make bench-report` runs it from the
// module root.
//
//	go run ./tests/benchreport [-o docs/performance.md] [-count N] [-short] [-only REGEXP]
//
// Each section of the set (set.go) is one go test command; its raw output
// is kept under -raw. -from DIR renders from raw output kept by an earlier
// run instead of running anything. The real kube-apiserver is built (or
// found in its cache) only when a section that needs it is selected, and
// TENURE_KUBE_APISERVER, when set, names it instead.
//
// A section whose command fails leaves the output file untouched unless
// -keep-going is given, in which case the page says which section failed.
package main
