package engine

import (
	"context"
	"testing"
	"time"
)

// TestCycleLockNotHeldAcrossTheCommitWait: a cycle's query lock orders the
// cycles' changes in memory; it is not held while a cycle waits for its
// record to be durable, so a slow disk does not serialise a query's cycles
// one fsync at a time. With commits held back, a second cycle of the same
// query (another partition) applies while the first still waits.
func TestCycleLockNotHeldAcrossTheCommitWait(t *testing.T) {
	j := newMemJournal()
	defer j.close()
	e, err := New(Config{Clock: NewFakeClock(time.Unix(1_800_000_000, 0)), NoTicker: true, Stripes: 2, SnapshotEveryBytes: -1, Logger: silent}, j)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	r, err := e.RegisterQuery(ctx, QueryRegistration{Name: "q", SourceQueue: "s", ConfigHash: "h"})
	if err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	j.mu.Lock()
	j.hold = hold
	j.mu.Unlock()
	done := make(chan error, 2)
	cycle := func(part byte) {
		_, err := e.Cycle(ctx, StreamCycle{QueryID: r.Query.ID, PartitionID: UUID{part}, State: []StateOp{{Key: "k", Value: []byte("1")}}})
		done <- err
	}
	applied := func(part byte) bool {
		rows, _ := e.State(r.Query.ID, UUID{part}, StateFilter{})
		return len(rows) == 1
	}
	go cycle(1)
	for deadline := time.Now().Add(5 * time.Second); !applied(1); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first cycle was never applied")
		}
	}
	go cycle(2)
	for deadline := time.Now().Add(2 * time.Second); !applied(2); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(hold)
			t.Fatal("the second cycle of the query waited for the first one's commit")
		}
	}
	close(hold)
	for i := 0; i < 2; i++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a cycle never answered")
		}
	}
}
