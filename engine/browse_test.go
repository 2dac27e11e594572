package engine

import (
	"errors"
	"testing"
	"time"
)

func TestViewQueue(t *testing.T) {
	f := newFixture(t)
	f.push("v", "a", nums(4)...)
	f.push("v", "b", "x")
	msgs := f.pop(PopRequest{Queue: "v", Partition: "a", Group: "g", Batch: 2})
	f.ackMsgs(msgs[:1], Completed)
	v, err := f.e.ViewQueue("v")
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Partitions) != 2 || len(v.Groups) != 1 || v.Groups[0].Name != "g" || v.Groups[0].Mode != SubAll {
		t.Fatalf("view %+v", v)
	}
	a := v.Partitions[0]
	if a.Name != "a" || a.Low != 0 || a.Next != 4 || a.Durable != 4 || a.Oldest == 0 || len(a.Groups) != 1 {
		t.Fatalf("partition a %+v", a)
	}
	g := a.Groups[0]
	if g.Cursor != 1 || !g.Leased || g.LeaseFrom != 0 || g.LeaseTo != 2 || g.LeaseAcked != 1 || g.LeaseID != msgs[0].LeaseID || g.CursorTime != a.Oldest {
		t.Errorf("group state %+v", g)
	}
	if vs := f.e.ViewQueues(); len(vs) != 1 || vs[0].Name != "v" {
		t.Errorf("ViewQueues %+v", vs)
	}
	if _, err := f.e.ViewQueue("nope"); !errors.Is(err, ErrQueueNotFound) {
		t.Errorf("ViewQueue(nope): %v", err)
	}
}

func TestScanMessages(t *testing.T) {
	f := newFixture(t)
	f.push("s", "p", "0", "1")
	f.clock.Advance(time.Second)
	mid := f.clock.Now()
	f.push("s", "p", "2")
	f.clock.Advance(time.Second)
	f.push("s", "p", "3", "4")
	var got []Message
	collect := func(since, until int64) string {
		got = got[:0]
		if err := f.e.ScanMessages("s", "p", since, until, func(m *Message) bool { got = append(got, *m); return true }); err != nil {
			t.Fatal(err)
		}
		return payloads(got)
	}
	if s := collect(0, 0); s != "0,1,2,3,4" || got[3].Offset != 3 || got[3].Queue != "s" || got[3].TransactionID != got[3].ID.String() {
		t.Errorf("all: %s %+v", s, got)
	}
	if s := collect(mid, 0); s != "2,3,4" {
		t.Errorf("since: %s", s)
	}
	if s := collect(0, mid+1); s != "0,1,2" {
		t.Errorf("until: %s", s)
	}
	n := 0
	f.e.ScanMessages("s", "p", 0, 0, func(*Message) bool { n++; return n < 2 })
	if n != 2 {
		t.Errorf("stopping early: %d calls", n)
	}
	if err := f.e.ScanMessages("s", "nope", 0, 0, nil); !errors.Is(err, ErrPartitionNotFound) {
		t.Errorf("unknown partition: %v", err)
	}
}

func TestFindMessage(t *testing.T) {
	f := newFixture(t)
	res := f.pushItems(
		PushItem{Queue: "f", Payload: []byte("a"), TransactionID: "tx-a"},
		PushItem{Queue: "f", Payload: []byte("b")},
	)
	pid := res[0].PartitionID
	m, err := f.e.FindMessage(pid, "tx-a")
	if err != nil || string(m.Payload) != "a" || m.ID != res[0].MessageID || m.Offset != 0 {
		t.Errorf("by transactionId: %+v %v", m, err)
	}
	m, err = f.e.FindMessage(pid, res[1].MessageID.String())
	if err != nil || string(m.Payload) != "b" || m.TransactionID != res[1].MessageID.String() {
		t.Errorf("by id: %+v %v", m, err)
	}
	for _, txn := range []string{"nope", res[0].MessageID.String() + "0"} {
		if _, err := f.e.FindMessage(pid, txn); !errors.Is(err, ErrMessageNotFound) {
			t.Errorf("FindMessage(%q): %v", txn, err)
		}
	}
	if q, p, err := f.e.PartitionByID(pid); q != "f" || p != DefaultPartition || err != nil {
		t.Errorf("PartitionByID: %s %s %v", q, p, err)
	}
	if id := f.e.NewID(); id[6]>>4 != 7 {
		t.Errorf("NewID %s is not a UUIDv7", id)
	}
	if err := f.e.Healthy(); err != nil {
		t.Errorf("Healthy: %v", err)
	}
}

func TestLiveLease(t *testing.T) {
	f := newFixture(t)
	f.push("l", "", "a")
	msgs := f.pop(PopRequest{Queue: "l", Group: "g"})
	if id, ok := f.e.LiveLease(msgs[0].PartitionID, "g"); !ok || id != msgs[0].LeaseID {
		t.Errorf("LiveLease: %v %v", id, ok)
	}
	if _, ok := f.e.LiveLease(msgs[0].PartitionID, "other"); ok {
		t.Error("LiveLease of a group that never read")
	}
	f.ackMsgs(msgs, Completed)
	if _, ok := f.e.LiveLease(msgs[0].PartitionID, "g"); ok {
		t.Error("LiveLease after the lease ended")
	}
}
