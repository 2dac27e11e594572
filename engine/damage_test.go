package engine_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
)

// Damage away from the tail of the journal, seen by the engine: refused at
// start; salvaged, a running engine that delivers every message that
// survived, never fails a pop for it, and says what was lost.

// dmgSegBytes keeps segments small, so that a journal of a few hundred
// pushes spans many of them.
const dmgSegBytes = 4 << 10

// logBuf is a slog handler that keeps what was logged.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// dmgNode is a journal and an engine on a damaged (or to be damaged)
// directory.
type dmgNode struct {
	j   *log.Log
	e   *engine.Engine
	out *logBuf
}

func openDamaged(dir string, salvage bool) (*dmgNode, error) {
	n := &dmgNode{out: &logBuf{}}
	logger := slog.New(slog.NewTextHandler(n.out, nil))
	j, err := log.Open(log.Config{Dir: dir, SegmentBytes: dmgSegBytes, Salvage: salvage, Logger: logger})
	if err != nil {
		return nil, err
	}
	e, err := engine.New(engine.Config{NoTicker: true, SnapshotEveryBytes: -1, CacheBytes: 1, Logger: logger}, j)
	if err != nil {
		j.Close()
		return nil, err
	}
	n.j, n.e = j, e
	return n, nil
}

func (n *dmgNode) close() {
	n.e.Close()
	n.j.Close()
}

// dmgPayload is the payload pushed at an offset of a partition.
func dmgPayload(part string, off uint64) string {
	return fmt.Sprintf("%s-%04d-%s", part, off, strings.Repeat("x", 60))
}

var dmgParts = []string{"p0", "p1", "p2"}

// buildDamageJournal pushes 240 messages into three partitions of queue "q"
// (one push record, one WAL entry each), has group "g" consume part of them
// after each 120 (acks, some dlq), takes a snapshot after each push count
// in snapAfter, and leaves the journal as a crash does (no final
// snapshot). It returns how many messages each partition holds.
func buildDamageJournal(t *testing.T, dir string, snapAfter ...int) map[string]uint64 {
	t.Helper()
	n, err := openDamaged(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := n.e.Configure(ctx, "q", engine.DefaultQueueOptions()); err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	pushed := 0
	for round := 0; round < 2; round++ {
		if round > 0 { // the queue's options again, in a later entry
			if _, err := n.e.Configure(ctx, "q", engine.DefaultQueueOptions()); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 120; i++ {
			p := dmgParts[i%len(dmgParts)]
			res, err := n.e.Push(ctx, []engine.PushItem{{Queue: "q", Partition: p, Payload: []byte(dmgPayload(p, counts[p]))}})
			if err != nil || res[0].Err != nil || res[0].Offset != counts[p] {
				t.Fatalf("push: %+v %v", res, err)
			}
			counts[p]++
			pushed++
			if slices.Contains(snapAfter, pushed) {
				if err := n.e.Snapshot(); err != nil {
					t.Fatal(err)
				}
			}
		}
		ms, err := n.e.Pop(ctx, engine.PopRequest{Queue: "q", Group: "g", Batch: 40, Partitions: 3})
		if err != nil {
			t.Fatal(err)
		}
		var acks []engine.AckItem
		for i, m := range ms {
			st := engine.Completed
			if i%7 == 1 {
				st = engine.DLQ
			}
			acks = append(acks, engine.AckItem{PartitionID: m.PartitionID, HasOffset: true, Offset: m.Offset, LeaseID: m.LeaseID, Group: "g", Status: st, Error: "dmg"})
		}
		if _, err := n.e.Ack(ctx, acks); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.j.Close(); err != nil { // no engine Close: no snapshot at the end
		t.Fatal(err)
	}
	return counts
}

// walSegments lists the segment files of dir, ascending.
func walSegments(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "wal", strings.Repeat("[0-9]", 20)))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return files
}

// walFrames splits a segment file into its entries' frames [start, end).
func walFrames(t *testing.T, data []byte) [][2]int {
	t.Helper()
	var out [][2]int
	for off := 0; off < len(data); {
		size, k := binary.Uvarint(data[off:])
		if k <= 0 || off+k+int(size) > len(data) {
			t.Fatalf("segment does not parse at %d", off)
		}
		out = append(out, [2]int{off, off + k + int(size)})
		off += k + int(size)
	}
	return out
}

func damageFile(t *testing.T, path string, f func(data []byte, fr [][2]int) []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(data, walFrames(t, data)), 0o640); err != nil {
		t.Fatal(err)
	}
}

// engineDamages are the damages of an older segment (never the last one),
// each on a journal with a snapshot after 120 pushes unless it says.
var engineDamages = []struct {
	name      string
	damage    func(t *testing.T, segs []string)
	snapAfter []int
}{
	{"segment-missing", func(t *testing.T, segs []string) {
		if err := os.Remove(segs[len(segs)/2]); err != nil {
			t.Fatal(err)
		}
	}, nil},
	{"first-segment-missing", func(t *testing.T, segs []string) {
		// No snapshot: the journal looks truncated, and the engine knows it
		// never truncates without one. The queue's and the group's creation
		// are lost: the queue gets its name back from a later record.
		if err := os.Remove(segs[0]); err != nil {
			t.Fatal(err)
		}
	}, []int{}},

	{"flipped", func(t *testing.T, segs []string) { // before the snapshot: read back, not replayed
		damageFile(t, segs[1], func(d []byte, fr [][2]int) []byte {
			d[(fr[1][0]+fr[1][1])/2] ^= 0x40
			return d
		})
	}, nil},
	{"zeroed", func(t *testing.T, segs []string) {
		damageFile(t, segs[len(segs)/2-1], func(d []byte, fr [][2]int) []byte {
			clear(d[(fr[0][0]+fr[0][1])/2 : (fr[2][0]+fr[2][1])/2])
			return d
		})
	}, nil},
	{"truncated", func(t *testing.T, segs []string) { // after the snapshot: replayed
		damageFile(t, segs[len(segs)-2], func(d []byte, fr [][2]int) []byte {
			return d[:(fr[1][0]+fr[1][1])/2]
		})
	}, nil},
}

// drain reads every partition of "q" through a fresh autoAck group, by
// partition, and checks that each offset below the partition's next is
// delivered once with its payload or listed as lost, and nothing else. It
// returns how many were delivered, listed lost, and unknown: pushed at the
// end of a partition in entries that were lost, after which no surviving
// record names the partition (nothing tells the engine they existed; the
// partition goes on from its last surviving offset).
func drain(t *testing.T, e *engine.Engine, counts map[string]uint64, group string) (delivered, lost, unknown uint64) {
	t.Helper()
	qi, err := e.Queue("q")
	if err != nil {
		t.Fatal(err)
	}
	lostSet := map[string]bool{}
	next := map[string]uint64{}
	for _, pi := range qi.PartitionList {
		next[pi.Name] = pi.Next
		if pi.Next > counts[pi.Name] {
			t.Fatalf("%s: next offset %d, but %d were pushed", pi.Name, pi.Next, counts[pi.Name])
		}
		unknown += counts[pi.Name] - pi.Next
		for _, r := range pi.Lost {
			if r.Last < r.First || r.Last >= pi.Next {
				t.Fatalf("%s: lost range %v out of the partition (next %d)", pi.Name, r, pi.Next)
			}
			for off := r.First; off <= r.Last; off++ {
				lostSet[fmt.Sprint(pi.Name, "/", off)] = true
				lost++
			}
		}
	}
	if qi.LostMessages != lost {
		t.Fatalf("QueueInfo.LostMessages %d, the partitions list %d", qi.LostMessages, lost)
	}
	var span uint64
	for _, pi := range qi.PartitionList {
		span += pi.Next - pi.Low
	}
	if qi.Messages != span-lost {
		t.Fatalf("QueueInfo.Messages %d, want the %d offsets held less the %d lost", qi.Messages, span, lost)
	}
	ctx := context.Background()
	for _, p := range dmgParts {
		seen := map[uint64]bool{}
		for {
			ms, err := e.Pop(ctx, engine.PopRequest{Queue: "q", Partition: p, Group: group, Batch: 50, AutoAck: true})
			if err != nil {
				t.Fatalf("pop of %s: %v", p, err)
			}
			if len(ms) == 0 {
				break
			}
			for _, m := range ms {
				if string(m.Payload) != dmgPayload(p, m.Offset) || seen[m.Offset] || lostSet[fmt.Sprint(p, "/", m.Offset)] {
					t.Fatalf("%s offset %d: delivered %.20q (seen before %v, listed lost %v)", p, m.Offset, m.Payload, seen[m.Offset], lostSet[fmt.Sprint(p, "/", m.Offset)])
				}
				seen[m.Offset] = true
				delivered++
			}
		}
		for off := uint64(0); off < next[p]; off++ {
			if !seen[off] && !lostSet[fmt.Sprint(p, "/", off)] {
				t.Fatalf("%s offset %d neither delivered nor listed lost", p, off)
			}
		}
	}
	return delivered, lost, unknown
}

// TestDamagedJournalRefusedThenSalvaged: each damage of an older segment
// (missing, flipped, zeroed, truncated) makes the start refuse with
// log.ErrCorrupt naming salvage. With salvage, the engine starts; every
// message that survived is delivered once, with its payload, to a fresh
// group reading partition by partition and to one reading any partition;
// no pop fails; every other offset is listed as lost
// (PartitionInfo.Lost) and logged with its queue and partition at start;
// some were. Restarted without salvage, it is the same.
func TestDamagedJournalRefusedThenSalvaged(t *testing.T) {
	for _, tc := range engineDamages {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			snaps := []int{120}
			if tc.snapAfter != nil {
				snaps = tc.snapAfter
			}
			counts := buildDamageJournal(t, dir, snaps...)
			segs := walSegments(t, dir)
			if len(segs) < 6 {
				t.Fatalf("want at least 6 segments, have %d", len(segs))
			}
			tc.damage(t, segs)

			if _, err := openDamaged(dir, false); !errors.Is(err, log.ErrCorrupt) || !strings.Contains(err.Error(), "salvage") {
				t.Fatalf("start on a damaged journal: %v, want log.ErrCorrupt naming salvage", err)
			}

			n, err := openDamaged(dir, true)
			if err != nil {
				t.Fatalf("start with salvage: %v", err)
			}
			delivered, lost, unknown := drain(t, n.e, counts, "reader")
			if lost+unknown == 0 || delivered == 0 {
				t.Fatalf("delivered %d, lost %d: the damage should have cost messages", delivered, lost)
			}
			t.Logf("%s: %d delivered, %d listed lost, %d unknown (pushed last into a partition, in lost entries)", tc.name, delivered, lost, unknown)
			out := n.out.String()
			if (lost > 0 && (!strings.Contains(out, "recovery SALVAGE: messages lost to journal damage") || !strings.Contains(out, "queue=q partition=p"))) ||
				!strings.Contains(out, fmt.Sprintf("lost_messages=%d", lost)) {
				t.Fatalf("loss not reported:\n%s", out)
			}
			// Any partition: the same survivors, no error.
			got := 0
			for {
				ms, err := n.e.Pop(context.Background(), engine.PopRequest{Queue: "q", Group: "any", Batch: 40, Partitions: 3, AutoAck: true})
				if err != nil {
					t.Fatalf("pop of any partition: %v", err)
				}
				if len(ms) == 0 {
					break
				}
				got += len(ms)
			}
			if uint64(got) != delivered {
				t.Fatalf("a pop of any partition delivered %d, by partition %d", got, delivered)
			}
			if st := n.e.Stats(); st.ReadErrors != 0 {
				t.Fatalf("%d read errors after the salvage", st.ReadErrors)
			}
			n.close()

			n, err = openDamaged(dir, false)
			if err != nil {
				t.Fatalf("restart without salvage: %v", err)
			}
			defer n.close()
			d2, l2, _ := drain(t, n.e, counts, "later")
			if d2 != delivered || l2 != lost {
				t.Fatalf("after a restart: delivered %d, lost %d; before %d, %d", d2, l2, delivered, lost)
			}
		})
	}
}

// TestEverySnapshotDamagedWALWhole: both snapshots are damaged, the WAL
// holds every entry from 1. The start refuses, naming salvage; with
// salvage, the state is rebuilt from the WAL alone with nothing lost: every
// message there, group g's cursors, acks and dead letters as they were.
func TestEverySnapshotDamagedWALWhole(t *testing.T) {
	dir := t.TempDir()
	counts := buildDamageJournal(t, dir, 1, 6) // both while the WAL is one segment: it is kept whole
	ref, err := openDamaged(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if ref.j.FirstIndex() != 1 {
		t.Fatalf("the WAL starts at entry %d, want 1", ref.j.FirstIndex())
	}
	want, _ := ref.e.Queue("q")
	wantDLQ, _, _ := ref.e.DLQ(engine.DLQFilter{Queue: "q"})
	ref.e = nil
	ref.j.Close() // no engine Close: the snapshots stay as they are
	snaps, _ := filepath.Glob(filepath.Join(dir, "snap", "*.rsnap"))
	if len(snaps) != 2 {
		t.Fatalf("snapshots: %v", snaps)
	}
	for _, s := range snaps {
		data, _ := os.ReadFile(s)
		data[len(data)/2] ^= 0x01
		if err := os.WriteFile(s, data, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := openDamaged(dir, false); !errors.Is(err, log.ErrCorrupt) || !strings.Contains(err.Error(), "salvage") {
		t.Fatalf("start with every snapshot damaged: %v, want log.ErrCorrupt naming salvage", err)
	}
	n, err := openDamaged(dir, true)
	if err != nil {
		t.Fatalf("start with salvage: %v", err)
	}
	defer n.close()
	got, _ := n.e.Queue("q")
	if got.LostMessages != 0 || got.Messages != want.Messages || len(got.PartitionList) != len(want.PartitionList) {
		t.Fatalf("rebuilt queue: %d messages, %d lost; want %d", got.Messages, got.LostMessages, want.Messages)
	}
	for i, pi := range got.PartitionList {
		if fmt.Sprint(pi.Groups) != fmt.Sprint(want.PartitionList[i].Groups) || pi.Next != want.PartitionList[i].Next {
			t.Fatalf("partition %s: %+v, want %+v", pi.Name, pi, want.PartitionList[i])
		}
	}
	if dlq, _, _ := n.e.DLQ(engine.DLQFilter{Queue: "q"}); len(dlq) != len(wantDLQ) || len(dlq) == 0 {
		t.Fatalf("DLQ: %d entries, want %d", len(dlq), len(wantDLQ))
	}
	if delivered, lost, unknown := drain(t, n.e, counts, "reader"); lost+unknown != 0 || delivered != counts["p0"]+counts["p1"]+counts["p2"] {
		t.Fatalf("delivered %d, lost %d, unknown %d", delivered, lost, unknown)
	}
	if !strings.Contains(n.out.String(), "no usable snapshot") {
		t.Fatalf("the snapshots set aside are not reported:\n%s", n.out.String())
	}
}

// TestEverySnapshotDamagedWALTruncated: both snapshots are damaged, and
// the WAL no longer holds its first entries (dropped after a snapshot). The
// start refuses, naming salvage; with salvage, the state is rebuilt from
// the WAL that is left: the queue is there, and every offset is delivered
// or listed lost, none unknown. The messages whose push records were
// dropped come back from the copies that compaction wrote forward before
// the drop (move records): before recoverLost, the first copy took the
// whole lost range's place and a pop panicked (index out of range). No pop
// fails; a restart without salvage is the same.
func TestEverySnapshotDamagedWALTruncated(t *testing.T) {
	for _, tc := range []struct {
		name     string
		moveLost bool // the segment holding the first copy is gone too
	}{{"snapshots", false}, {"snapshots-and-a-copy", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			counts := buildDamageJournal(t, dir, 120, 200)
			ref, err := openDamaged(dir, false)
			if err != nil {
				t.Fatal(err)
			}
			first := ref.j.FirstIndex()
			ref.e = nil
			ref.j.Close()
			if first <= 1 {
				t.Fatalf("the WAL starts at entry %d: the snapshots did not let it drop its first entries", first)
			}
			snaps, _ := filepath.Glob(filepath.Join(dir, "snap", "*.rsnap"))
			if len(snaps) == 0 {
				t.Fatal("no snapshots")
			}
			for _, s := range snaps {
				data, _ := os.ReadFile(s)
				data[len(data)/2] ^= 0x01
				if err := os.WriteFile(s, data, 0o640); err != nil {
					t.Fatal(err)
				}
			}
			if tc.moveLost {
				// The copies were written at the first snapshot, after 120
				// pushes: the segment holding entry 123 holds the first.
				segs := walSegments(t, dir)
				k := sort.Search(len(segs), func(i int) bool { return filepath.Base(segs[i]) > fmt.Sprintf("%020d", 123) }) - 1
				if k < 1 || k >= len(segs)-1 {
					t.Fatalf("entry 123 is in segment %d of %d", k, len(segs))
				}
				if err := os.Remove(segs[k]); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := openDamaged(dir, false); !errors.Is(err, log.ErrCorrupt) || !strings.Contains(err.Error(), "salvage") {
				t.Fatalf("start with every snapshot damaged: %v, want log.ErrCorrupt naming salvage", err)
			}
			n, err := openDamaged(dir, true)
			if err != nil {
				t.Fatalf("start with salvage: %v", err)
			}
			delivered, lost, unknown := drain(t, n.e, counts, "reader")
			t.Logf("WAL from entry %d: %d delivered, %d listed lost, %d unknown", first, delivered, lost, unknown)
			if delivered == 0 || unknown != 0 || delivered+lost != counts["p0"]+counts["p1"]+counts["p2"] || (lost > 0) != tc.moveLost {
				t.Fatalf("delivered %d, lost %d, unknown %d of %v", delivered, lost, unknown, counts)
			}
			if out := n.out.String(); !strings.Contains(out, "no usable snapshot") || !strings.Contains(out, fmt.Sprintf("lost_messages=%d", lost)) {
				t.Fatalf("the salvage is not reported:\n%s", out)
			}
			n.close()
			n, err = openDamaged(dir, false)
			if err != nil {
				t.Fatalf("restart without salvage: %v", err)
			}
			defer n.close()
			if d2, l2, _ := drain(t, n.e, counts, "later"); d2 != delivered || l2 != lost {
				t.Fatalf("after a restart: delivered %d, lost %d; before %d, %d", d2, l2, delivered, lost)
			}
		})
	}
}

// TestDamageAtRunTime: an old segment goes bad while the engine runs. A
// pop of the partition whose messages it held fails (ErrUnreadable), alone:
// a pop of any partition serves the other one without an error, the other
// partition pops by name, and Stats.ReadErrors counts the failures. Never a
// panic.
func TestDamageAtRunTime(t *testing.T) {
	for _, how := range []string{"flipped", "truncated", "removed"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			n, err := openDamaged(dir, false)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			push := func(p string, k int) {
				for i := 0; i < k; i++ {
					if _, err := n.e.Push(ctx, []engine.PushItem{{Queue: "q", Partition: p, Payload: []byte(dmgPayload(p, uint64(i)))}}); err != nil {
						t.Fatal(err)
					}
				}
			}
			push("bad", 80) // the first segment holds "bad" only
			push("good", 80)
			n.close() // a snapshot: after the restart no message is in memory
			n, err = openDamaged(dir, false)
			if err != nil {
				t.Fatal(err)
			}
			defer n.close()
			segs := walSegments(t, dir)
			switch how {
			case "flipped":
				damageFile(t, segs[0], func(d []byte, fr [][2]int) []byte { // a push of "bad" (the first entry may hold only the queue's creation)
					k := len(fr) / 2
					d[(fr[k][0]+fr[k][1])/2] ^= 0x40
					return d
				})
			case "truncated":
				damageFile(t, segs[0], func(d []byte, fr [][2]int) []byte { return d[:fr[0][1]+3] })
			case "removed":
				if err := os.Remove(segs[0]); err != nil {
					t.Fatal(err)
				}
			}
			// Pop "bad" until the damage stops it.
			var badErr error
			for k := 0; k < 100 && badErr == nil; k++ {
				var ms []engine.Message
				ms, badErr = n.e.Pop(ctx, engine.PopRequest{Queue: "q", Partition: "bad", Group: "g", Batch: 10, AutoAck: true})
				if badErr == nil && len(ms) == 0 {
					t.Fatal("partition bad drained past the damage")
				}
			}
			if !errors.Is(badErr, engine.ErrUnreadable) || !errors.Is(badErr, log.ErrCorrupt) {
				t.Fatalf("pop of the damaged partition: %v, want ErrUnreadable wrapping log.ErrCorrupt", badErr)
			}
			before := n.e.Stats().ReadErrors
			if before == 0 {
				t.Fatal("ReadErrors not counted")
			}
			// Any partition: "good" is served, no error.
			served := 0
			for k := 0; k < 20; k++ {
				ms, err := n.e.Pop(ctx, engine.PopRequest{Queue: "q", Group: "g", Batch: 10, Partitions: 2, AutoAck: true})
				if err != nil {
					t.Fatalf("pop of any partition: %v", err)
				}
				for _, m := range ms {
					if m.Partition != "good" || string(m.Payload) != dmgPayload("good", m.Offset) {
						t.Fatalf("pop of any partition served %s/%d %.20q", m.Partition, m.Offset, m.Payload)
					}
				}
				served += len(ms)
			}
			if served != 80 {
				t.Fatalf("a pop of any partition served %d of good's 80", served)
			}
			// Still failing, by name: the partition's own error.
			if _, err := n.e.Pop(ctx, engine.PopRequest{Queue: "q", Partition: "bad", Group: "g", Batch: 10}); !errors.Is(err, engine.ErrUnreadable) {
				t.Fatalf("pop of bad again: %v", err)
			}
			if after := n.e.Stats().ReadErrors; after <= before {
				t.Fatalf("ReadErrors %d then %d", before, after)
			}
		})
	}
}
