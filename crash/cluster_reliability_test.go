package crash

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCrashKill9Cluster is the crash scenario against a cluster of three
// brokers (regent serve --cluster, each an embedded etcd voter): each
// cycle kills one broker at random under load and restarts it; the
// client follows the shard map, and every promise of "After a crash" is
// checked across the cluster: 0 acknowledged pushes lost, 0 completed
// messages back.
func TestCrashKill9Cluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills broker processes")
	}
	cfg := Config{Binary: binary(t), Dir: t.TempDir(), Brokers: 3, Cycles: cycles(), Logf: t.Logf,
		Partitions: 8, StartTimeout: 60 * time.Second}
	if !long() {
		cfg.MinUp, cfg.MaxUp = 500*time.Millisecond, 1500*time.Millisecond
	}
	runChecked(t, cfg, 20*time.Second, 2*time.Minute, "the cluster")
}

// TestCrashKill9Replicated is the crash scenario against three brokers
// whose shards have three replicas each (regent serve --replicas 3): each
// cycle kills the broker leading the most shards, measures how long each
// of its shards takes to answer a push again, and restarts it. Every
// promise of "After a crash" holds across the cluster, and every shard is
// served again within failoverBound.
func TestCrashKill9Replicated(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills broker processes")
	}
	// A kill 2 to 4 s after the previous restart: time for the restarted
	// replica to catch up at this load. Kills closer together are second
	// faults while a replica is behind: a shard then waits for it, as Raft
	// must, and the wait is no failover.
	cfg := Config{Binary: binary(t), Dir: keptDir(t), Brokers: 3, Replicas: 3, Cycles: cycles(), Logf: t.Logf,
		Partitions: 8, StartTimeout: 60 * time.Second, MinUp: 2 * time.Second, MaxUp: 4 * time.Second}
	if rep := runChecked(t, cfg, failoverBound+20*time.Second, 2*time.Minute, "the replicated cluster"); len(rep.Failovers) == 0 {
		t.Fatalf("no failover was measured:\n%s", rep)
	}
}

// keptDir is $REGENT_CRASH_DIR when it is set (the brokers' data and logs
// stay there after the test, for a failure's post-mortem), else a
// temporary directory.
func keptDir(t *testing.T) string {
	d := os.Getenv("REGENT_CRASH_DIR")
	if d == "" {
		return t.TempDir()
	}
	d = filepath.Join(d, fmt.Sprintf("%s-%d", t.Name(), time.Now().Unix()))
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("the brokers' data and logs: %s", d)
	return d
}
