package netserver_test

import (
	"github.com/regentmq/regent/netserver/internal/testhooks"
	"testing"
)

// TestLargePushesDoNotStall pushes large messages concurrently into a whole
// broker (journal with fsync on every group, engine snapshotting every 8 MiB
// over 8 MiB segments, TCP server and HTTP bridge) while two groups pop and
// ack them, and fails with the broker's goroutines if no push or ack is
// answered for 15 s. Each workload runs once on a fresh broker: 6
// producers pushing 2 × 1 MiB at a time over 8 partitions, 8 pushing 16 ×
// 64 KiB over 16, over TCP with the Go client and over HTTP, and one
// producer pushing 1 MiB messages through several snapshots and
// compactions. An overloaded answer is retried after a backoff and is no
// failure. Every message must come back to each group exactly once, with
// its payload. The long form is TestLargePushesDoNotStallLong.
//
// Names read door/producers x pushes x batch x size/partitions. With
// REGENT_STALL_DUMP=FILE a stall also writes the whole goroutine profile
// (debug=2) to FILE.
//
//	go test ./netserver -run TestLargePushesDoNotStall -v
func TestLargePushesDoNotStall(t *testing.T) {
	if testhooks.Race {
		// Eleven workloads of up to 1 MiB messages, each checksummed,
		// compressed and copied under the race detector's instrumentation,
		// passed go test's 10 minutes on a loaded two-core machine; the run
		// without it (go test ./...) is the one that finds stalls.
		t.Skip("moves gigabytes: too slow under the race detector")
	}
	for i, w := range stallWorkloads(5, 5, 40) {
		t.Run(w.String(), func(t *testing.T) {
			res := stallOnce(t.TempDir(), w, uint64(i+1))
			reportStall(t, w, res)
			if !res.Stalled && res.Snapshots == 0 {
				t.Errorf("%s: no snapshot was taken during the run", w)
			}
			t.Logf("%d messages queued, %d overloaded answers, %d acks, %d snapshots, %d truncations, %d records compacted, %v",
				res.Pushes, res.Overloaded, res.Acks, res.Snapshots, res.Truncations, res.Moved, res.Elapsed.Round(1e6))
		})
	}
}

// stallOnce runs w once on a fresh broker in dir and closes the broker. A
// stalled broker is left as it is (closing it would hang too).
func stallOnce(dir string, w stallWorkload, seed uint64) stallResult {
	b, err := startStallBroker(dir)
	if err != nil {
		return stallResult{Problems: []string{"starting the broker: " + err.Error()}}
	}
	res := runStall(w, seed, b)
	if res.Stalled {
		return res
	}
	if err := b.close(); err != nil {
		res.Problems = append(res.Problems, "close: "+err.Error())
	}
	res.BrokerErrors = b.logs.errors()
	return res
}

// reportStall fails t with a stall (and the broker's goroutines) or any
// other problem of res.
func reportStall(t *testing.T, w stallWorkload, res stallResult) {
	t.Helper()
	if res.Stalled {
		t.Errorf("%s stalled: no push or ack answered for %v (%d of %d messages queued, %d acks, %d overloaded answers, %d snapshots); the broker's goroutines:\n%s",
			w, stallTimeout, res.Pushes, w.total(), res.Acks, res.Overloaded, res.Snapshots, res.Dump)
	}
	for _, p := range res.Problems {
		t.Errorf("%s: %s", w, p)
	}
	for _, e := range res.BrokerErrors {
		t.Logf("%s: the broker logged an error: %s", w, e)
	}
}
