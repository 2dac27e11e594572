package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// browseAll pages through a browse from r until no more, and returns its
// messages as "partition:offset=payload" and its gaps as
// "partition:first-last reason", in page order.
func browseAll(t *testing.T, e *Engine, r BrowseRequest) (msgs, gaps []string, pages int) {
	t.Helper()
	for pages = 1; ; pages++ {
		pg, err := e.Browse(r)
		if err != nil {
			t.Fatal(err)
		}
		if r.Limit > 0 && len(pg.Messages)+len(pg.Gaps) > r.Limit {
			t.Fatalf("page %d: %d entries, limit %d", pages, len(pg.Messages)+len(pg.Gaps), r.Limit)
		}
		for _, m := range pg.Messages {
			msgs = append(msgs, fmt.Sprintf("%s:%d=%s", m.Partition, m.Offset, m.Payload))
		}
		for _, g := range pg.Gaps {
			gaps = append(gaps, fmt.Sprintf("%s:%d-%d %s", g.Partition, g.First, g.Last, g.Reason))
		}
		if !pg.More {
			if pg.NextPartition != (UUID{}) || pg.NextOffset != 0 {
				t.Fatalf("a last page says where to go on: %+v", pg)
			}
			return msgs, gaps, pages
		}
		if len(pg.Messages)+len(pg.Gaps) == 0 {
			t.Fatal("an empty page with more")
		}
		r.Resume, r.ResumeOffset = pg.NextPartition, pg.NextOffset
	}
}

// TestBrowseByOffset: every partition, or one, from an offset or its last
// N, a page at a time: each message once, in order, and nothing changes
// (no lease, no cursor, no group, no queue, no cache).
func TestBrowseByOffset(t *testing.T) {
	f := newFixture(t)
	f.push("b", "a", nums(10)...)
	f.push("b", "c", "c0", "c1", "c2")
	f.pop(PopRequest{Queue: "b", Partition: "a", Group: "g", Batch: 2}) // a lease that browsing must leave alone
	before, _ := f.e.ViewQueue("b")
	cache := f.e.Stats().CacheBytes

	msgs, gaps, pages := browseAll(t, f.e, BrowseRequest{Queue: "b", Limit: 4})
	want := "a:0=0 a:1=1 a:2=2 a:3=3 a:4=4 a:5=5 a:6=6 a:7=7 a:8=8 a:9=9 c:0=c0 c:1=c1 c:2=c2"
	if got := strings.Join(msgs, " "); got != want || len(gaps) != 0 || pages != 4 {
		t.Errorf("all, limit 4: %d pages: %s %v", pages, got, gaps)
	}
	msgs, _, _ = browseAll(t, f.e, BrowseRequest{Queue: "b", Start: BrowseLast, N: 2})
	if got := strings.Join(msgs, " "); got != "a:8=8 a:9=9 c:1=c1 c:2=c2" {
		t.Errorf("last 2: %s", got)
	}
	msgs, _, pages = browseAll(t, f.e, BrowseRequest{Queue: "b", Partition: "a", Start: BrowseLast, N: 5, Limit: 2})
	if got := strings.Join(msgs, " "); got != "a:5=5 a:6=6 a:7=7 a:8=8 a:9=9" || pages != 3 {
		t.Errorf("a, last 5 by 2: %d pages: %s", pages, got)
	}
	msgs, _, _ = browseAll(t, f.e, BrowseRequest{Queue: "b", Partition: "c", Start: BrowseLast, N: 1 << 40})
	if got := strings.Join(msgs, " "); got != "c:0=c0 c:1=c1 c:2=c2" {
		t.Errorf("c, last 2^40: %s", got)
	}
	msgs, _, _ = browseAll(t, f.e, BrowseRequest{Queue: "b", N: 8, Limit: 1 << 30})
	if got := strings.Join(msgs, " "); got != "a:8=8 a:9=9" {
		t.Errorf("from 8, limit 2^30: %s", got)
	}
	if pg, err := f.e.Browse(BrowseRequest{Queue: "b", Partition: "a", N: 10}); err != nil || len(pg.Messages)+len(pg.Gaps) != 0 || pg.More {
		t.Errorf("from the end: %+v %v", pg, err)
	}
	pg, err := f.e.Browse(BrowseRequest{Queue: "b", Partition: "a"})
	if err != nil || len(pg.Messages) != 10 || pg.More {
		t.Fatalf("default limit: %d messages, more %v: %v", len(pg.Messages), pg.More, err)
	}
	m := pg.Messages[3]
	if m.Queue != "b" || m.PartitionID != before.Partitions[0].ID || m.TransactionID != m.ID.String() || m.CreatedAt == 0 ||
		m.Size != 1 || !m.LeaseID.IsZero() || m.Group != "" {
		t.Errorf("message %+v", m)
	}

	// Nothing changed: same view (leases, cursors, groups), same cache.
	after, _ := f.e.ViewQueue("b")
	if !reflect.DeepEqual(before, after) || f.e.Stats().CacheBytes != cache {
		t.Errorf("browsing changed the queue:\n%+v\n%+v", before, after)
	}
	wantPayloads(t, f.pop(PopRequest{Queue: "b", Partition: "c", Batch: 10}), "c0,c1,c2")

	// Refusals, which create nothing.
	for _, c := range []struct {
		r    BrowseRequest
		want error
	}{
		{BrowseRequest{Queue: "nope"}, ErrQueueNotFound},
		{BrowseRequest{Queue: "b", Partition: "nope"}, ErrPartitionNotFound},
		{BrowseRequest{Queue: "b", Start: BrowseLast}, ErrInvalid},
		{BrowseRequest{Queue: "b", Start: 7}, ErrInvalid},
		{BrowseRequest{Queue: "b", MaxBytes: -1}, ErrInvalid},
		{BrowseRequest{Queue: "b", Resume: UUID{1}}, ErrInvalid},
		{BrowseRequest{Queue: "b", Partition: "c", Resume: before.Partitions[0].ID}, ErrInvalid},
	} {
		if _, err := f.e.Browse(c.r); !errors.Is(err, c.want) {
			t.Errorf("%+v: %v, want %v", c.r, err, c.want)
		}
	}
	f.push("other", "", "x")
	other, _ := f.e.ViewQueue("other")
	if _, err := f.e.Browse(BrowseRequest{Queue: "b", Resume: other.Partitions[0].ID}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a resume point of another queue: %v", err)
	}
	if _, err := f.e.ViewQueue("nope"); !errors.Is(err, ErrQueueNotFound) {
		t.Errorf("browsing created queue nope: %v", err)
	}
	if v, _ := f.e.ViewQueue("b"); len(v.Partitions) != 2 {
		t.Errorf("browsing created a partition: %d", len(v.Partitions))
	}
}

// TestBrowseBytes: a page holds what MaxBytes allows and says where to go
// on; a message that alone does not fit comes cut, with its whole size;
// MaxPayload cuts every payload.
func TestBrowseBytes(t *testing.T) {
	f := newFixture(t)
	big := strings.Repeat("x", 1000)
	f.push("y", "", big, big, big)
	one := MessageBytes(1000, strings.Repeat("i", 36), "", "Default", "")
	pg, err := f.e.Browse(BrowseRequest{Queue: "y", MaxBytes: 2*one + one/2})
	if err != nil || len(pg.Messages) != 2 || !pg.More || pg.NextOffset != 2 || pg.NextPartition != pg.Messages[0].PartitionID {
		t.Fatalf("2.5 messages' worth: %d messages, more %v at %d: %v", len(pg.Messages), pg.More, pg.NextOffset, err)
	}
	pg, _ = f.e.Browse(BrowseRequest{Queue: "y", MaxBytes: one - 1})
	if len(pg.Messages) != 1 || pg.Messages[0].Size != 1000 || len(pg.Messages[0].Payload) != 999 || pg.NextOffset != 1 {
		t.Fatalf("a message above the bound: %d messages, the first %d of %d bytes, next %d",
			len(pg.Messages), len(pg.Messages[0].Payload), pg.Messages[0].Size, pg.NextOffset)
	}
	pg, _ = f.e.Browse(BrowseRequest{Queue: "y", MaxBytes: 10})
	if len(pg.Messages) != 1 || len(pg.Messages[0].Payload) != 0 || pg.Messages[0].Size != 1000 {
		t.Fatalf("a bound below a message's fields: %+v", pg)
	}
	pg, _ = f.e.Browse(BrowseRequest{Queue: "y", MaxPayload: 5, MaxBytes: 3 * (one - 990)})
	if len(pg.Messages) != 3 || pg.More || string(pg.Messages[2].Payload) != "xxxxx" || pg.Messages[2].Size != 1000 {
		t.Fatalf("payloads cut to 5: %d messages, more %v", len(pg.Messages), pg.More)
	}
}

// TestBrowseGaps: offsets removed by retention, deleted ones, and messages
// no longer in memory (read back from the journal).
func TestBrowseGaps(t *testing.T) {
	f := newFixture(t)
	f.configure("r", func(o *QueueOptions) { o.RetentionEnabled, o.RetentionSeconds = true, 60 })
	f.push("r", "", "old1", "old2")
	f.clock.Advance(45 * time.Second)
	res := f.pushItems(PushItem{Queue: "r", Payload: []byte("n2")}, PushItem{Queue: "r", Payload: []byte("n3"), TransactionID: "del3"},
		PushItem{Queue: "r", Payload: []byte("n4"), TransactionID: "del4"}, PushItem{Queue: "r", Payload: []byte("n5")})
	f.clock.Advance(20 * time.Second)
	if n, err := f.e.RetentionSweep(); err != nil || n != 2 {
		t.Fatalf("sweep removed %d, %v", n, err)
	}
	for _, txn := range []string{"del3", "del4"} {
		if ok, err := f.e.DeleteMessage(context.Background(), res[0].PartitionID, txn); !ok || err != nil {
			t.Fatalf("delete %s: %v %v", txn, ok, err)
		}
	}
	// Finished by every group: the tail cache lets them go, browsing reads
	// them from the journal.
	msgs := f.pop(PopRequest{Queue: "r", Group: "g", Batch: 10})
	f.ackMsgs(msgs, Completed)
	p := f.e.queue("r").partition("Default")
	p.st().mu.Lock()
	for i := range p.chunks {
		if p.chunks[i].mem != nil {
			t.Errorf("chunk %d is still in memory", i)
		}
	}
	p.st().mu.Unlock()
	msgs2, gaps, _ := browseAll(t, f.e, BrowseRequest{Queue: "r"})
	if got := strings.Join(msgs2, " ") + " | " + strings.Join(gaps, " "); got != "Default:2=n2 Default:5=n5 | Default:0-1 retention Default:3-4 deleted" {
		t.Errorf("from 0: %s", got)
	}
	p.st().mu.Lock()
	if p.chunks[len(p.chunks)-1].mem != nil {
		t.Error("browsing put a chunk back in memory")
	}
	p.st().mu.Unlock()
	pg, _ := f.e.Browse(BrowseRequest{Queue: "r"})
	if len(pg.Gaps) != 2 || pg.Gaps[0].Before != 0 || pg.Gaps[1].Before != 1 {
		t.Errorf("gaps placed at %+v", pg.Gaps)
	}
	// One entry a page: the deleted run is one gap.
	_, gaps, pages := browseAll(t, f.e, BrowseRequest{Queue: "r", Limit: 1})
	if pages != 4 || len(gaps) != 2 {
		t.Errorf("one entry a page: %d pages, gaps %v", pages, gaps)
	}
	if v, _ := f.e.ViewQueue("r"); v.Partitions[0].Groups[0].Cursor != 6 {
		t.Errorf("cursor %d", v.Partitions[0].Groups[0].Cursor)
	}
}

// TestBrowseWhilePushing: pages read while pushes land hold each offset
// once, in order, with no hole, and the pushes are all seen in the end.
func TestBrowseWhilePushing(t *testing.T) {
	f := newFixture(t)
	const n = 400
	f.push("w", "p", "first")
	var wg sync.WaitGroup
	wg.Add(1)
	defer wg.Wait() // before the fixture's cleanup, also when a check fails
	go func() {
		defer wg.Done()
		for i := 1; i < n; i += 4 {
			if _, err := f.e.Push(context.Background(), []PushItem{{Queue: "w", Partition: "p", Payload: []byte("m")},
				{Queue: "w", Partition: "p", Payload: []byte("m")}, {Queue: "w", Partition: "q", Payload: []byte("m")},
				{Queue: "w", Partition: "q", Payload: []byte("m")}}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	// Whole walks, a page of 7 at a time, while the pushes land: in each,
	// every partition's offsets run from 0 without a hole or a repeat.
	walk := func() int {
		next := map[string]uint64{}
		total := 0
		r := BrowseRequest{Queue: "w", Limit: 7}
		for {
			pg, err := f.e.Browse(r)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range pg.Messages {
				if m.Offset != next[m.Partition] {
					t.Fatalf("%s: offset %d after %d", m.Partition, m.Offset, next[m.Partition])
				}
				next[m.Partition]++
				total++
			}
			if !pg.More {
				return total
			}
			r.Resume, r.ResumeOffset = pg.NextPartition, pg.NextOffset
		}
	}
	for seen := 0; seen < n; {
		got := walk()
		if got < seen {
			t.Fatalf("a walk saw %d messages, the one before %d", got, seen)
		}
		seen = got
	}
	wg.Wait()
	if got := walk(); got != n+1 {
		t.Fatalf("after the pushes: %d messages, want %d", got, n+1)
	}
}
