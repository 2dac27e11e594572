package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
)

// pagesBroker is testBroker with its engine at hand.
func pagesBroker(t *testing.T) (string, *engine.Engine) {
	t.Helper()
	b := brokertest.Start(t, broker.Options{Journal: log.Config{Sync: log.SyncNone}, Engine: engine.Config{SnapshotEveryBytes: -1}})
	return b.TCPAddr().String(), b.Engine()
}

// TestQueuePagesThrough: `regent queue` lists every partition of a queue
// larger than one page (10,000), in text and in JSON, each once.
func TestQueuePagesThrough(t *testing.T) {
	addr, e := pagesBroker(t)
	const n = 12_345
	for i := 0; i < n; i += 1000 {
		var items []engine.PushItem
		for k := i; k < min(i+1000, n); k++ {
			items = append(items, engine.PushItem{Queue: "big", Partition: "partition-" + strconv.Itoa(k), Payload: []byte("x")})
		}
		if _, err := e.Push(context.Background(), items); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errs := cli(t, addr, "", "queue", "big", "--json")
	var qi struct {
		Partitions []struct{ Name string } `json:"partitions"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &qi) != nil || len(qi.Partitions) != n {
		t.Fatalf("queue --json: %d, %d partitions listed, %s", code, len(qi.Partitions), errs)
	}
	for i, p := range qi.Partitions {
		if p.Name != "partition-"+strconv.Itoa(i) {
			t.Fatalf("partition %d is %s", i, p.Name)
		}
	}
	code, out, errs = cli(t, addr, "", "queue", "big")
	if code != exitOK || strings.Count(out, "partition-") != n || !strings.Contains(out, "12345 partitions") {
		t.Fatalf("queue: %d, %d partition rows, %s", code, strings.Count(out, "partition-"), errs)
	}
}

// TestDLQReadsOnPastAShortPage: `regent dlq --limit 100` lists all 18 dead
// letters of 1 MiB although the broker answers them in pages that fit its
// frame (16 MiB).
func TestDLQReadsOnPastAShortPage(t *testing.T) {
	addr, e := pagesBroker(t)
	ctx := context.Background()
	big := []byte(strings.Repeat("d", 1<<20))
	for i := 0; i < 18; i++ {
		if _, err := e.Push(ctx, []engine.PushItem{{Queue: "fat", Partition: "p", Payload: big}}); err != nil {
			t.Fatal(err)
		}
	}
	for filed := 0; filed < 18; {
		msgs, err := e.Pop(ctx, engine.PopRequest{Queue: "fat", Group: "g", Batch: 18})
		if err != nil || len(msgs) == 0 {
			t.Fatalf("pop: %d messages: %v", len(msgs), err)
		}
		items := make([]engine.AckItem, len(msgs))
		for i, m := range msgs {
			items[i] = engine.AckItem{PartitionID: m.PartitionID, HasOffset: true, Offset: m.Offset, LeaseID: m.LeaseID, Group: "g", Status: engine.DLQ}
		}
		if _, err := e.Ack(ctx, items); err != nil {
			t.Fatal(err)
		}
		filed += len(msgs)
	}
	code, out, errs := cli(t, addr, "", "dlq", "fat", "--limit", "100", "--json")
	var l struct {
		Total   int   `json:"total"`
		Entries []any `json:"entries"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &l) != nil || l.Total != 18 || len(l.Entries) != 18 {
		t.Fatalf("dlq --limit 100: %d, %d entries of %d, %s", code, len(l.Entries), l.Total, errs)
	}
	if code, out, _ = cli(t, addr, "", "dlq", "fat", "--limit", "3", "--json"); code != exitOK || json.Unmarshal([]byte(out), &l) != nil || len(l.Entries) != 3 {
		t.Fatalf("dlq --limit 3: %d entries", len(l.Entries))
	}
}
