package replica

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regentmq/regent/engine"
	rlog "github.com/regentmq/regent/log"
)

// benchPush pushes batches of 100 messages of 128 bytes through e from
// 32 goroutines (the harness's 4 producers × 8 in flight) until b.N
// messages are stored, and reports msgs/s.
func benchPush(b *testing.B, e *engine.Engine) {
	payload := make([]byte, 128)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			items := make([]engine.PushItem, 100)
			for next.Add(100) <= int64(b.N)+99 {
				for i := range items {
					items[i] = engine.PushItem{Queue: "bench", Partition: fmt.Sprint("p", w%16), Payload: payload}
				}
				if _, err := e.Push(context.Background(), items); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

// One engine over its own journal: the single-broker baseline.
func BenchmarkPushOneBroker(b *testing.B) {
	j, err := rlog.Open(rlog.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	e, err := engine.New(engine.Config{SnapshotEveryBytes: -1, Logger: slog.New(slog.DiscardHandler)}, j)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	benchPush(b, e)
}

// The shard's leader engine of three replicas, each with its Raft log in
// its own journal (fsync before every answer, as the baseline), messages
// carried in process between the Nodes' loops.
func BenchmarkPushRF3(b *testing.B) {
	net := &chanNet{nodes: map[uint64]*Node{}, inbox: map[uint64]chan []Envelope{}, down: map[uint64]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		for _, n := range net.nodes {
			n.Close()
		}
	}()
	for _, id := range voters3 {
		j, err := rlog.Open(rlog.Config{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		defer j.Close()
		d, err := OpenDisk(j, 0)
		if err != nil {
			b.Fatal(err)
		}
		l := d.Log(testShard)
		if err := l.Bootstrap(voters3); err != nil {
			b.Fatal(err)
		}
		n, err := NewNode(Config{ID: id, Transport: chanPort{net, id}, Sync: d.Sync, NewEngine: shardEngines(nil)})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := n.AddShard(testShard, l); err != nil {
			b.Fatal(err)
		}
		net.join(ctx, &wg, id, n)
	}
	var e *engine.Engine
	for deadline := time.Now().Add(10 * time.Second); e == nil; {
		for _, n := range net.nodes {
			if x, _, _ := n.Shard(testShard).Engine(); x != nil {
				e = x
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("no leader")
		}
		time.Sleep(5 * time.Millisecond)
	}
	benchPush(b, e)
}
