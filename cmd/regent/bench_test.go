package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/regentmq/regent/bench"
)

// TestBenchScenariosSmoke runs every scenario for about a second against a
// Regent started in process, so that a broken scenario fails CI. The NATS
// peer is not needed here (regent bench compare drives it).
func TestBenchScenariosSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("smoke runs of the load scenarios")
	}
	extra := map[string][]string{
		bench.Consume:    {"--messages", "20000"},
		bench.Partitions: {"--partitions", "2000", "--idle-partitions", "3000"},
		bench.Fanout:     {"--groups", "3", "--consumers", "1", "--messages", "10000"},
		bench.Pipeline:   {"--rate", "20000"}, // open loop
		bench.Backlog:    {"--messages", "20000", "--duration", "30s"},
	}
	for _, scen := range bench.Scenarios {
		t.Run(scen, func(t *testing.T) {
			args := append([]string{"bench", scen, "--server", "inprocess", "--duration", "1s", "--json"}, extra[scen]...)
			var out, errb bytes.Buffer
			if code := run(args, &out, &errb); code != exitOK {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			var f bench.File
			if err := json.Unmarshal(out.Bytes(), &f); err != nil {
				t.Fatalf("--json output: %v\n%s", err, out.String())
			}
			if len(f.Results) != 1 {
				t.Fatalf("%d results", len(f.Results))
			}
			r := f.Results[0]
			if r.Msgs == 0 || r.MsgsPerSec <= 0 || r.Errors > 0 || r.Latency.Count == 0 || r.Latency.P99 <= 0 {
				t.Fatalf("result: msgs %d (%.0f/s), errors %d (%s), latency %+v", r.Msgs, r.MsgsPerSec, r.Errors, r.FirstErr, r.Latency)
			}
			switch scen {
			case bench.Consume:
				if r.Filled != 20000 || r.Consumed != 20000 {
					t.Errorf("consume: filled %d, consumed %d, want 20000 each", r.Filled, r.Consumed)
				}
			case bench.RetryStorm:
				if r.FailedOn == 0 || r.Delivered <= r.Consumed {
					t.Errorf("retry-storm: failed %d, delivered %d, consumed %d", r.FailedOn, r.Delivered, r.Consumed)
				}
			case bench.HTTP:
				if r.Target != bench.TargetRegentHTTP {
					t.Errorf("http ran on %s", r.Target)
				}
			case bench.Backlog:
				if r.Pushed != 20000 || r.Filled != 20000 || r.Consumed != 20000 || len(r.Phases) != 2 ||
					r.Phases[0].Msgs != 20000 || r.Phases[1].Msgs != 20000 || r.PushLatency == nil {
					t.Errorf("backlog: pushed %d, filled %d, consumed %d, phases %+v", r.Pushed, r.Filled, r.Consumed, r.Phases)
				}
			case bench.Fanout:
				if r.Groups != 3 || r.Filled != 10000 || r.Consumed != 30000 {
					t.Errorf("fanout: %d groups consumed %d of %d pre-filled", r.Groups, r.Consumed, r.Filled)
				}
			}
			if r.Durability == "" || f.Env.GoVersion == "" || !strings.HasPrefix(f.Command, "regent bench "+scen) {
				t.Errorf("file lacks its context: %q %q %q", r.Durability, f.Env.GoVersion, f.Command)
			}
		})
	}
}

// TestBenchSweepAndReport: a two-point batch sweep written with --out, then
// report over it.
func TestBenchSweepAndReport(t *testing.T) {
	if testing.Short() {
		t.Skip("smoke runs of the load scenarios")
	}
	dir := t.TempDir()
	results := filepath.Join(dir, "results")
	var out, errb bytes.Buffer
	prof := filepath.Join(dir, "cpu.prof")
	code := run([]string{"bench", "push", "--server", "inprocess", "--duration", "500ms", "--batch", "10,100",
		"--out", filepath.Join(results, "batch.json"), "--cpuprofile", prof}, &out, &errb)
	if code != exitOK {
		t.Fatalf("sweep: exit %d: %s", code, errb.String())
	}
	if strings.Count(out.String(), "push on regent") != 2 {
		t.Fatalf("sweep printed:\n%s", out.String())
	}
	// A profile per run, gzipped protobuf as runtime/pprof writes it.
	for _, p := range []string{prof, prof + ".2"} {
		if b, err := os.ReadFile(p); err != nil || len(b) < 100 || b[0] != 0x1f || b[1] != 0x8b {
			t.Fatalf("profile %s: %d bytes, %v", p, len(b), err)
		}
	}
	md := filepath.Join(dir, "BENCHMARKS.md")
	code = run([]string{"bench", "report", "--results", results, "--out", md, "--charts", filepath.Join(dir, "charts")}, &out, &errb)
	if code != exitOK {
		t.Fatalf("report: exit %d: %s", code, errb.String())
	}
	b, _ := os.ReadFile(md)
	if !strings.Contains(string(b), "charts/batch.svg") || !strings.Contains(string(b), "--batch 10,100") {
		t.Fatalf("report:\n%s", b)
	}
}

func TestBenchUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"bench"},
		{"bench", "--duration", "1s"},
		{"bench", "compare"},
		{"bench", "compare", "push"}, // no peer
		{"bench", "push", "--batch", "x"},
		{"bench", "push", "--peer-sync", "sometimes"},
		{"bench", "push", "--server", "elsewhere"},
		{"bench", "push", "--redis-fsync", "sometimes"},
		{"bench", "compare", "push", "--target", "redis", "--start-peer"}, // the Regent side first
		{"bench", "compare", "push", "--target", "regent,regent-http", "--start-peer"},              // not a peer
		{"bench", "compare", "push", "--target", "regent,redis"},                                    // no redis
		{"bench", "compare", "push", "--target", "regent,nats,redis", "--redis-url", "127.0.0.1:1"}, // no nats
		{"bench", "push", "--target", "redis", "--redis-url", "127.0.0.1:1", "--redis-fsync", "always,everysec"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitUsage, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"bench", "nonsense", "--server", "inprocess"}, &out, &errb); code != exitFailure || !strings.Contains(errb.String(), "unknown scenario") {
		t.Errorf("unknown scenario: exit %d: %s", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"bench", "backlog", "--rate", "1000", "--server", "inprocess"}, &out, &errb); code != exitFailure || !strings.Contains(errb.String(), "takes no rate") {
		t.Errorf("backlog with a rate: exit %d: %s", code, errb.String())
	}
}

// TestBenchCompareRedis: compare with the Redis peer started by the harness
// runs Regent and Redis under both AOF fsync policies, in turn, and
// labels each. Skipped without redis-server, unless REGENT_REQUIRE_REDIS=1
// (CI sets it); bench/benchtest holds the Redis peer's own tests.
func TestBenchCompareRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("smoke runs of the load scenarios")
	}
	if _, err := bench.FindRedis(""); err != nil {
		if os.Getenv("REGENT_REQUIRE_REDIS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"bench", "compare", "consume", "--target", "regent,redis", "--start-peer", "--rounds", "1",
		"--messages", "10000", "--duration", "20s", "--server", "inprocess", "--json"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var f bench.File
	if err := json.Unmarshal(out.Bytes(), &f); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out.String())
	}
	want := []string{bench.RegentDurability("always"), bench.RedisDurability("everysec"), bench.RedisDurability("always")}
	if f.Kind != "compare" || len(f.Results) != len(want) {
		t.Fatalf("%s with %d results", f.Kind, len(f.Results))
	}
	for i, r := range f.Results {
		if r.Durability != want[i] || r.Consumed != 10000 || r.Errors != 0 || (i > 0 && (r.Target != bench.TargetRedis || r.Server == nil)) {
			t.Errorf("result %d: %s (%s): consumed %d, errors %d (%s), server %+v", i, r.Target, r.Durability, r.Consumed, r.Errors, r.FirstErr, r.Server)
		}
	}
}
