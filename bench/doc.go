// Package bench is Regent's load-test harness: scenarios that drive a broker
// through its public doors (the Go client over TCP, Queen's HTTP API) and,
// for comparison, NATS JetStream through the nats.go client and Redis
// Streams through go-redis, with the same message size, batch and
// concurrency.
//
// # Model
//
// A run is one scenario against one target:
//
//	scenario   producers  consumers      what is measured
//	push       P          -              push msgs/s; latency of each batch (send → durable answer)
//	consume    -          C × 1 group    pop + ack msgs/s of a pre-filled queue; latency pop → ack answered
//	pipeline   P          C × 1 group    delivered msgs/s; end-to-end latency (intended push → delivery)
//	fanout     -          C × G groups   deliveries/s of a pre-filled queue that every group reads whole
//	backlog    P, then -  -, then C      push N with no consumer, then drain them (pop + ack) with no
//	                                     producer: each phase's msgs/s, server CPU/msg and peak RSS
//	partitions P          C × 1 group    pipeline over N partitions (items of a batch spread over them),
//	                                     with idle partitions that hold one old message each
//	retry-storm P         C × 1 group    pipeline where a fraction of deliveries is acked failed and retried
//	http       P          C × 1 group    pipeline over Queen's HTTP API v1 (keep-alive connections)
//
// Each producer owns one connection and keeps InFlight batches unanswered on
// it (InFlight goroutines pushing on one client); consumers pop batches and
// ack them in the background, with at most InFlight acks unanswered. The
// NATS target gets the same allowance: InFlight × Batch unacknowledged
// async publishes per producer.
//
// # Backlog
//
// The backlog scenario asks what a broker does with a queue that nobody
// reads for a while: its push phase pushes --messages messages (default
// 1,000,000) with no consumer open, its drain phase then opens the
// consumers (the consume scenario's model: pop a batch, ack it in the
// background, InFlight acks unanswered) and ends when every group has
// completed every message. Each phase is measured on its own: msgs/s, the
// server's CPU per message (CPU time read at the phase's ends), and its
// peak RSS, the largest VmRSS read every 100 ms during that phase (VmHWM
// cannot tell the drain from the push that grew the server). The drain is
// the headline figure; report shows both phases side by side. The issue's
// reference run, 20,000,000 messages of 128 B against NATS JetStream (its
// default sync: with sync always its push phase alone would run for about
// an hour, at the push rate BENCHMARKS.md measured for it), warm and with
// the page cache dropped (files 11 and 14; each took about 24 minutes, most
// of it NATS's):
//
//	regent bench compare backlog --messages 20000000 --size 128 --rounds 3 \
//	    --target regent,nats --start-peer --peer-sync default \
//	    --out docs/bench/results/11-compare-backlog.json
//
// Adding redis to --target runs Redis Streams too (both AOF fsync policies
// unless --redis-fsync names one); no result file has it yet.
//
// --fill-time caps the push phase and --duration the drain (30 min by
// default for backlog). --drop-caches (root only) syncs and empties the
// kernel's page cache between the two phases, so that the drain reads the
// backlog from the disk: the cold case.
//
// # The Redis peer
//
// Target redis drives Redis Streams with go-redis v9, the client the Redis
// project keeps for Go: one stream per partition (QUEUE:p0, QUEUE:p1...,
// like the NATS target's subjects), no MAXLEN. Push is one XADD per
// message, pipelined per batch; each consumer group is a Redis consumer
// group created on every stream with XGROUP CREATE ... 0 MKSTREAM; a
// consumer reads with XREADGROUP over all the streams (COUNT = batch, which
// Redis applies per stream, BLOCK 200 ms), hands out a batch at a time, and
// acks with XACK, one per stream, pipelined. It runs push, consume,
// pipeline, fanout and backlog. Retry-storm is not offered: a Redis Streams
// delivery has no negative ack, a failed one stays pending until XAUTOCLAIM
// claims it after an idle time, which is not the immediate retry Regent and
// NATS are measured on.
//
// --start-peer runs Debian's redis-server (from PATH, or --redis-bin) for
// every Redis run: a config file in a temp dir, 127.0.0.1 and a free port,
// no RDB snapshots (save ""), the append-only file on (appendonly yes) with
// --redis-fsync's policy: everysec (Redis's default: the AOF is written
// before the answer and fsynced once a second) or always (written and
// fsynced before the answers of each event-loop cycle). AOF rewrites keep
// Redis's defaults; they run in a forked child, whose CPU time the probe
// counts once it has ended (cutime), and whose memory is not in the
// server's RSS. The server is stopped and its dir removed after the run.
// --redis-url uses a running Redis instead (the harness deletes the streams
// it uses). compare alternates Regent with the peers named after it in
// --target; the push and consume comparisons against NATS and both of
// Redis's fsync policies in one run:
//
//	regent bench compare push --rounds 3 --duration 5s --target regent,nats,redis --start-peer \
//	    --peer-sync default --redis-fsync always,everysec --out docs/bench/results/12-compare-push-redis.json
//	regent bench compare consume --rounds 3 --duration 5s --target regent,nats,redis --start-peer \
//	    --peer-sync default --redis-fsync always,everysec --out docs/bench/results/13-compare-consume-redis.json
//
// # Open loop
//
// With a target rate (--rate) each worker follows a schedule: its k-th
// operation is due at start + k·interval, whatever happened before. Latency
// is measured from that intended time, so a stall of the broker shows up in
// every operation that should have been sent during it (no coordinated
// omission). Without a rate the loop is closed and latency is measured from
// the actual send.
//
// # Histograms
//
// Latencies go into a log-linear histogram (HDR style: 64 linear
// sub-buckets per power of two, so every recorded value is within 1.6% of
// its bucket's bounds) kept per worker without locks and merged at the end.
//
// # Servers
//
// The harness can start what it measures: Regent as a child `regent serve`
// on free ports with a temp data dir (so that its CPU time and peak RSS are
// read from /proc), or in process; the NATS peer from a pinned version
// that `go install` builds into a temp dir, on 127.0.0.1, with a temp store
// dir, stopped after the run; the Redis peer from the redis-server on PATH,
// likewise.
//
// # Reports
//
// Runs write JSON result files; Report turns a folder of them into the
// harness section of BENCHMARKS.md (between the markers
// <!-- harness:begin --> and <!-- harness:end -->) and SVG charts drawn with
// the standard library.
package bench
