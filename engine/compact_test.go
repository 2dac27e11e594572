package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

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
	if _, err := e.DeleteQueue("big"); err != nil {
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
