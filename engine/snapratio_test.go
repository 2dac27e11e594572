package engine

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// A large state is not snapshotted every SnapshotEveryBytes: automatic
// snapshots come at least snapshotRatio times their size apart, so that
// writing them never takes most of what is written (with a small
// SnapshotEveryBytes, a replicated shard's, and a state of many
// partitions, they took it all).
func TestSnapshotsComeTheirSizeTimesApart(t *testing.T) {
	j := newMemJournal()
	defer j.close()
	e, err := New(Config{NoTicker: true, SnapshotEveryBytes: 1 << 10}, j)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	push := func(partition string, n int) {
		t.Helper()
		if _, err := e.Push(ctx, []PushItem{{Queue: "q", Partition: partition, Payload: make([]byte, n)}}); err != nil {
			t.Fatal(err)
		}
	}
	for p := range 500 { // the state: 500 partitions
		push(fmt.Sprint("partition-", p), 1)
	}
	if err := e.Snapshot(); err != nil {
		t.Fatal(err)
	}
	size := len(j.snapshotData())
	j.mu.Lock()
	j.snaps = 0
	j.mu.Unlock()
	const written = 512 << 10
	for range written / (2 << 10) {
		push("hot", 2<<10)
		e.maybeSnapshot() // what the ticker does
		for e.snapping.Load() {
			time.Sleep(100 * time.Microsecond)
		}
	}
	j.mu.Lock()
	n := j.snaps
	j.mu.Unlock()
	if limit := written/(snapshotRatio*size) + 1; n > limit || n == 0 {
		t.Fatalf("%d automatic snapshots of %d bytes for %d bytes written: want 1 to %d", n, size, written, limit)
	}
	t.Logf("%d automatic snapshots of about %d bytes for %d bytes written", n, size, written)
}
