# tenure — build, test and benchmark targets.
#
#   make test     every test of every module, with the race detector (the
#                 test servers, the kube-apiserver, etcd v3.6 and v3.7,
#                 nats-server and toxiproxy, build beside the tests if they
#                 are not cached yet)
#   make lint     gofmt, go vet, and a go.mod/go.sum tidiness check of
#                 every module
#   make bench    the benchmarks, with allocations
#   make steady   three etcd candidates on one claim for 30 s, no term change
#   make demo     the served-indexer demo on the embedded filestore
#   make chaos    the randomized fault campaign: RUNS runs of DURATION on each
#                 of BACKENDS (comma-separated); defaults 20, 60s, every backend
#   make chaos-smoke  one short run per backend, and the broken workers caught
#   make kill-loop    tenure run with a process tree, SIGKILLed 50 times over a
#                 filestore with two competing instances (KILLS to change)
#   make bench-report rerun the benchmarks the docs quote and rewrite
#                 docs/performance.md from their output

GO        ?= go
# The modules of the repository (go.work ties them together): the root
# module (the contract, memstore, filestore, the runtime) and, at the SDK
# edge, one module per store with a client library, the metrics, the
# command, the indexer example and the tests and tools. A target runs over
# all of them unless PKGS narrows it.
MODULES   := . backends/etcd backends/kube backends/nats backends/postgres backends/dynamodb metrics cmd/tenure examples/indexer tests
PKGS      ?= ./... $(patsubst %,./%/...,$(filter-out .,$(MODULES)))
TESTFLAGS ?= -race -count=1 -timeout 40m
BENCHFLAGS ?= -run '^$$' -bench . -benchmem -count 1

# The real kube-apiserver the kube backend's tests run against is built
# from the Go module proxy and cached outside the repository, keyed by its
# version and the hash of its tools module (see backends/kube/kubetest).
APISERVER_BUILD := backends/kube/kubetest/apiserver/build.sh
# The etcd v3.7 server the etcd backend's tests also run against, as a
# process, is built and cached the same way (see backends/etcd/etcdtest).
ETCD_BUILD := backends/etcd/etcdtest/etcdserver/build.sh
# The toxiproxy server that the fault tests and the campaign put in front of
# real servers runs as a process too, built and cached the same way. The
# helpers build it on first use when TENURE_TOXIPROXY_SERVER is unset
# (internal/tools/toolbuild), so the packages that need no tool server test while
# it builds; `make toxiproxy-server` builds it ahead.
TOXIPROXY_BUILD := internal/testrig/toxiproc/server/build.sh
# The nats-server the NATS backend's tests and the campaign run as
# processes: the same (TENURE_NATS_SERVER, or built on first use).
NATS_BUILD := internal/testrig/natsproc/server/build.sh
# The etcd v3.6 server (TENURE_ETCD36_SERVER), which etcdtest.Start, its
# clusters and the campaign run: the same.
ETCD36_BUILD := backends/etcd/etcdtest/etcdserver36/build.sh

.PHONY: test lint tidy download bench steady demo kube-apiserver etcd-server toxiproxy-server nats-server etcd36-server bench-report

# TOOLS_BESIDE starts the builds of the tool servers in the background,
# beside whatever comes next; a test that needs one before its build is
# done waits for it (build.sh holds a lock on the cache), and one whose
# build failed reports the error when it builds it again. The
# kube-apiserver, the longest build by far, builds beside the others.
TOOLS_BESIDE = { $(APISERVER_BUILD); } >/dev/null 2>&1 & \
	{ $(ETCD36_BUILD); $(NATS_BUILD); $(TOXIPROXY_BUILD); $(ETCD_BUILD); } >/dev/null 2>&1 &

# The packages whose tests need the kube-apiserver or etcd v3.7 go last,
# so that on a machine with cold caches the others test while those two
# servers build.
LATE_PKGS := ./backends/etcd/... ./backends/kube/... ./examples/indexer/... ./tests/...
TEST_PKGS  = $(filter-out $(LATE_PKGS),$(PKGS)) $(filter $(LATE_PKGS),$(PKGS))

test:
	@$(TOOLS_BESIDE) \
	$(GO) test $(TESTFLAGS) $(TEST_PKGS)

kube-apiserver:
	$(APISERVER_BUILD)

etcd-server:
	$(ETCD_BUILD)

toxiproxy-server:
	$(TOXIPROXY_BUILD)

nats-server:
	$(NATS_BUILD)

etcd36-server:
	$(ETCD36_BUILD)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	@for m in $(MODULES); do \
		( cd $$m && cp go.mod go.mod.lint-bak && cp go.sum go.sum.lint-bak && \
		GOWORK=off $(GO) mod tidy && \
		if ! diff -q go.mod go.mod.lint-bak >/dev/null || ! diff -q go.sum go.sum.lint-bak >/dev/null; then \
			diff -u go.mod.lint-bak go.mod; mv go.mod.lint-bak go.mod; mv go.sum.lint-bak go.sum; \
			echo "$$m: go.mod/go.sum are not tidy: run go mod tidy in $$m"; exit 1; \
		fi; rm -f go.mod.lint-bak go.sum.lint-bak ) || exit 1; \
	done

# tidy runs go mod tidy in every module; download fetches what every
# module needs.
tidy:
	@for m in $(MODULES); do ( cd $$m && GOWORK=off $(GO) mod tidy ) || exit 1; done

download:
	@for m in $(MODULES); do ( cd $$m && GOWORK=off $(GO) mod download ) || exit 1; done

bench:
	$(GO) test $(BENCHFLAGS) $(PKGS)

steady:
	$(GO) test -race -count=1 -run '^TestSteadyLeader$$' ./backends/etcd -args -etcd.steady=30s

demo:
	$(GO) run ./examples/indexer demo

# docs/performance.md is generated (tests/benchreport): every figure the
# docs quote, with the machine, Go version and date, from the benchmarks'
# own output. A full run takes about twenty minutes on 2 cores, the first
# build of the kube-apiserver aside.
# BENCHREPORT_FLAGS=-short for a quick indicative run, -count 5 for
# repetitions, -only REGEXP for some sections. The test kube-apiserver is
# built (or taken from its cache) only when a selected section needs it.
BENCHREPORT_FLAGS ?=

bench-report:
	$(GO) run ./tests/benchreport -o docs/performance.md $(BENCHREPORT_FLAGS)

# The fault campaign (package chaos). Each run's line, a table per backend and
# "chaos: runs=R violations=V worst-recovery=D" last; a failing run's history
# is kept (under $$TMPDIR/tenure-chaos unless CHAOS_OUT names a directory) with
# the seed that replays its schedule. TRANSFERS=1s has each leader hand its
# claim to another worker about that long into its term (Elector.Transfer).
RUNS      ?= 20
DURATION  ?= 60s
BACKENDS  ?= filestore,etcd,etcd3,kube,etcd-shared,etcd3-shared,kube-session,nats,nats3,postgres,postgres-ha
CHAOS_OUT ?=
TRANSFERS ?=
.PHONY: chaos chaos-smoke

chaos:
	@$(TOOLS_BESIDE) \
	$(GO) run ./tests/chaos -runs $(RUNS) -duration $(DURATION) -backends $(BACKENDS) $(if $(CHAOS_OUT),-out $(CHAOS_OUT)) $(if $(TRANSFERS),-transfers $(TRANSFERS))

chaos-smoke:
	@$(TOOLS_BESIDE) \
	$(GO) test -race -count=1 -run 'TestSmoke|TestBrokenWorkersAreCaught' ./tests/chaos

KILLS ?= 50

.PHONY: kill-loop
kill-loop:
	$(GO) test -race -count=1 -run '^TestRunKillLoop$$' -v ./cmd/tenure -args -kill-loop=$(KILLS)
