package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// pageNames walks the queue's partitions page by page (limit each) by
// cursor and returns their names in the order listed, with each page's
// offset.
func pageNames(t *testing.T, e *Engine, q string, limit int, between func(page int)) (names []string, offsets []int) {
	t.Helper()
	var after UUID
	for page := 0; ; page++ {
		pg, err := e.ViewPartitions(q, PageRequest{After: after, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(pg.Partitions) > limit {
			t.Fatalf("page of %d partitions, limit %d", len(pg.Partitions), limit)
		}
		offsets = append(offsets, pg.Offset)
		for _, p := range pg.Partitions {
			names = append(names, p.Name)
		}
		if !pg.More {
			return names, offsets
		}
		if len(pg.Partitions) == 0 {
			t.Fatal("an empty page says more follow")
		}
		after = pg.Partitions[len(pg.Partitions)-1].ID
		if between != nil {
			between(page)
		}
	}
}

// TestViewPartitionsPages: pages by cursor list every partition once, in
// creation order; a partition created during the walk comes at the end,
// one forgotten during it leaves no gap and no repeat; offsets say where
// each page starts.
func TestViewPartitionsPages(t *testing.T) {
	f := newFixture(t)
	f.configure("q", func(o *QueueOptions) { o.RetentionEnabled, o.RetentionSeconds = true, 60 })
	want := []string{"Default"} // Configure made it
	for i := 0; i < 25; i++ {
		name := fmt.Sprintf("p%02d", 24-i) // created in the opposite of name order
		f.push("q", name, "x")
		want = append(want, name)
	}
	names, offsets := pageNames(t, f.e, "q", 10, nil)
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("listed %v, want creation order %v", names, want)
	}
	if fmt.Sprint(offsets) != "[0 10 20]" {
		t.Errorf("page offsets %v", offsets)
	}

	// During a walk: a new partition, and the first page's last partition
	// (the cursor) forgotten by retention.
	f.clock.Advance(2 * time.Minute)
	for _, n := range want {
		if n != want[9] {
			f.push("q", n, "busy") // the others stay busy
		}
	}
	names, _ = pageNames(t, f.e, "q", 10, func(page int) {
		if page != 0 {
			return
		}
		f.push("q", "late", "x")
		f.e.RetentionSweep() // empties want[9]
		f.clock.Advance(ForgetIdleAfter)
		for _, n := range want {
			if n != want[9] {
				f.push("q", n, "busy")
			}
		}
		f.e.RetentionSweep() // forgets it
		if _, err := f.e.ViewPartition("q", want[9]); !errors.Is(err, ErrPartitionNotFound) {
			t.Fatalf("%s is not forgotten: %v", want[9], err)
		}
	})
	// Listed once each: the cursor's partition (listed before it went), and
	// the new one at the end.
	wantNow := append(append([]string(nil), want...), "late")
	if strings.Join(names, ",") != strings.Join(wantNow, ",") {
		t.Fatalf("walk during changes listed %v, want %v", names, wantNow)
	}
	live := append(append(append([]string(nil), want[:9]...), want[10:]...), "late")
	if names, _ := pageNames(t, f.e, "q", 7, nil); strings.Join(names, ",") != strings.Join(live, ",") {
		t.Fatalf("after the changes listed %v, want %v", names, live)
	}

	// Offset, and offset with a cursor.
	pg, err := f.e.ViewPartitions("q", PageRequest{Offset: 3, Limit: 2})
	if err != nil || pg.Offset != 3 || pg.Total != len(live) || !pg.More || pg.Partitions[0].Name != live[3] || pg.Partitions[1].Name != live[4] {
		t.Fatalf("offset 3: %+v %v", pg, err)
	}
	pg, _ = f.e.ViewPartitions("q", PageRequest{After: pg.Partitions[1].ID, Offset: 1, Limit: 100})
	if pg.Offset != 6 || len(pg.Partitions) != len(live)-6 || pg.Partitions[0].Name != live[6] || pg.More {
		t.Fatalf("after %s, offset 1: offset %d, %d partitions, more %v", live[4], pg.Offset, len(pg.Partitions), pg.More)
	}
	if pg, _ := f.e.ViewPartitions("q", PageRequest{Offset: 1000}); len(pg.Partitions) != 0 || pg.More || pg.Total != len(live) {
		t.Fatalf("past the end: %+v", pg)
	}

	// Cursors of other queues, and bad requests.
	other := f.push("other", "x", "y")
	if _, err := f.e.ViewPartitions("q", PageRequest{After: other[0].PartitionID}); !errors.Is(err, ErrInvalid) {
		t.Errorf("another queue's partition as cursor: %v", err)
	}
	if _, err := f.e.ViewPartitions("q", PageRequest{Offset: -1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative offset: %v", err)
	}
	if _, err := f.e.ViewPartitions("nope", PageRequest{}); !errors.Is(err, ErrQueueNotFound) {
		t.Errorf("no queue: %v", err)
	}
}

func TestPageLimit(t *testing.T) {
	for _, c := range []struct{ in, want int }{{0, 1000}, {-5, 1000}, {1, 1}, {10_000, 10_000}, {10_001, 10_000}, {1 << 40, 10_000}} {
		if got := PageLimit(c.in, DefaultPartitionPage, MaxPartitionPage); got != c.want {
			t.Errorf("PageLimit(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

// TestPartitionPageIsCapped: a page never holds more than MaxPartitionPage
// partitions, and a request that names no limit gets DefaultPartitionPage.
func TestPartitionPageIsCapped(t *testing.T) {
	f := newFixture(t)
	items := make([]PushItem, MaxPartitionPage+1)
	for i := range items {
		items[i] = PushItem{Queue: "big", Partition: fmt.Sprint(i), Payload: []byte("x")}
	}
	f.pushItems(items...)
	for _, c := range []struct{ limit, want int }{{0, DefaultPartitionPage}, {1 << 30, MaxPartitionPage}} {
		pg, err := f.e.ViewPartitions("big", PageRequest{Limit: c.limit})
		if err != nil || len(pg.Partitions) != c.want || !pg.More || pg.Total != len(items) {
			t.Errorf("limit %d: %d partitions (more %v, total %d), want %d: %v", c.limit, len(pg.Partitions), pg.More, pg.Total, c.want, err)
		}
	}
}

// TestEachPartitionCostsNoMemoryPerPartition: walking a queue allocates the
// same whether it has 100 or 5,000 partitions (the view is reused and the
// partition table is never copied whole).
func TestEachPartitionCostsNoMemoryPerPartition(t *testing.T) {
	f := newFixture(t)
	for _, q := range []struct {
		name string
		n    int
	}{{"small", 100}, {"large", 5000}} {
		items := make([]PushItem, q.n)
		for i := range items {
			items[i] = PushItem{Queue: q.name, Partition: fmt.Sprint(i), Payload: []byte("x")}
		}
		f.pushItems(items...)
		f.pop(PopRequest{Queue: q.name, Group: "g", Batch: 1})
		f.pop(PopRequest{Queue: q.name, Group: "h", Batch: 1})
	}
	walk := func(name string) (n int, bytes float64) {
		var sum uint64
		allocs := testing.AllocsPerRun(5, func() {
			n = 0
			f.e.EachPartition(name, func(p *PartitionView) bool {
				n++
				for _, g := range p.Groups {
					sum += g.Cursor
				}
				return true
			})
		})
		return n, allocs
	}
	ns, small := walk("small")
	nl, large := walk("large")
	if ns != 100 || nl != 5000 {
		t.Fatalf("walked %d and %d partitions", ns, nl)
	}
	if large > small+2 || large > 16 {
		t.Errorf("a walk of 5,000 partitions allocates %.0f times, one of 100 %.0f: the cost grows with the queue", large, small)
	}
	// QueueSummary (the binary protocol's queue figures) walks the same way.
	allocs := testing.AllocsPerRun(5, func() { f.e.QueueSummary("large") })
	if allocs > 16 {
		t.Errorf("QueueSummary of 5,000 partitions allocates %.0f times", allocs)
	}
}

// TestQueueSummaryMatchesQueue: the streamed figures are those of the
// whole description.
func TestQueueSummaryMatchesQueue(t *testing.T) {
	f := newFixture(t)
	f.push("s", "a", nums(5)...)
	f.push("s", "b", nums(3)...)
	f.pop(PopRequest{Queue: "s", Group: "g", Batch: 2})
	full, _ := f.e.Queue("s")
	sum, err := f.e.QueueSummary("s")
	if err != nil || sum.PartitionList != nil || sum.Partitions != full.Partitions || sum.Messages != full.Messages ||
		strings.Join(sum.Groups, ",") != strings.Join(full.Groups, ",") || sum.DeadLetters != full.DeadLetters {
		t.Fatalf("summary %+v, full %+v (%v)", sum, full, err)
	}
	head, err := f.e.ViewQueueHead("s")
	if err != nil || head.PartitionCount != 2 || head.Partitions != nil || len(head.Groups) != 1 {
		t.Fatalf("head %+v %v", head, err)
	}
	if _, err := f.e.QueueSummary("nope"); !errors.Is(err, ErrQueueNotFound) {
		t.Errorf("QueueSummary(nope): %v", err)
	}
}

// TestDeadLetterIndexes: the payload-free dead-letter figures agree with
// the listing.
func TestDeadLetterIndexes(t *testing.T) {
	f := newFixture(t)
	f.push("d", "a", nums(4)...)
	f.push("d", "b", nums(2)...)
	f.push("d", "c", "x")
	var dead []Message
	for _, p := range []string{"a", "b"} {
		msgs := f.pop(PopRequest{Queue: "d", Partition: p, Group: "g", Batch: 2})
		f.ackMsgs(msgs, DLQ)
		dead = append(dead, msgs...)
	}
	refs := f.e.DeadLetterRefs("d")
	if len(refs) != 4 {
		t.Fatalf("refs %v", refs)
	}
	for _, m := range dead {
		if !HasRef(refs, MessageRef{m.PartitionID, m.Offset}) {
			t.Errorf("%s/%d not found among the refs", m.Partition, m.Offset)
		}
	}
	if HasRef(refs, MessageRef{dead[0].PartitionID, 3}) {
		t.Error("a message never dead-lettered is found")
	}
	a, b := dead[0].PartitionID, dead[2].PartitionID
	c, _ := f.e.ViewPartition("d", "c")
	if got := f.e.DeadLetterCounts("d", []UUID{c.ID, b, a}); fmt.Sprint(got) != "[0 2 2]" {
		t.Errorf("counts %v", got)
	}
	if n := f.e.DeadLetterPartitions("d"); n != 2 {
		t.Errorf("%d partitions with dead letters", n)
	}
	d, ok := f.e.DeadLetterOf(a, 1)
	if !ok || d.Message.Offset != 1 || d.Message.Group != "g" || d.Message.Payload != nil || d.FailedAt == 0 {
		t.Errorf("DeadLetterOf: %+v %v", d, ok)
	}
	if _, ok := f.e.DeadLetterOf(a, 2); ok {
		t.Error("DeadLetterOf a message not dead-lettered")
	}
}

// TestDLQPagesAreBounded: a huge limit is capped at MaxDLQPage, and
// MaxBytes cuts a page of large entries (the first always listed) while
// the total still counts every match.
func TestDLQPagesAreBounded(t *testing.T) {
	f := newFixture(t)
	payload := strings.Repeat("p", 1000)
	for i := 0; i < MaxDLQPage+5; i += 1000 {
		n := min(1000, MaxDLQPage+5-i)
		items := make([]PushItem, n)
		for k := range items {
			items[k] = PushItem{Queue: "d", Partition: "p", Payload: []byte(payload)}
		}
		f.pushItems(items...)
		f.ackMsgs(f.pop(PopRequest{Queue: "d", Group: "g", Batch: n}), DLQ)
	}
	entries, total, err := f.e.DLQ(DLQFilter{Queue: "d", Limit: 1 << 30})
	if err != nil || total != MaxDLQPage+5 || len(entries) != MaxDLQPage {
		t.Fatalf("limit 2^30: %d entries of %d: %v", len(entries), total, err)
	}
	if entries, _, _ := f.e.DLQ(DLQFilter{Queue: "d"}); len(entries) != DefaultDLQPage {
		t.Errorf("no limit: %d entries", len(entries))
	}
	one := entries[0].Size()
	if one < 1000+DLQEntryFixed {
		t.Fatalf("entry size %d", one)
	}
	entries, total, _ = f.e.DLQ(DLQFilter{Queue: "d", Limit: 100, Offset: 7, MaxBytes: 3*one + one/2})
	if len(entries) != 3 || total != MaxDLQPage+5 || entries[0].Message.Offset != 7 {
		t.Errorf("MaxBytes of 3.5 entries: %d entries (first at %d) of %d", len(entries), entries[0].Message.Offset, total)
	}
	if entries, _, _ := f.e.DLQ(DLQFilter{Queue: "d", Limit: 100, MaxBytes: 1}); len(entries) != 1 {
		t.Errorf("MaxBytes below one entry: %d entries, want the first alone", len(entries))
	}
}
