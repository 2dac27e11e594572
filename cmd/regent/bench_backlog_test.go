package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/bench"
	"github.com/regentmq/regent/bench/benchtest"
)

// TestBacklogDrainsEveryMessageOnce: a backlog run against a real `regent
// serve` child: every message pushed is delivered exactly once in the
// drain, no consumer exists while the push phase runs, and both phases
// carry their own figures, the server's CPU and sampled RSS among them.
func TestBacklogDrainsEveryMessageOnce(t *testing.T) {
	ctx, srv, tg := startBacklogServer(t)
	const n = 30_000
	cfg := bench.Config{Scenario: bench.Backlog, Messages: n, Producers: 2, Consumers: 3, Batch: 50, Duration: time.Minute}
	res, err := bench.Run(ctx, cfg, tg, srv.Probe(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.Check("g0"); err != nil {
		t.Fatal(err)
	}
	if tg.Pushed() != n || res.Pushed != n || res.Filled != n || res.Delivered != n || res.Consumed != n || res.Msgs != n || res.Errors != 0 {
		t.Fatalf("serials %d; pushed %d, filled %d, delivered %d, completed %d, msgs %d, errors %d (%s); want %d each and no error",
			tg.Pushed(), res.Pushed, res.Filled, res.Delivered, res.Consumed, res.Msgs, res.Errors, res.FirstErr, n)
	}
	if tg.ConsumerWhileProducing() {
		t.Fatal("a consumer was opened while producers were still open")
	}
	if len(res.Phases) != 2 || res.Phases[0].Name != "push" || res.Phases[1].Name != "drain" {
		t.Fatalf("phases %+v", res.Phases)
	}
	for _, ph := range res.Phases {
		u := ph.Server
		if ph.Msgs != n || ph.Elapsed <= 0 || ph.MsgsPerSec <= 0 || ph.Latency.Count == 0 || ph.Latency.P99 <= 0 ||
			u == nil || u.CPUSeconds <= 0 || u.CPUPerMsgUs <= 0 || u.PeakRSS <= 0 || u.RSSSamples < 2 {
			t.Errorf("%s phase: %+v, server %+v", ph.Name, ph, u)
		}
	}
	drain := res.PhaseNamed("drain")
	if res.MsgsPerSec != drain.MsgsPerSec || res.Server != drain.Server || res.PushLatency == nil ||
		res.PushLatency.Count != res.Phases[0].Latency.Count {
		t.Errorf("the headline is not the drain: %+v", res)
	}
}

// TestBacklogDrainsFromAColdPageCache: --drop-caches empties the page cache
// between the push and the drain, and the drain still delivers every
// message once. Where it cannot (not root, or a read-only /proc/sys) the run
// is refused before it pushes anything. Emptying the page cache slows
// everything else on the machine, so as root the test runs only when
// REGENT_TEST_DROP_CACHES=1 asks for it.
func TestBacklogDrainsFromAColdPageCache(t *testing.T) {
	can := dropCachesAllowed()
	if can && os.Getenv("REGENT_TEST_DROP_CACHES") != "1" {
		t.Skip("this process may empty the page cache: set REGENT_TEST_DROP_CACHES=1 to let the test do it")
	}
	ctx, srv, tg := startBacklogServer(t)
	const n = 5_000
	cfg := bench.Config{Scenario: bench.Backlog, Messages: n, Producers: 2, Consumers: 2, Batch: 50, Duration: time.Minute, DropCaches: true}
	before := pageCacheBytes(t)
	res, err := bench.Run(ctx, cfg, tg, srv.Probe(), nil, nil)
	if !can {
		if err == nil || !strings.Contains(err.Error(), "root") || tg.Pushed() != 0 {
			t.Fatalf("page cache not ours to drop: %v after %d pushes, want an error saying it needs root before any push", err, tg.Pushed())
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.Check("g0"); err != nil {
		t.Fatal(err)
	}
	if res.Consumed != n || !res.Config.DropCaches {
		t.Fatalf("completed %d of %d; config %+v", res.Consumed, n, res.Config)
	}
	// What this test built and ran alone is far more than the run reads
	// back after the drop: the cache shrank, whatever else runs.
	if after := pageCacheBytes(t); before > 256<<20 && after > before/2 {
		t.Fatalf("page cache %d MiB before the run, %d MiB after: it was not dropped", before>>20, after>>20)
	}
}

// dropCachesAllowed: this process may write /proc/sys/vm/drop_caches.
func dropCachesAllowed() bool {
	f, err := os.OpenFile("/proc/sys/vm/drop_caches", os.O_WRONLY, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// pageCacheBytes is the kernel's page cache (Cached in /proc/meminfo).
func pageCacheBytes(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Cached:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no Cached line in /proc/meminfo")
	return 0
}

// startBacklogServer starts a `regent serve` child for a backlog run (stopped
// when the test ends) and returns a context for the run, the server, and a
// target that tags every message it pushes.
func startBacklogServer(t *testing.T) (context.Context, *bench.Server, *benchtest.Tagged) {
	t.Helper()
	_, bin := buildRegent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	srv, err := bench.StartRegent(ctx, bin, "always", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	inner, err := bench.NewTarget(bench.TargetRegent, srv.Endpoints)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, srv, benchtest.Tag(inner)
}

// TestBenchReplicatedTargetConsumesEveryMessageOnce: the regent-replicated
// target (three `regent serve --replicas 3` children) pushes and consumes
// through the shards' leaders: every message filled is delivered once, and
// the server figures are the three processes'. The brokers run with one P
// each (--replicated-procs 1), which the result's description says.
func TestBenchReplicatedTargetConsumesEveryMessageOnce(t *testing.T) {
	_, bin := buildRegent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := bench.StartRegentCluster(ctx, bin, "always", 3, []string{"GOMAXPROCS=1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	if !strings.Contains(srv.Durability, "GOMAXPROCS=1 each") {
		t.Fatalf("the cluster's description %q does not say its brokers' GOMAXPROCS", srv.Durability)
	}
	inner, err := bench.NewTarget(bench.TargetRegentReplicated, srv.Endpoints)
	if err != nil {
		t.Fatal(err)
	}
	tg := benchtest.Tag(inner)
	const n = 20_000
	cfg := bench.Config{Scenario: bench.Consume, Target: bench.TargetRegentReplicated, Messages: n, Duration: time.Minute}
	res, err := bench.Run(ctx, cfg, tg, srv.Probe(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.Check("g0"); err != nil {
		t.Fatal(err)
	}
	if res.Filled != n || res.Consumed != n || res.Errors != 0 {
		t.Fatalf("filled %d, completed %d, errors %d (%s); want %d and none", res.Filled, res.Consumed, res.Errors, res.FirstErr, n)
	}
	if u := res.Server; u == nil || u.CPUSeconds <= 0 || u.PeakRSS <= 0 {
		t.Fatalf("server figures %+v", u)
	}
	fan := bench.Config{Scenario: bench.Fanout, Target: bench.TargetRegentReplicated}
	fan.Defaults()
	if err := fan.Validate(); err == nil || !strings.Contains(err.Error(), "regent-replicated runs") {
		t.Fatalf("regent-replicated and the fanout scenario, which it does not run: %v", err)
	}
}
