package engine

import (
	"context"
	"errors"
	"testing"
)

// TestQueueIDIsNoPartitionID: a queue's id (configure's queueId, the
// queue's views) is none of its partitions' ids, not even its Default
// partition's (which configure creates first, sequence 0), names no
// partition where a partition id is taken, and is the same after a restart
// (from the journal, then from a snapshot).
func TestQueueIDIsNoPartitionID(t *testing.T) {
	f := newFixture(t)
	res, err := f.e.Configure(context.Background(), "orders", DefaultQueueOptions())
	if err != nil {
		t.Fatal(err)
	}
	if res.QueueID == res.PartitionID {
		t.Fatalf("queueId %s is the Default partition's id", res.QueueID)
	}
	if res.QueueID[6]>>4 != 8 || res.QueueID[8]>>6 != 2 {
		t.Errorf("queueId %s is not a UUIDv8 of RFC 9562's variant", res.QueueID)
	}
	f.push("orders", "p1", "a")
	f.push("orders", "p2", "b")
	check := func(when string) {
		t.Helper()
		head, err := f.e.ViewQueueHead("orders")
		if err != nil {
			t.Fatal(err)
		}
		if head.ID != res.QueueID {
			t.Errorf("%s: the queue's view says id %s, configure said %s", when, head.ID, res.QueueID)
		}
		if fl := f.e.QueueFlows(); len(fl) != 1 || fl[0].ID != res.QueueID {
			t.Errorf("%s: the queue's flow says id %v, configure said %s", when, fl, res.QueueID)
		}
		pg, err := f.e.ViewPartitions("orders", PageRequest{})
		if err != nil || len(pg.Partitions) != 3 {
			t.Fatalf("%s: partitions %+v %v", when, pg, err)
		}
		for _, p := range pg.Partitions {
			if p.ID == res.QueueID {
				t.Errorf("%s: partition %s has the queue's id %s", when, p.Name, p.ID)
			}
		}
		if q, p, err := f.e.PartitionByID(res.QueueID); err == nil {
			t.Errorf("%s: the queue's id names partition %s/%s", when, q, p)
		}
		if _, err := f.e.ViewPartitions("orders", PageRequest{After: res.QueueID}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: a partition page after the queue's id: %v, want ErrInvalid", when, err)
		}
		r := f.ack(AckItem{PartitionID: res.QueueID, Offset: 0, HasOffset: true, LeaseID: UUID{1}, Status: Completed})
		if !errors.Is(r[0].Err, ErrMessageNotFound) {
			t.Errorf("%s: an ack naming the queue's id as its partition: %v, want ErrMessageNotFound", when, r[0].Err)
		}
	}
	check("before a restart")
	f.restart()
	check("after a restart")
	if err := f.e.Snapshot(); err != nil {
		t.Fatal(err)
	}
	f.restart()
	check("after a restart from a snapshot")
}
