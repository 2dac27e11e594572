package engine

import (
	"context"
	"errors"
	"hash/fnv"
	"testing"
)

// A test cluster of 8 shards: this engine serves the even ones.
var errElsewhere = errors.New("served elsewhere")

func testShardOf(queue, partition string) int {
	h := fnv.New32a()
	h.Write([]byte(queue + "\x00" + partition))
	return int(h.Sum32() % 8)
}

func clustered(c *Config) {
	c.Shards = 8
	c.ShardOf = testShardOf
	c.Route = func(s int) error {
		if s%2 == 0 {
			return nil
		}
		return errElsewhere
	}
}

// partitionsBy returns partition names of queue q whose shard is even
// (served) or odd (not), n of each.
func partitionsBy(q string, n int) (served, not []string) {
	for i := 0; len(served) < n || len(not) < n; i++ {
		p := "p" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if testShardOf(q, p)%2 == 0 {
			if len(served) < n {
				served = append(served, p)
			}
		} else if len(not) < n {
			not = append(not, p)
		}
	}
	return served, not
}

// TestPartitionIDsNameTheirShard: every partition a clustered engine creates
// has an id whose shard (PartitionShard) is the one of its names, across a
// restart (recovered partitions keep their numbers, new ones follow them).
func TestPartitionIDsNameTheirShard(t *testing.T) {
	f := newFixture(t, clustered)
	served, _ := partitionsBy("q", 20)
	check := func() {
		t.Helper()
		for _, p := range served {
			msgs := f.pop(PopRequest{Queue: "q", Partition: p, Batch: 10, Group: "g"})
			if len(msgs) == 0 {
				t.Fatalf("partition %s: nothing popped", p)
			}
			got, ok := PartitionShard(msgs[0].PartitionID, 8)
			if !ok || got != testShardOf("q", p) {
				t.Fatalf("partition %s (shard %d): its id %s names shard %d (%v)", p, testShardOf("q", p), msgs[0].PartitionID, got, ok)
			}
		}
	}
	for _, p := range served[:10] {
		f.push("q", p, "m")
	}
	f.restart()
	for _, p := range served[10:] {
		f.push("q", p, "m")
	}
	check()
	if _, ok := PartitionShard(queueUUID(7), 8); ok {
		t.Fatal("a queue's id names a shard")
	}
}

// TestRouteRefusesWholeRequests: a push, pop, ack or transaction that
// touches a shard the engine does not serve is refused whole with Route's
// answer, and leaves nothing behind.
func TestRouteRefusesWholeRequests(t *testing.T) {
	f := newFixture(t, clustered)
	served, not := partitionsBy("q", 1)
	ctx := context.Background()
	mixed := []PushItem{{Queue: "q", Partition: served[0], Payload: []byte("a")}, {Queue: "q", Partition: not[0], Payload: []byte("b")}}
	if _, err := f.e.Push(ctx, mixed); !errors.Is(err, errElsewhere) {
		t.Fatalf("a push touching a shard served elsewhere: %v", err)
	}
	if _, err := f.e.Pop(ctx, PopRequest{Queue: "q", Partition: served[0]}); err != nil {
		t.Fatal(err)
	}
	if msgs := f.pop(PopRequest{Queue: "q", Batch: 10}); len(msgs) != 0 {
		t.Fatalf("a refused push kept %d messages", len(msgs))
	}
	if _, err := f.e.Pop(ctx, PopRequest{Queue: "q", Partition: not[0]}); !errors.Is(err, errElsewhere) {
		t.Fatalf("a pop of a partition served elsewhere: %v", err)
	}
	f.push("q", served[0], "a")
	msgs := f.pop(PopRequest{Queue: "q", Partition: served[0], Group: "g"})
	if len(msgs) != 1 {
		t.Fatalf("popped %d", len(msgs))
	}
	// An ack naming a partition id of a shard served elsewhere, beside a
	// good one: refused whole, the good one is still in flight.
	foreign := partitionID(1, 1)
	for testShard(foreign)%2 == 0 {
		foreign = partitionID(1, testShardSeq(foreign)+1)
	}
	items := []AckItem{ackOf(msgs[0], Completed), {PartitionID: foreign, HasOffset: true, Offset: 0, Group: "g", Status: Completed}}
	if _, err := f.e.Ack(ctx, items); !errors.Is(err, errElsewhere) {
		t.Fatalf("an ack touching a shard served elsewhere: %v", err)
	}
	if _, err := f.e.Transaction(ctx, items[:1], mixed[1:]); !errors.Is(err, errElsewhere) {
		t.Fatalf("a transaction pushing to a shard served elsewhere: %v", err)
	}
	if res := f.ack(items[0]); res[0].Err != nil {
		t.Fatalf("the refused ack or transaction took the message: %v", res[0].Err)
	}
}

func testShard(id UUID) int {
	s, _ := PartitionShard(id, 8)
	return s
}

func testShardSeq(id UUID) uint64 {
	_, seq, _ := splitPartitionID(id)
	return seq
}

// TestShardsNeedShardOf: a cluster's engine without a shard function is
// refused at New.
func TestShardsNeedShardOf(t *testing.T) {
	if _, err := New(Config{Shards: 8, NoTicker: true}, newMemJournal()); !errors.Is(err, ErrInvalid) {
		t.Fatalf("New with Shards and no ShardOf: %v", err)
	}
}
