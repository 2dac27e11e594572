package netserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

// TestLargePushesDoNotStallLong is the long form of
// TestLargePushesDoNotStall, for the reliability record (REGENT_LONG=1):
// 20 runs of each workload (REGENT_STALL_RUNS=N for another count), each on
// a fresh broker in a process of its own (a stalled broker cannot be
// stopped, and would keep its memory), with more pushes than the short form:
// 6 producers × 10 pushes × 2 × 1 MiB over 8 partitions and 8 × 10 × 16 ×
// 64 KiB over 16, over TCP and over HTTP, and one producer pushing 96 × 1
// MiB (about a dozen snapshots, each followed by compaction). Each run
// checks that every push was answered (queued, or overloaded and pushed
// again until queued), that every message came back to each group exactly
// once with its payload, and that no push or ack waited 15 s for an answer.
// Over each workload's runs, snapshots must have been taken, old segments
// dropped and live messages copied forward. It prints a table per
// workload: runs, stalls, pushes, overloaded answers, snapshots,
// truncations, records compacted, time. The seed (REGENT_STALL_SEED)
// replays the payloads.
//
//	REGENT_LONG=1 go test ./netserver -run TestLargePushesDoNotStallLong -v -timeout 90m
func TestLargePushesDoNotStallLong(t *testing.T) {
	if spec := os.Getenv(stallChildEnv); spec != "" {
		stallChild(t, spec)
		return
	}
	if os.Getenv("REGENT_LONG") != "1" {
		t.Skip("REGENT_LONG=1 runs it (20 runs of each workload)")
	}
	runs := 20
	if v, err := strconv.Atoi(os.Getenv("REGENT_STALL_RUNS")); err == nil && v > 0 {
		runs = v
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("REGENT_STALL_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (REGENT_STALL_SEED), %d runs of each workload", seed, runs)

	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\truns\tstalls\tfailed\tqueued\toverloaded\tacks\tsnapshots\ttruncations\tcompacted\ttime\t")
	for wi, w := range stallLongWorkloads() {
		var sum stallResult
		stalls, failed := 0, 0
		for run := range runs {
			res := runStallChild(t, wi, seed+uint64(wi*runs+run))
			if res.Stalled {
				stalls++
			}
			if len(res.Problems) > 0 {
				failed++
			}
			if res.Stalled && stalls > 1 {
				res.Dump = "(as in the first stall of this workload, above)"
			}
			reportStall(t, w, res)
			sum.Pushes += res.Pushes
			sum.Overloaded += res.Overloaded
			sum.Acks += res.Acks
			sum.Snapshots += res.Snapshots
			sum.Truncations += res.Truncations
			sum.Moved += res.Moved
			sum.Elapsed += res.Elapsed
		}
		if stalls == 0 && failed == 0 {
			switch {
			case sum.Snapshots == 0:
				t.Errorf("%s: no snapshot in %d runs", w, runs)
			case sum.Truncations == 0:
				t.Errorf("%s: no snapshot dropped old segments in %d runs", w, runs)
			case sum.Moved == 0:
				t.Errorf("%s: compaction copied nothing forward in %d runs", w, runs)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t\n", w, runs, stalls, failed, sum.Pushes, sum.Overloaded,
			sum.Acks, sum.Snapshots, sum.Truncations, sum.Moved, sum.Elapsed.Round(time.Second))
	}
	tw.Flush()
	t.Logf("seed %d\n%s", seed, table.String())
}

// stallLongWorkloads are the long form's workloads; a child process finds
// its own by index.
func stallLongWorkloads() []stallWorkload { return stallWorkloads(10, 10, 96) }

// stallChildEnv carries a child's orders: workload index, seed and the
// file to write its result to, separated by colons (the file last).
const stallChildEnv = "REGENT_STALL_CHILD"

// runStallChild runs workload wi once in a child process (this test binary
// running this test) and returns what the child reported.
func runStallChild(t *testing.T, wi int, seed uint64) stallResult {
	t.Helper()
	out := filepath.Join(t.TempDir(), "result.json")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestLargePushesDoNotStallLong$", "-test.count=1", "-test.timeout=15m")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d:%d:%s", stallChildEnv, wi, seed, out))
	log, err := cmd.CombinedOutput()
	data, rerr := os.ReadFile(out)
	if rerr != nil {
		if ctx.Err() != nil {
			return stallResult{Stalled: true, Dump: "(the child process did not finish in 10 minutes)"}
		}
		return stallResult{Problems: []string{fmt.Sprintf("the child process reported nothing (%v):\n%s", err, log)}}
	}
	var res stallResult
	if err := json.Unmarshal(data, &res); err != nil {
		return stallResult{Problems: []string{fmt.Sprintf("the child's report: %v", err)}}
	}
	return res
}

// stallChild is the child's side: one run, its result written as JSON. A
// stalled broker stays stuck until the process exits.
func stallChild(t *testing.T, spec string) {
	parts := strings.SplitN(spec, ":", 3)
	if len(parts) != 3 {
		t.Fatalf("%s=%q: want index:seed:file", stallChildEnv, spec)
	}
	wi, err1 := strconv.Atoi(parts[0])
	seed, err2 := strconv.ParseUint(parts[1], 10, 64)
	ws := stallLongWorkloads()
	if err1 != nil || err2 != nil || wi < 0 || wi >= len(ws) {
		t.Fatalf("%s=%q: want index:seed:file", stallChildEnv, spec)
	}
	res := stallOnce(t.TempDir(), ws[wi], seed)
	data, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(parts[2], data, 0o644); err != nil {
		t.Fatal(err)
	}
}
