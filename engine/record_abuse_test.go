package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Fuzz targets for what the engine reads back from the journal: records
// (applyRecord, readPush, readEffect, readDead, readOptions) and snapshots
// (loadSnapshot). The journal's CRC makes damaged records rare, but a bug in
// a writer, a forged file or a salvage must never crash recovery or the
// engine that comes out of it: New either refuses with an error or returns
// an engine whose every read path works.

var silent = slog.New(slog.NewTextHandler(io.Discard, nil))

// splitRecords reads records framed as uvarint(len) | bytes; a bad frame
// ends the list.
func splitRecords(data []byte) [][]byte {
	var recs [][]byte
	for len(data) > 0 && len(recs) < 256 {
		n, k := binary.Uvarint(data)
		if k <= 0 || n > uint64(len(data)-k) {
			recs = append(recs, data)
			break
		}
		recs = append(recs, data[k:k+int(n)])
		data = data[k+int(n):]
	}
	return recs
}

func joinRecords(recs [][]byte) []byte {
	var b []byte
	for _, r := range recs {
		b = binary.AppendUvarint(b, uint64(len(r)))
		b = append(b, r...)
	}
	return b
}

// seedJournal runs a little of everything on an in-memory journal and
// returns its records and a snapshot taken half way.
func seedJournal(tb testing.TB) (recs [][]byte, snap []byte) {
	tb.Helper()
	j := newMemJournal()
	defer j.close()
	clock := NewFakeClock(time.Unix(1_800_000_000, 0))
	e, err := New(Config{Clock: clock, NoTicker: true, Stripes: 2, SnapshotEveryBytes: -1, Logger: silent}, j)
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	o := DefaultQueueOptions()
	o.RetryLimit, o.RetryDelay = 1, time.Second
	e.Configure(context.Background(), "q", o)
	var items []PushItem
	for i := 0; i < 6; i++ {
		items = append(items, PushItem{Queue: "q", Partition: fmt.Sprint("p", i%2), TransactionID: fmt.Sprint("t", i), TraceID: "tr", Payload: []byte(fmt.Sprint("payload-", i))})
	}
	e.Push(ctx, items)
	ms, _ := e.Pop(ctx, PopRequest{Queue: "q", Group: "g", Batch: 3})
	var acks []AckItem
	for i, m := range ms {
		acks = append(acks, AckItem{PartitionID: m.PartitionID, HasOffset: true, Offset: m.Offset, LeaseID: m.LeaseID, Group: "g",
			Status: []AckStatus{Completed, DLQ, FailedAck}[i%3], Error: "boom"})
	}
	e.Ack(ctx, acks)
	e.Snapshot()
	j.mu.Lock()
	snap = append([]byte(nil), j.snap...)
	j.mu.Unlock()
	ms, _ = e.Pop(ctx, PopRequest{Queue: "q", Group: "h", Batch: 10, Partitions: 2})
	if len(ms) > 0 {
		m := ms[0]
		e.Transaction(ctx, []AckItem{{PartitionID: m.PartitionID, HasOffset: true, Offset: m.Offset, LeaseID: m.LeaseID, Group: "h", Status: Completed}},
			[]PushItem{{Queue: "out", Payload: []byte("result")}})
	}
	e.DeleteGroup(context.Background(), "q", "h")
	e.Configure(context.Background(), "gone", o)
	e.DeleteQueue(context.Background(), "gone")
	e.Close()
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([][]byte(nil), j.recs...), snap
}

// recoverFrom runs New over a journal holding snap (if any) and recs, and
// when it succeeds exercises the recovered engine's read paths. It must
// never panic.
func recoverFrom(snap []byte, recs [][]byte) {
	j := newMemJournal()
	defer j.close()
	j.recs = recs
	if snap != nil {
		j.snap, j.hasSnap = snap, true
	}
	clock := NewFakeClock(time.Unix(1_800_000_000, 0))
	e, err := New(Config{Clock: clock, NoTicker: true, Stripes: 2, SnapshotEveryBytes: -1, MaxPopBatch: 100, Logger: silent}, j)
	if err != nil {
		return
	}
	defer e.Close()
	ctx := context.Background()
	for _, q := range e.Queues() {
		e.Pop(ctx, PopRequest{Queue: q.Name, Group: "fuzz", Batch: 100, Partitions: 8})
		info, _ := e.Queue(q.Name)
		for _, p := range info.PartitionList {
			e.ScanMessages(q.Name, p.Name, 0, 0, func(*Message) bool { return true })
		}
	}
	e.DLQ(DLQFilter{Limit: 100})
	e.ViewQueues()
	clock.Advance(time.Hour)
	e.Tick()
	e.Snapshot()
}

// FuzzRecoverRecords replays arbitrary journal records (uvarint-framed in
// the input): recovery refuses them or yields a working engine.
func FuzzRecoverRecords(f *testing.F) {
	recs, _ := seedJournal(f)
	f.Add(joinRecords(recs))
	for i := range recs {
		f.Add(joinRecords(recs[:i+1]))
		f.Add(joinRecords([][]byte{recs[0], recs[i]}))
	}
	f.Add([]byte{})
	f.Add(joinRecords([][]byte{{recTxn, 1, 1, recBarrier}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		recoverFrom(nil, splitRecords(data))
	})
}

// FuzzRecoverSnapshot loads an arbitrary snapshot (and the seed's records
// after it): recovery refuses it or yields a working engine.
func FuzzRecoverSnapshot(f *testing.F) {
	recs, snap := seedJournal(f)
	f.Add(snap)
	for _, n := range []int{1, 8, len(snap) / 2, len(snap) - 1} {
		if n > 0 && n < len(snap) {
			f.Add(snap[:n])
		}
	}
	tail := recs[len(recs)-3:]
	f.Fuzz(func(t *testing.T, data []byte) {
		recoverFrom(data, nil)
		recoverFrom(data, tail)
	})
}

// TestRecoverFromDamagedRecords mutates every byte of every seed record
// (a deterministic complement to the fuzz targets, run every time).
func TestRecoverFromDamagedRecords(t *testing.T) {
	recs, snap := seedJournal(t)
	for i := range recs {
		for k := 0; k < len(recs[i]); k++ {
			bad := append([][]byte(nil), recs...)
			bad[i] = append([]byte(nil), recs[i]...)
			bad[i][k] ^= []byte{0x01, 0x80, 0xff}[k%3]
			recoverFrom(nil, bad)
		}
		recoverFrom(nil, append(append([][]byte(nil), recs[:i]...), recs[i][:len(recs[i])/2]))
	}
	for k := 0; k < len(snap); k++ {
		bad := append([]byte(nil), snap...)
		bad[k] ^= 0x55
		recoverFrom(bad, nil)
	}
}

// TestHugePartitionNumberCostsNothing: a push record naming partition 2^40
// (forged, or a partition created after a long churn of forgotten ones)
// recovers at once, holds one partition, and new partitions number after it.
func TestHugePartitionNumberCostsNothing(t *testing.T) {
	f := newFixture(t)
	f.push("q", "p0", "a")
	q := f.e.queue("q")
	fake := &partition{q: q, seq: 1 << 40, name: "far"}
	rec := appendPushHeader(nil, recPush, fake, 0, 1, 0, "", 0)
	f.j.mu.Lock()
	f.j.recs = append(f.j.recs, rec)
	f.j.mu.Unlock()
	start := time.Now()
	f.restart()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("recovery took %v", d)
	}
	q = f.e.queue("q")
	q.mu.RLock()
	n, far := len(q.parts), q.partAt(1<<40)
	q.mu.RUnlock()
	if n != 2 || far == nil || far.name != "far" {
		t.Fatalf("after recovery: %d partitions, far=%v", n, far)
	}
	f.push("q", "p1", "b")
	q.mu.RLock()
	p1 := q.byName.get("p1")
	q.mu.RUnlock()
	if p1 == nil || p1.seq != 1<<40+1 {
		t.Fatalf("new partition after the far one: %+v", p1)
	}
	f.restart()
	wantPayloads(t, f.pop(PopRequest{Queue: "q", Partition: "p1", Batch: 10}), "b")
	wantPayloads(t, f.pop(PopRequest{Queue: "q", Partition: "p0", Batch: 10}), "a")
}

// TestForgottenPartitionsAreCompacted: forgetting leaves a hole found by
// number as nil; once holes are most of the table it is compacted; new
// partitions keep numbering after the highest ever given.
func TestForgottenPartitionsAreCompacted(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 100; i++ {
		f.push("q", fmt.Sprint("p", i), "m")
	}
	q := f.e.queue("q")
	q.mu.RLock()
	all := append([]*partition(nil), q.parts...)
	q.mu.RUnlock()
	for _, p := range all[:60] {
		f.e.forget(p)
	}
	q.mu.RLock()
	n, holes := len(q.parts), q.holes
	gone, kept := q.partAt(all[10].seq), q.partAt(all[70].seq)
	q.mu.RUnlock()
	if gone != nil || kept != all[70] {
		t.Fatalf("partAt after forgetting: %v, %v", gone, kept)
	}
	if n != 40+holes || holes >= 51 {
		t.Fatalf("%d entries with %d holes: not compacted", n, holes)
	}
	f.push("q", "p10", "again") // the name is free: a new partition
	q.mu.RLock()
	p := q.byName.get("p10")
	q.mu.RUnlock()
	if p == nil || p.seq != all[99].seq+1 {
		t.Fatalf("recreated p10: %+v", p)
	}
}

// TestPartitionCreatedFarBackIsRefused: a record creating a partition far
// behind the newest (never written by the engine: creations are reordered
// only by as many as run at once) is reported as damage, not inserted at a
// cost of a table copy per record.
func TestPartitionCreatedFarBackIsRefused(t *testing.T) {
	f := newFixture(t)
	items := make([]PushItem, maxCreationReorder+10)
	for i := range items {
		items[i] = PushItem{Queue: "q", Partition: fmt.Sprint("p", i), Payload: []byte("m")}
	}
	if _, err := f.e.Push(context.Background(), items); err != nil {
		t.Fatal(err)
	}
	q := f.e.queue("q")
	q.mu.RLock()
	old := q.parts[0]
	q.mu.RUnlock()
	f.e.forget(old)
	fake := &partition{q: q, seq: old.seq, name: "back"}
	f.j.mu.Lock()
	f.j.recs = append(f.j.recs, encodeForget(old), appendPushHeader(nil, recPush, fake, 0, 1, 0, "", 0))
	f.j.mu.Unlock()
	j := f.j.reopen()
	f.e.Close()
	defer j.close()
	_, err := New(Config{Clock: f.clock, NoTicker: true, Logger: silent}, j)
	if !errors.Is(err, errCorruptRecord) || !strings.Contains(err.Error(), "places back") {
		t.Fatalf("recovery: %v, want a corrupt record created far back", err)
	}
}

// TestDedupPastOffset2To32SurvivesASnapshot: a partition whose remembered
// transactionIds sit past offset 2^32 keeps answering duplicates with the
// right offset after a snapshot is loaded.
func TestDedupPastOffset2To32SurvivesASnapshot(t *testing.T) {
	f := newFixture(t)
	f.push("q", "p", "a")
	q := f.e.queue("q")
	p := q.byName.get("p")
	p.st().mu.Lock()
	p.dedup = &dedupIndex{}
	p.dedup.put(fingerprint("far"), 5<<32, 5<<32)
	p.st().mu.Unlock()
	b, _, _ := f.e.encodeSnapshot()
	j2 := newMemJournal()
	defer j2.close()
	e2, err := New(Config{Clock: f.clock, NoTicker: true, Logger: silent}, j2)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	if err := e2.loadSnapshot(b); err != nil {
		t.Fatal(err)
	}
	p2 := e2.queue("q").byName.get("p")
	if off, ok := p2.dedup.get(fingerprint("far")); !ok || off != 5<<32 {
		t.Fatalf("after loading the snapshot: %d %v, want %d", off, ok, uint64(5<<32))
	}
}
