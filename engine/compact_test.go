package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
)

// TestCompactionCopiesLiveMessagesForward: a few live messages in an old
// segment full of a deleted queue's messages are copied forward, so that
// snapshots drop the old segments and the disk usage falls; the moved
// messages are still delivered, after a restart too.
func TestCompactionCopiesLiveMessagesForward(t *testing.T) {
	dir := t.TempDir()
	open := func() (*log.Log, *engine.Engine) {
		j, err := log.Open(log.Config{Dir: dir, SegmentBytes: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(engine.Config{NoTicker: true, SnapshotEveryBytes: -1}, j)
		if err != nil {
			t.Fatal(err)
		}
		return j, e
	}
	j, e := open()
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 400; i++ {
		big := make([]byte, 1000) // incompressible, so the journal grows
		for k := range big {
			big[k] = byte(rnd.Uint32())
		}
		if i%100 == 0 {
			if _, err := e.Push(ctx, []engine.PushItem{{Queue: "keep", Payload: []byte(fmt.Sprint("k", i/100))}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.Push(ctx, []engine.PushItem{{Queue: "big", Payload: []byte(big)}}); err != nil {
			t.Fatal(err)
		}
	}
	before := j.DiskBytes()
	segs := len(j.SegmentStarts())
	if segs < 4 {
		t.Fatalf("only %d segments: the test needs several", segs)
	}
	if _, err := e.DeleteQueue(context.Background(), "big"); err != nil {
		t.Fatal(err)
	}
	// Each snapshot drops what the previous one no longer needs and moves
	// the live records of the oldest segment forward.
	for i := 0; i < segs+2; i++ {
		if err := e.Snapshot(); err != nil {
			t.Fatal(err)
		}
	}
	after := j.DiskBytes()
	if after*4 > before {
		t.Fatalf("disk usage went from %d to %d bytes (%d segments to %d): old segments were not dropped",
			before, after, segs, len(j.SegmentStarts()))
	}
	check := func(e *engine.Engine) {
		msgs, err := e.Pop(ctx, engine.PopRequest{Queue: "keep", Group: fmt.Sprint("g", after), Batch: 10})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range msgs {
			got = append(got, string(m.Payload))
		}
		if strings.Join(got, ",") != "k0,k1,k2,k3" {
			t.Fatalf("kept queue holds %v", got)
		}
	}
	check(e)
	e.Close()
	j.Close()
	j, e = open()
	defer j.Close()
	defer e.Close()
	check(e)
	t.Logf("disk: %d -> %d bytes", before, after)
}

// TestRetentionGivesDiskSpaceBack: messages removed by retention free
// whole journal segments, which snapshots drop: the journal's size on disk
// falls, measured.
func TestRetentionGivesDiskSpaceBack(t *testing.T) {
	dir := t.TempDir()
	clock := engine.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	j, err := log.Open(log.Config{Dir: dir, SegmentBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	e, err := engine.New(engine.Config{NoTicker: true, SnapshotEveryBytes: -1, Clock: clock}, j)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	o := engine.DefaultQueueOptions()
	o.RetentionEnabled, o.RetentionSeconds = true, 3600
	if _, err := e.Configure(context.Background(), "logs", o); err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 300; i++ {
		pl := make([]byte, 1000)
		for k := range pl {
			pl[k] = byte(rnd.Uint32())
		}
		if _, err := e.Push(ctx, []engine.PushItem{{Queue: "logs", Payload: pl}}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
	}
	before := j.DiskBytes()
	clock.Advance(2 * time.Hour)
	e.Push(ctx, []engine.PushItem{{Queue: "logs", Payload: []byte("recent")}})
	n, err := e.RetentionSweep()
	if err != nil || n != 300 {
		t.Fatalf("retention removed %d (%v), want 300", n, err)
	}
	for i := 0; i < 3; i++ {
		if err := e.Snapshot(); err != nil {
			t.Fatal(err)
		}
	}
	after := j.DiskBytes()
	t.Logf("journal on disk: %d bytes before retention, %d after", before, after)
	if after*4 > before {
		t.Fatalf("disk usage %d -> %d: retention gave no space back", before, after)
	}
	msgs, _ := e.Pop(ctx, engine.PopRequest{Queue: "logs", Batch: 10})
	if len(msgs) != 1 || string(msgs[0].Payload) != "recent" {
		t.Fatalf("left: %d messages", len(msgs))
	}
}

// TestReplayReadsHistoryBackFromTheJournal: with a cache far smaller than
// the queue, a new group reading from the beginning gets every message, in
// order, read back from the journal (and nothing stays pinned in memory).
func TestReplayReadsHistoryBackFromTheJournal(t *testing.T) {
	j, err := log.Open(log.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	e, err := engine.New(engine.Config{NoTicker: true, SnapshotEveryBytes: -1, CacheBytes: 64 << 10}, j)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	const n = 3000
	for i := 0; i < n; i += 100 {
		items := make([]engine.PushItem, 100)
		for k := range items {
			items[k] = engine.PushItem{Queue: "history", Payload: []byte(fmt.Sprintf("message %05d %s", i+k, strings.Repeat("x", 200)))}
		}
		if _, err := e.Push(ctx, items); err != nil {
			t.Fatal(err)
		}
	}
	if st := e.Stats(); st.CacheBytes > 128<<10 {
		t.Fatalf("cache holds %d bytes with a 64 KiB budget", st.CacheBytes)
	}
	next := 0
	for next < n {
		msgs, err := e.Pop(ctx, engine.PopRequest{Queue: "history", Group: "replay", Batch: 250, AutoAck: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			t.Fatalf("replay stopped at %d of %d", next, n)
		}
		for _, m := range msgs {
			if want := fmt.Sprintf("message %05d", next); !strings.HasPrefix(string(m.Payload), want) {
				t.Fatalf("replay out of order: got %.13s, want %s", m.Payload, want)
			}
			next++
		}
	}
}
