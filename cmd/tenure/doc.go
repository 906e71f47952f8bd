// Command tenure runs a command under leader election, and shows who holds
// a claim. It is the elector and slot packages for programs that were not
// written against them, in the manner of consul lock and etcdctl elect.
//
//	tenure run --store URL --key KEY [--slots N] [--ttl D] [--id ID] [--advertise V] [--kill-grace D] [--once] [--try D] [--forward-hup] [--priority N] [--metrics ADDR] [--timeout D] -- COMMAND [ARG...]
//	tenure holders --store URL (--key KEY | --prefix P) [--json] [--wait] [--timeout D]
//	tenure watch --store URL --key KEY [--json] [--interval D] [--timeout D]
//	tenure resize --store URL (--key KEY --slots N | --group G --shards N) [--timeout D]
//	tenure release --store URL --key KEY --holder ID --force [--slot N] [--timeout D]
//	tenure transfer --store URL --key KEY [--to ID] [--within D] [--timeout D]
//
// By default tenure run is a service: it runs COMMAND again each time it
// exits. With --once it runs COMMAND one time and exits with its status,
// as consul lock and etcdctl lock do.
//
// Stores are named by URL, as package storeurl reads them: file:///DIR
// (processes of one host), etcd://HOST:PORT[,HOST:PORT]/PREFIX,
// kube://NAMESPACE[?kubeconfig=PATH&context=NAME], nats://HOST:PORT[,HOST:PORT]/BUCKET,
// postgres://USER[:PASSWORD]@HOST:PORT/DATABASE or
// dynamodb://TABLE?region=REGION (credentials from the AWS SDK's default
// chain); --store's help lists
// every form with its parameters. Only run makes a store, and only when
// its URL says create=true; the other subcommands take the same URL and
// create nothing. etcd:// takes ?lease=shared (the
// process's claims share one etcd lease, renewed in batches) and kube://
// takes session=DURATION, such as ?session=1s (the process's claims live
// in one session Lease, renewed once per DURATION); without them each claim
// has a lease of its own. Every subcommand has --help with
// examples; logs go to stderr (--log-level). tenure --version prints the
// module version it was built at ("(devel)" when built from a checkout),
// the VCS revision when the build recorded one, and the Go version.
//
// Until the module is published, build it from a checkout: go build
// ./cmd/tenure (or go install ./cmd/tenure) at the repository's root.
//
// Every subcommand logs (at info) the store it opens, its URL without a
// password, and gives up opening it after --timeout (default 10s): it then
// prints one line, "tenure SUBCOMMAND: open store URL: ERROR", and exits
// with status 69. The bound holds whatever the backend does with the
// context; a backend that returns its own error within a moment of the
// timeout has that error in the line (the endpoint, the dial error).
// Usage errors are one line in the same form, ending "(see tenure
// SUBCOMMAND --help)", with status 2.
//
// # tenure run
//
// Run campaigns for KEY with an elector.Elector, over the claim KEY or, with
// --slots N above 1, over a slot group of N (package slots), and runs
// COMMAND only while it holds the claim. COMMAND gets TENURE_TOKEN (the
// term's fencing token), TENURE_SLOT, TENURE_KEY and TENURE_ID (the
// identity of --id) in its environment, and tenure's standard streams. A
// COMMAND that is not found, or cannot be executed, is refused before
// tenure opens the store (status 127 or 126), so that a standby with a
// typo does not look healthy until it leads. With --try D, tenure gives up
// with status 124 when a campaign has not acquired the claim within D.
// --ttl is at least 1s and at most a year (backends.MaxTTL, the longest
// any store takes); --kill-grace, when given, is
// positive. A password may stay out of --store, where the process list
// shows it: --password-file PATH (its first line), or
// $TENURE_STORE_PASSWORD, gives it to a URL that names a user.
//
// What it guarantees:
//
//   - COMMAND runs inside the elector's OnElected, so the claim is released
//     only after COMMAND has exited and been reaped. The elector's
//     DrainTimeout is set to outlast the command's longest end (kill grace
//     plus the cancel lead, plus a second to reap), so a command that is slow
//     to exit delays the release rather than leaving the claim to expire.
//   - When the term ends (a lost or expired claim, or SIGTERM, SIGINT or
//     SIGHUP to tenure), COMMAND gets SIGTERM, then SIGKILL --kill-grace later, and at
//     the local deadline at the latest. While renewals fail and the deadline
//     stays put, SIGTERM comes --kill-grace before the local deadline, so
//     that the grace ends by it. The local deadline is the leader's context's
//     Deadline plus the elector's CancelLead: the instant before which the
//     store cannot grant the claim to another holder. --kill-grace is at
//     most a third of --ttl (default a fifth), so a renewal answered in time
//     never sets it off.
//   - COMMAND's whole tree ends with the term. COMMAND runs under a
//     supervisor: tenure's own binary, re-executed as a hidden subcommand,
//     which is a child subreaper (Linux's PR_SET_CHILD_SUBREAPER). Every
//     process COMMAND starts stays below it, even one that double-forks and
//     calls setsid to become a daemon, since the kernel hands an orphan to
//     its nearest subreaper ancestor rather than to init. The supervisor
//     signals every process below it (found in /proc), not a process group,
//     and exits only when it has no child left, so once tenure has reaped
//     it no process of the tree is left.
//   - If tenure dies, even by SIGKILL, the supervisor kills the whole tree
//     with SIGKILL at once: it reads EOF on a pipe from tenure, which the
//     kernel closes when tenure dies, whatever killed it (no parent-death
//     signal is involved, so no thread of tenure's matters). The claim
//     then expires after its TTL and another tenure takes over. Over 50
//     SIGKILLs of the leader of two tenures (make kill-loop: a shell's
//     background job and a double-forked daemon, TTL 2s, a 2-core machine
//     busy with other builds), the last process of the tree was gone 153
//     ms after the SIGKILL on average and 0.76 to 1.02 s at worst, and the
//     two trees were never seen alive at once. It is a race with the
//     claim's expiry only on a host starved for longer than the TTL.
//   - When COMMAND exits, whatever it left behind (background jobs,
//     daemons) is killed before the claim is released.
//   - When renewals fail fatally, the term ends as any other: the tree
//     gets SIGTERM, then SIGKILL --kill-grace later. Should the tree
//     outlast the elector's drain timeout even so (a supervisor that
//     cannot run), the claim is left to expire, the elector does not
//     campaign again while COMMAND runs, and tenure does not exit before
//     the tree is gone, even once the elector has given up on the store.
//   - A SIGTERM, SIGINT or SIGHUP while tenure waits for the claim, or
//     opens the store, ends tenure at once; it releases nothing, since it
//     holds nothing.
//   - SIGUSR1 and SIGUSR2 to tenure are passed on to COMMAND (its process
//     alone), and so is SIGHUP with --forward-hup, for a COMMAND that
//     reloads on it; one that arrives between commands is logged and
//     dropped. A COMMAND stopped by job control (SIGTTIN after reading the
//     terminal, SIGTSTP, SIGSTOP) is logged, and so is its continuing; the
//     SIGTERM at the end of a term is followed by SIGCONT, so that a
//     stopped tree ends too.
//   - After COMMAND exits, or its term is lost, tenure releases the claim
//     and, a sixth of --ttl later, campaigns again with a fresh elector;
//     with --once it exits. The pause bounds the store traffic of a
//     COMMAND that exits at once, and lets tenures that were waiting take
//     the claim first. A COMMAND that keeps exiting within --ttl of its
//     start is rerun with a backoff, as the elector backs off after
//     errors: the pause doubles after each such run, up to --ttl (plus up
//     to 15% of jitter), and falls back to a sixth of --ttl once a run
//     lasts longer or a term is lost.
//
// What no wrapper can promise: a COMMAND goes on running while tenure
// itself is paused (SIGSTOP, a stopped VM, a host suspended) past the
// local deadline, and meanwhile another tenure may have taken the claim and
// started its own COMMAND; tenure kills its COMMAND when it runs again, too
// late. The supervisor is Linux's (a subreaper needs Linux 3.4). A
// process of the tree escapes it only by having a process outside the
// tree start work for it (a service manager, at, a container runtime), or
// when the supervisor itself is SIGKILLed alone: COMMAND then still dies
// (it has a parent-death signal from the supervisor), but not its
// children. A process stuck in uninterruptible I/O (a hung NFS mount)
// dies only when the I/O returns, whatever signal it gets. Make every write COMMAND sends to a shared resource carry
// TENURE_TOKEN, and have the resource reject tokens lower than the highest
// it has seen: that is what keeps a late writer out (see package elector).
//
// With --metrics ADDR (HOST:PORT; anything else is a usage error), tenure
// serves http://ADDR/metrics: the elector's series of package metrics
// (tenure_leader, elections, renewals, time to the local deadline,
// demotions by reason, panics) for KEY, every one present from the first
// scrape, and the Go and process collectors. Each term's elector is traced
// under the same key, so the counters add up across terms. The same
// listener serves package health's handlers for the current term's
// elector: /healthz, liveness, which never fails a healthy follower (it
// fails when the elector is stuck leading past its deadline or demoting,
// or has ended on errors); /readyz, readiness, the same once the store is
// open and the first term's elector runs, so that a healthy follower (a
// standby) is ready; and /leaderz, 200 only while this tenure leads or
// holds a slot. Before the first term /healthz answers 200, and /readyz
// and /leaderz 503.
//
// COMMAND runs in a process group of its own, as a shell's job: it is
// not in a terminal's foreground, a Ctrl-C reaches it through tenure (as
// SIGTERM), and a COMMAND that reads the terminal is stopped.
//
// Exit status:
//
//	COMMAND's   COMMAND exited (128+N if it died of signal N), with --once,
//	            or after a signal to tenure while it ran
//	1           an error of tenure's own: --metrics cannot listen on its
//	            address
//	2           bad usage: an unknown flag, a malformed store URL, a missing
//	            --key or COMMAND, or a key that is a slot group run without
//	            --slots ("--key "K" is a slot group of N: add --slots N");
//	            one line on stderr
//	69          the store cannot be opened within --timeout, or fails with
//	            fatal errors until the elector gives up (a store that
//	            becomes unreachable once open is retried, not fatal: tenure
//	            waits for it)
//	75          --once: the term ended (lost, expired) before COMMAND exited
//	124         --try: the claim was not acquired in time
//	126, 127    COMMAND cannot be executed, or is not found (refused before
//	            campaigning)
//	128+N       tenure got signal N while no COMMAND ran
//
// A COMMAND may itself exit with 1, 2, 69, 75 or 124; a script that must tell them
// apart reads tenure's log.
//
// # tenure holders
//
// Holders prints the live holders of KEY, one line each: identity, slot,
// token, the time left as the store judged it (a hint, never a safety
// bound) and the time of the claim's last write or keep-alive as the store
// recorded it ("-" where it records none; for reading only), then the
// value the holder advertises (tenure run --advertise; "-" if none, quoted
// if it has spaces). On a store
// that judges expiry by local observation (Kubernetes, NATS, PostgreSQL) a
// fresh process cannot know the time left: a holder that stopped renewing
// reads as live until the process has watched its claim unchanged for a
// TTL. There holders prints "unverified" in its place, never a guess, and
// --wait watches for one TTL and then answers for certain: a claim whose
// holder stopped renewing is gone from the answer, and the others show the
// time left as this process judged it. The same command lists a slot group's holders, one per live slot:
// the store's Locker recognises a group by its key. With --prefix P in
// place of --key, it lists every live claim whose key begins with P, single
// claims and slots, with the key first. --json prints a JSON array of
// objects with key, holder, nonce, slot, token, verified, and
// remaining_seconds only where verified (recorded where the store records
// a time, advertised where the holder advertises a value). Exit
// status 0 (also with no holder), 2 for bad usage, 69 if the store cannot
// be read.
//
// # tenure resize
//
// Resize sets the size of the slot group KEY to N (package slots' Resize).
// A group's size is kept in the store: the first tenure run --slots N
// records N, and later ones use the stored size whatever their --slots; a
// tenure run whose --slots differs logs a warning that names the resize
// command to run. Once resize has returned, no slot at or above N is taken
// or renewed: lowering N ends the terms of those slots' holders at their
// next renewal. It refuses a key that is not a slot group. Exit status 0,
// 2 for bad usage (a KEY that is not a slot group included), 69 if the
// store cannot be opened, read or written.
//
// With --group G --shards N it changes the shard count of the shard group
// G (package shards' Resize) while its members run, and returns once every
// shard of the old count has ended: no key has two owners meanwhile. A
// change cut short by --timeout goes on, and the same command finishes
// it. Exit status 0, 2 for bad usage (a G no member started, or a change
// towards another count in flight), 69 if the store cannot be opened,
// read or written, or the change is not done within --timeout.
//
// # tenure release
//
// Release ends by hand the claim of KEY that the identity ID holds, for a
// claim left with a long TTL by a holder that is gone. The store cannot
// tell such a holder from one that runs, so release refuses without
// --force; with --force it deletes the claim as it read it (compared by
// revision: a claim renewed or taken over since is left alone). A holder
// that still runs learns of it only at its next renewal, and until then
// two holders may act at once: fencing keeps out of a resource that checks
// TENURE_TOKEN the old holder's writes (the next holder's token is
// higher), and nothing else. Exit status 0, 1 if ID holds no claim of KEY
// or the claim changed, 2 for bad usage, 69 if the store cannot be opened,
// read or written.
//
// # tenure watch
//
// Watch prints the state it starts from, the holders of KEY or "free" if
// nobody holds it, then one line each time a holder appears ("held") or
// goes ("gone": released or expired), until SIGINT, SIGTERM or SIGHUP
// (exit status 0). Changes seen in one read are printed in the order they can have
// happened: what went before what came, so a takeover is "gone" the old
// holder, then "held" the new one. The store's watch tells it of
// changes; it also reads the holders every --interval (default 1s), which
// is what notices
// an expiry on a store whose watch does not report one, and what carries
// it over a broken watch until a new one is set up. It shows what each
// read of the store shows: a holding that came and went between two reads
// is not shown. A holder that advertises a value (tenure run --advertise)
// has it in its lines. --json prints one object per line (time, event,
// key, holder, nonce, slot, token, advertised where there is one, and
// error for unknown). A read that fails,
// or gets no answer within --timeout, prints one "unknown" line with the
// store's error; the first read that succeeds after it prints the whole
// state again. A store that fails fatally (removed, a permission
// withdrawn) ends watch with status 69. SIGHUP ends it as SIGINT does. On
// a store that judges expiry by local observation, the holders of the
// state watch starts from are marked unverified ("unverified": true in
// --json); one whose holder stopped renewing shows as gone within a TTL.
// watch never prints a time left.
package main
