package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
	"github.com/regentmq/regent/netserver"
)

// TestQueuePagesThrough: `regent queue` lists every partition of a queue
// larger than one page (10,000), in text and in JSON, each once.
func TestQueuePagesThrough(t *testing.T) {
	j, err := log.Open(log.Config{Dir: t.TempDir(), Sync: log.SyncNone})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{SnapshotEveryBytes: -1}, j)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := netserver.NewTCP(netserver.TCPConfig{Addr: "127.0.0.1:0"}, e)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		e.Close()
		j.Close()
	})
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
	addr := srv.Addr().String()
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
