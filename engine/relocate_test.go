package engine_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
)

// smallSegments opens dir with 4 KiB segments and a 1-byte cache (messages
// read back from the journal leave memory again).
func smallSegments(t *testing.T, dir string) (*log.Log, *engine.Engine) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	j, err := log.Open(log.Config{Dir: dir, SegmentBytes: 4 << 10, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{NoTicker: true, SnapshotEveryBytes: -1, CacheBytes: 1, Logger: logger}, j)
	if err != nil {
		t.Fatal(err)
	}
	return j, e
}

// TestRelocatedMessagesReadRightAfterTheSnapshot: a snapshot copies the few
// live messages of the oldest segment forward (compaction). A pop that
// reads them back right after it, before the copies are written, must get
// them: the chunk moves to its copy only once the copy is durable (a pop
// there failed with "log: not found: ... entry N; the log holds ..N-1").
func TestRelocatedMessagesReadRightAfterTheSnapshot(t *testing.T) {
	for round := 0; round < 20; round++ {
		t.Run(fmt.Sprint("round=", round), func(t *testing.T) {
			dir := t.TempDir()
			j, e := smallSegments(t, dir)
			ctx := context.Background()
			payload := func(i int) []byte { return fmt.Appendf(nil, "message-%04d-%060d", i, i) }
			for i := 0; i < 60; i++ { // the first segment: p's messages
				if _, err := e.Push(ctx, []engine.PushItem{{Queue: "q", Partition: "p", Payload: payload(i)}}); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < 200; i++ { // later segments
				if _, err := e.Push(ctx, []engine.PushItem{{Queue: "q", Partition: "other", Payload: payload(i)}}); err != nil {
					t.Fatal(err)
				}
			}
			e.Close() // a snapshot; restarted, no message is in memory
			j.Close()
			j, e = smallSegments(t, dir)
			defer j.Close()
			defer e.Close()
			if err := e.Snapshot(); err != nil { // relocates p's messages
				t.Fatal(err)
			}
			ms, err := e.Pop(ctx, engine.PopRequest{Queue: "q", Partition: "p", Group: "g", Batch: 60, AutoAck: true})
			if err != nil || len(ms) != 60 {
				t.Fatalf("pop right after the snapshot: %d messages, %v", len(ms), err)
			}
			for i, m := range ms {
				if string(m.Payload) != string(payload(i)) {
					t.Fatalf("message %d: %q", i, m.Payload)
				}
			}
		})
	}
}
