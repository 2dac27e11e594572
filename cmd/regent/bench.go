package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/regentmq/regent/bench"
	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/log"
	"github.com/spf13/cobra"
)

func init() {
	leadArgs["bench"] = func(args []string) int {
		switch {
		case len(args) == 0 || strings.HasPrefix(args[0], "-"):
			return 0
		case args[0] == "compare":
			return 2
		}
		return 1
	}
	register(func(a *app) *cobra.Command {
		return a.passThrough("bench SCENARIO|compare SCENARIO|report [flags]",
			"load-test a broker (Regent over TCP or HTTP, NATS JetStream, Redis Streams) and write BENCHMARKS.md", cmdBench)
	})
}

const benchUsage = `Usage:
  regent bench SCENARIO [flags]          run a scenario (lists in --batch, --partitions or --target make a sweep)
  regent bench compare SCENARIO [flags]  run Regent and the peers (NATS, Redis) alternately, --rounds times, and compare
  regent bench report [flags]            regenerate BENCHMARKS.md's harness section from result files

Scenarios: push, consume, pipeline, fanout, backlog, partitions, retry-storm, http.

backlog pushes --messages messages (default 1,000,000) with no consumer open,
then drains them (pop + ack, as consume does) with no producer; it reports
each phase on its own: msgs/s, the server's CPU per message, and its peak RSS
read every 100 ms during that phase. The drain is the headline. --fill-time
caps the push phase and --duration the drain (default 30m for backlog: the run
ends when the backlog is drained).

By default the harness starts a fresh Regent for every run as a child process
("regent serve" on free ports of 127.0.0.1, temp data dir), so the server's CPU
time and peak RSS are read from /proc; --server inprocess runs it in this
process instead, --addr uses a running one. --start-peer builds nats-server
` + bench.NATSServerVersion + ` with "go install" and starts it (JetStream, file storage,
temp dir) for every NATS run, and starts redis-server (Debian's redis-server
package, from PATH or --redis-bin) for every Redis run: temp dir, no RDB
snapshots, the append-only file on with --redis-fsync's appendfsync. Both
listen on a free port of 127.0.0.1 and are stopped after their run.

compare runs the first --target (regent or regent-http) against the peers that
follow it (nats, redis; nats when none is named). The redis target runs push,
consume, pipeline, fanout and backlog (no retry-storm: a Redis Streams
delivery has no negative ack). regent-replicated is a peer too: three
brokers on this machine (regent serve --cluster --replicas 3, children of
the harness), every shard on all three; it runs push and consume, and its
CPU and RSS are the three processes' sums.

Examples:
  regent bench push --duration 10s
  regent bench push --batch 1,10,100,1000 --target regent,nats --start-peer --out docs/bench/results/batch.json
  regent bench compare push --rounds 3 --start-peer --peer-sync default,always
  regent bench backlog --messages 2000000 --target regent,nats --start-peer
  regent bench compare consume --target regent,redis --start-peer --redis-fsync always,everysec
  regent bench compare push --target regent,regent-replicated --rounds 3
  regent bench report

Flags:
`

func cmdBench(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, benchUsage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, benchUsage)
		newBenchFlags(stdout, false).fs.PrintDefaults()
		return exitOK
	case "report":
		return cmdBenchReport(args[1:], stdout, stderr)
	case "compare":
		if len(args) < 2 || strings.HasPrefix(args[1], "-") {
			fmt.Fprintln(stderr, "regent bench compare: name a scenario:", strings.Join(bench.Scenarios, ", "))
			return exitUsage
		}
		return cmdBenchRun(args[1], args[2:], true, append([]string{"regent", "bench"}, args...), stdout, stderr)
	}
	if strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, "regent bench: name a scenario first:", strings.Join(bench.Scenarios, ", "))
		return exitUsage
	}
	return cmdBenchRun(args[0], args[1:], false, append([]string{"regent", "bench"}, args...), stdout, stderr)
}

// benchFlags are the flags of a run or a comparison.
type benchFlags struct {
	fs                                  *flag.FlagSet
	target, batch, partitions, peerSync *string
	redisFsync, redisURL, redisBin      *string
	size, producers, consumers, groups  *int
	inFlight, idle, rounds              *int
	replicatedProcs                     *int
	duration, fillTime                  *time.Duration
	messages                            *int64
	rate, failFraction                  *float64
	queue, addr, httpAddr, server, sync *string
	peerURL, peerBin, out, cpuprofile   *string
	startPeer, jsonOut, showLogs        *bool
	auth, dropCaches                    *bool
	token, tlsCA                        *string
}

func newBenchFlags(out io.Writer, compare bool) *benchFlags {
	fs := flag.NewFlagSet("regent bench", flag.ContinueOnError)
	fs.SetOutput(out)
	f := &benchFlags{fs: fs}
	f.target = fs.String("target", "", "regent (binary protocol), regent-http (Queen HTTP API), regent-replicated (3 brokers, every shard on all 3; push and consume), nats or redis; a list makes a sweep (default regent; http: regent-http); compare: the Regent side, then the peers (default: regent,nats)")
	f.size = fs.Int("size", 128, "message payload size, bytes")
	f.batch = fs.String("batch", "100", "messages per push and per pop; a list (1,10,100) makes a sweep")
	f.producers = fs.Int("producers", 0, "producers, one connection each (default 4; consume: 0)")
	f.consumers = fs.Int("consumers", 0, "consumers per group, one connection each (default 4; fanout 2)")
	f.groups = fs.Int("groups", 0, "consumer groups reading the queue (default 1; fanout 10)")
	f.inFlight = fs.Int("in-flight", 8, "batches each producer keeps unanswered, and acks each consumer keeps unanswered")
	f.partitions = fs.String("partitions", "0", "partitions receiving traffic (default 16; partitions: 1000); a list makes a sweep")
	f.idle = fs.Int("idle-partitions", 0, "extra partitions created before the run (one message each, read) and then left idle")
	f.duration = fs.Duration("duration", 0, "length of the measured phase (the cap when --messages is set); default 10s (backlog: 30m, the cap of its drain)")
	f.messages = fs.Int64("messages", 0, "messages to push (consume, fanout: to pre-fill; backlog: the backlog, default 1000000); 0 = as many as --duration allows")
	f.fillTime = fs.Duration("fill-time", 0, "cap of the pre-fill of consume and fanout, and of backlog's push phase (default: --duration)")
	f.rate = fs.Float64("rate", 0, "target rate, msgs/s over all producers (consume: consumers): open loop, latency from the intended send time; 0 = as fast as possible")
	f.failFraction = fs.Float64("fail-fraction", 0, "fraction of deliveries acked failed (retry-storm default 0.2)")
	f.queue = fs.String("queue", "bench", "queue name (NATS: subject prefix; the stream is its upper-case name)")
	f.addr = fs.String("addr", "", "a running Regent's binary protocol address (default: start one per run)")
	f.httpAddr = fs.String("http-addr", "", "a running Regent's HTTP address")
	f.server = fs.String("server", "child", "how to start Regent: child (a `regent serve` process: server CPU and RSS measured) or inprocess")
	f.sync = fs.String("sync", "always", "sync policy of the Regent the harness starts")
	f.peerURL = fs.String("peer-url", "", "a running NATS server (nats://host:port)")
	f.startPeer = fs.Bool("start-peer", false, "start the peers for each of their runs, on 127.0.0.1 in a temp dir: nats-server "+bench.NATSServerVersion+" (built with go install), redis-server (from PATH)")
	f.peerBin = fs.String("peer-bin", "", "a nats-server binary to use with --start-peer instead of building one")
	def := "default"
	if compare {
		def = "default,always"
	}
	f.peerSync = fs.String("peer-sync", def, "NATS JetStream sync: default (fsync every 2 min), always (sync_interval: always), or both: default,always")
	rdef := "everysec"
	if compare {
		rdef = "everysec,always"
	}
	f.redisFsync = fs.String("redis-fsync", rdef, "Redis AOF (appendonly yes) appendfsync of the redis-server --start-peer starts: everysec (fsync once a second), always (before the answers of each event-loop cycle), or both: everysec,always")
	f.redisURL = fs.String("redis-url", "", "a running Redis (host:port or redis://host:port/db); the harness deletes the streams QUEUE:p0... it uses")
	f.redisBin = fs.String("redis-bin", "", "the redis-server binary --start-peer runs (default: redis-server on PATH)")
	f.rounds = fs.Int("rounds", 3, "compare: rounds (each runs every side once, alternately)")
	f.replicatedProcs = fs.Int("replicated-procs", 0, "regent-replicated: the GOMAXPROCS of each of its brokers (0: Go's default, every core of the machine). Three brokers on one machine each given a share of its cores, as a container's CPU limit would give it (Go reads the limit)")
	f.jsonOut = fs.Bool("json", false, "print the result file (JSON) on stdout, and no progress line")
	f.out = fs.String("out", "", "also write the result file (JSON) there")
	f.cpuprofile = fs.String("cpuprofile", "", "write a CPU profile of this process during each run's measured phase (a pre-fill excluded): the first run's to `FILE`, the n-th's to FILE.n; with --server inprocess it holds client and server (go tool pprof -tagignore bench=client shows the server alone)")
	f.showLogs = fs.Bool("log", false, "show the servers' logs on stderr")
	f.dropCaches = fs.Bool("drop-caches", false, "backlog: empty the kernel's page cache between the push and the drain (sync; echo 3 > /proc/sys/vm/drop_caches: root only), so the drain reads the backlog from the disk")
	f.auth = fs.Bool("auth", false, "start Regent with authentication on (HS256, a fresh secret) and send a token: checked once per connection over TCP, on every request over HTTP")
	f.token = fs.String("token", "", "the token (a JWT) to send to a running Regent (--addr, --http-addr) with auth on")
	f.tlsCA = fs.String("tls-ca", "", "with --addr: speak TLS to it (a TLS terminator in front of Regent), trusting the CA certificates of this PEM `FILE`")
	return f
}

func cmdBenchRun(scenario string, args []string, compare bool, cmdline []string, stdout, stderr io.Writer) int {
	f := newBenchFlags(stderr, compare)
	f.fs.Usage = func() {}
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, benchUsage)
			f.fs.PrintDefaults()
			return exitOK
		}
		fmt.Fprintln(stderr, "Usage: regent bench SCENARIO [flags] (regent bench --help for more)")
		return exitUsage
	}
	if f.fs.NArg() > 0 {
		fmt.Fprintf(stderr, "regent bench: unexpected argument %q\n", f.fs.Arg(0))
		return exitUsage
	}
	fail := func(code int, err error) int { fmt.Fprintln(stderr, "regent bench:", err); return code }
	batches, err := bench.ParseInts(*f.batch)
	if err != nil {
		return fail(exitUsage, fmt.Errorf("--batch: %w", err))
	}
	parts, err := bench.ParseInts(*f.partitions)
	if err != nil {
		return fail(exitUsage, fmt.Errorf("--partitions: %w", err))
	}
	base := bench.Config{Scenario: scenario, MsgSize: *f.size, Producers: *f.producers, Consumers: *f.consumers,
		Groups: *f.groups, InFlight: *f.inFlight, IdlePartitions: *f.idle, Duration: *f.duration, Messages: *f.messages,
		FillTime: *f.fillTime, Rate: *f.rate, FailFraction: *f.failFraction, Queue: *f.queue, DropCaches: *f.dropCaches}
	var targets []string
	if *f.target != "" {
		targets = strings.Split(*f.target, ",")
	} else {
		c := base
		c.Defaults()
		targets = []string{c.Target}
	}
	var peerSyncs []bool
	for _, s := range strings.Split(*f.peerSync, ",") {
		switch strings.TrimSpace(s) {
		case "default":
			peerSyncs = append(peerSyncs, false)
		case "always":
			peerSyncs = append(peerSyncs, true)
		default:
			return fail(exitUsage, fmt.Errorf("--peer-sync %q: want default, always, or default,always", s))
		}
	}
	var redisFsyncs []string
	for _, s := range strings.Split(*f.redisFsync, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(bench.RedisFsyncs, s) {
			return fail(exitUsage, fmt.Errorf("--redis-fsync %q: want everysec, always, or everysec,always", s))
		}
		redisFsyncs = append(redisFsyncs, s)
	}
	for i := range targets {
		targets[i] = strings.TrimSpace(targets[i])
	}
	isPeer := func(t string) bool {
		return t == bench.TargetNATS || t == bench.TargetRedis || t == bench.TargetRegentReplicated
	}
	// sidesOf: a target's sides, one per sync setting of a peer the
	// harness starts (a running peer has its own).
	sidesOf := func(t string) []bench.Side {
		var out []bench.Side
		switch t {
		case bench.TargetNATS:
			for _, always := range peerSyncs {
				out = append(out, bench.Side{Target: t, PeerSyncAlways: always})
			}
		case bench.TargetRedis:
			if !*f.startPeer {
				return []bench.Side{{Target: t}}
			}
			for _, fsync := range redisFsyncs {
				out = append(out, bench.Side{Target: t, RedisFsync: fsync})
			}
		default:
			out = []bench.Side{{Target: t}}
		}
		return out
	}
	var sides []bench.Side
	used := targets
	if compare {
		if len(targets) == 0 || isPeer(targets[0]) {
			return fail(exitUsage, errors.New("compare: --target names the Regent side first (regent or regent-http), then the peers (nats, redis; default nats)"))
		}
		peers := targets[1:]
		if len(peers) == 0 {
			peers = []string{bench.TargetNATS}
		}
		used = append([]string{targets[0]}, peers...)
		sides = sidesOf(targets[0])
		for _, p := range peers {
			switch {
			case !isPeer(p):
				return fail(exitUsage, fmt.Errorf("compare: %q is not a peer (nats, redis, regent-replicated)", p))
			case p == bench.TargetRegentReplicated && *f.server != "child":
				return fail(exitUsage, errors.New("compare: regent-replicated runs its brokers as children (--server child)"))
			case p == bench.TargetNATS && !*f.startPeer && *f.peerURL == "":
				return fail(exitUsage, errors.New("compare needs the nats peer: --start-peer, or --peer-url"))
			case p == bench.TargetRedis && !*f.startPeer && *f.redisURL == "":
				return fail(exitUsage, errors.New("compare needs the redis peer: --start-peer, or --redis-url"))
			}
			sides = append(sides, sidesOf(p)...)
		}
	} else {
		for _, t := range targets {
			sides = append(sides, sidesOf(t)...)
		}
	}
	if slices.Contains(used, bench.TargetNATS) && *f.peerURL != "" && !*f.startPeer && len(peerSyncs) > 1 {
		return fail(exitUsage, errors.New("with --peer-url the peer's sync is its own: give one --peer-sync"))
	}
	if slices.Contains(used, bench.TargetRedis) && *f.redisURL != "" && !*f.startPeer && len(redisFsyncs) > 1 {
		return fail(exitUsage, errors.New("with --redis-url the server's appendfsync is its own: give one --redis-fsync"))
	}
	if compare && (len(batches) > 1 || len(parts) > 1) {
		return fail(exitUsage, errors.New("compare takes one --batch and one --partitions"))
	}
	for _, v := range [][]int{batches, parts} {
		for _, n := range v {
			if n < 0 {
				return fail(exitUsage, errors.New("--batch and --partitions must not be negative"))
			}
		}
	}

	if *f.replicatedProcs < 0 {
		return fail(exitUsage, errors.New("--replicated-procs must not be negative"))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var logw io.Writer
	if *f.showLogs {
		logw = stderr
	}
	opts := bench.Options{RegentTCP: *f.addr, RegentHTTP: *f.httpAddr, Sync: *f.sync, PeerURL: *f.peerURL,
		StartPeer: *f.startPeer, PeerBin: *f.peerBin, RedisURL: *f.redisURL, RedisBin: *f.redisBin, Log: logw,
		Progress: bench.NewProgress(stderr, *f.jsonOut), ReplicatedProcs: *f.replicatedProcs}
	if *f.addr == "" && *f.httpAddr == "" {
		switch *f.server {
		case "child":
			exe, err := os.Executable()
			if err != nil {
				return fail(exitFailure, err)
			}
			opts.RegentBin = exe
		case "inprocess":
			opts.InProcess = startInProcess
		default:
			return fail(exitUsage, fmt.Errorf("--server %q: want child or inprocess", *f.server))
		}
	}
	opts.CPUProfile = *f.cpuprofile
	opts.Token = *f.token
	if *f.tlsCA != "" {
		if *f.addr == "" {
			return fail(exitUsage, errors.New("--tls-ca goes with --addr (a TLS terminator in front of a running Regent)"))
		}
		cfg, err := tlsConfigCA(*f.tlsCA)
		if err != nil {
			return fail(exitUsage, err)
		}
		opts.TLS = cfg
	}
	if *f.auth {
		if *f.addr != "" || *f.httpAddr != "" {
			return fail(exitUsage, errors.New("--auth starts its own Regent: with --addr give --token"))
		}
		if err := benchAuth(&opts); err != nil {
			return fail(exitFailure, err)
		}
	}
	sess := bench.NewSession(opts)
	defer sess.Close()
	file := &bench.File{Kind: "run", Command: bench.CommandLine(cmdline), Env: bench.CurrentEnv()}
	text := stdout
	if *f.jsonOut {
		text = io.Discard
	}
	show := func(r bench.Result) { bench.WriteResult(text, &r); fmt.Fprintln(text) }
	var runErr error
	if compare {
		file.Kind = "compare"
		cfg := base
		cfg.Batch, cfg.Partitions = batches[0], parts[0]
		file.Results, runErr = sess.Compare(ctx, cfg, sides, max(*f.rounds, 1), show)
		if len(file.Results) > 0 {
			bench.WriteSummary(text, bench.Summarize(file.Results))
		}
	} else {
		sweep := ""
		switch {
		case len(batches) > 1:
			sweep = "batch"
		case len(parts) > 1:
			sweep = "partitions"
		case len(sides) > 1:
			sweep = "target"
		}
		if sweep != "" {
			file.Kind = "sweep"
		}
	loop:
		for _, b := range batches {
			for _, p := range parts {
				for _, side := range sides {
					cfg := base
					cfg.Batch, cfg.Partitions = b, p
					var r bench.Result
					r, runErr = sess.RunOne(ctx, cfg, side)
					if runErr != nil {
						runErr = fmt.Errorf("%s, batch %d, partitions %d: %w", side, b, p, runErr)
						break loop
					}
					r.Sweep = sweep
					file.Results = append(file.Results, r)
					show(r)
				}
			}
		}
	}
	if len(file.Results) > 0 {
		if *f.out != "" {
			if err := bench.WriteFile(*f.out, file); err != nil {
				return fail(exitFailure, err)
			}
		}
		if *f.jsonOut {
			b, _ := json.MarshalIndent(file, "", "  ")
			fmt.Fprintf(stdout, "%s\n", b)
		}
	}
	if runErr != nil {
		return fail(exitFailure, runErr)
	}
	return exitOK
}

// startInProcess starts a broker inside this process with the same wiring
// as serve, on free ports of 127.0.0.1, over a temp data dir.
func startInProcess(ctx context.Context, sync string) (*bench.Server, error) {
	return startInProcessWith(ctx, sync, security{})
}

// startInProcessWith is startInProcess with the given security settings.
func startInProcessWith(ctx context.Context, sync string, sec security) (*bench.Server, error) {
	pol, interval, err := log.ParseSync(sync)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "regent-bench-*")
	if err != nil {
		return nil, err
	}
	b, err := broker.New(broker.Options{Journal: log.Config{Dir: dir, Sync: pol, SyncInterval: interval},
		TCPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Auth: sec.auth, TLS: sec.tls, Version: version,
		Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		err = b.Main()
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &bench.Server{
		Endpoints:  bench.Endpoints{RegentTCP: b.TCPAddr().String(), RegentHTTP: b.HTTPAddr().String()},
		Durability: bench.RegentDurability(sync),
		StopFunc: func() error {
			err := b.Exit()
			os.RemoveAll(dir)
			return err
		},
	}, nil
}

func cmdBenchReport(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("regent bench report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	results := fs.String("results", "docs/bench/results", "folder of result files (*.json) and notes.md")
	out := fs.String("out", "BENCHMARKS.md", "the Markdown file whose harness section is rewritten (created if missing)")
	charts := fs.String("charts", "docs/bench", "folder for the SVG charts (linked relative to --out)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	n, err := bench.Report(bench.ReportOptions{Results: *results, Markdown: *out, Charts: *charts})
	if err != nil {
		fmt.Fprintln(stderr, "regent bench report:", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "%s: harness section rewritten from %d result files; charts in %s\n", *out, n, *charts)
	return exitOK
}
