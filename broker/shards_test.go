package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regentmq/regent/cluster"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/protocol"
)

// shardSet is a shardPlane over one engine per shard, each on a journal
// of its own, with a switch per shard for whether this broker leads it.
type shardSet struct {
	t      *testing.T
	p      *shardPlane
	engs   []*engine.Engine
	mu     sync.Mutex
	nolead map[int]bool
}

const testSeed = 0x5eed

func newShardSet(t *testing.T, g int) *shardSet {
	t.Helper()
	ss := &shardSet{t: t, nolead: map[int]bool{}}
	shardOf := func(q, p string) int { return cluster.Shard(testSeed, q, p, g) }
	for s := range g {
		j, err := log.Open(log.Config{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(engine.Config{Shards: g, ShardOf: shardOf, Route: func(x int) error {
			if x != s {
				return protocol.NewError(protocol.CodeNotLeader, fmt.Sprintf("engine of shard %d asked for shard %d", s, x))
			}
			return nil
		}}, j)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			e.Close()
			j.Close()
		})
		ss.engs = append(ss.engs, e)
	}
	ss.p = &shardPlane{shards: g, shardOf: shardOf, log: slog.New(slog.DiscardHandler),
		engine: func(s int) (*engine.Engine, error) {
			ss.mu.Lock()
			defer ss.mu.Unlock()
			if ss.nolead[s] {
				return nil, protocol.NewError(protocol.CodeNotLeader, fmt.Sprintf("shard %d is led elsewhere", s))
			}
			return ss.engs[s], nil
		},
		served: func(dst []*engine.Engine) []*engine.Engine {
			ss.mu.Lock()
			defer ss.mu.Unlock()
			for s, e := range ss.engs {
				if !ss.nolead[s] {
					dst = append(dst, e)
				}
			}
			return dst
		}}
	return ss
}

// partitionsOver returns n partition names of queue that cover every
// shard.
func (ss *shardSet) partitionsOver(queue string, n int) []string {
	var out []string
	seen := map[int]bool{}
	for i := 0; len(out) < n || len(seen) < len(ss.engs); i++ {
		p := fmt.Sprintf("p%d", i)
		seen[ss.p.shardOfName(queue, p)] = true
		out = append(out, p)
	}
	return out
}

// partitionIn returns a partition of queue in shard s.
func (ss *shardSet) partitionIn(queue string, s int) string {
	for i := 0; ; i++ {
		p := fmt.Sprintf("s%d-%d", s, i)
		if ss.p.shardOfName(queue, p) == s {
			return p
		}
	}
}

func (ss *shardSet) push(items ...engine.PushItem) ([]engine.PushResult, error) {
	res := make([]engine.PushResult, len(items))
	ch := make(chan error, 1)
	ss.p.PushAsync(context.Background(), items, res, func(err error) { ch <- err })
	return res, <-ch
}

func (ss *shardSet) ack(items ...engine.AckItem) ([]engine.AckResult, error) {
	res := make([]engine.AckResult, len(items))
	ch := make(chan error, 1)
	ss.p.AckAsync(context.Background(), items, res, func(err error) { ch <- err })
	return res, <-ch
}

type popped struct {
	msgs []engine.Message
	err  error
}

// pop pops through the plane and waits for the answer.
func (ss *shardSet) pop(req engine.PopRequest) ([]engine.Message, error) {
	ch := make(chan popped, 1)
	ss.p.PopAsync(req, func(m []engine.Message, _ bool, err error) { ch <- popped{slices.Clone(m), err} })
	a := <-ch
	return a.msgs, a.err
}

// TestShardPlaneSplitsByShard: a push over partitions of every shard lands
// each item in its shard's engine, results in the items' order; one ack
// call over every shard completes them all.
func TestShardPlaneSplitsByShard(t *testing.T) {
	ss := newShardSet(t, 4)
	parts := ss.partitionsOver("q", 12)
	var items []engine.PushItem
	for i, p := range parts {
		items = append(items, engine.PushItem{Queue: "q", Partition: p, Payload: []byte(fmt.Sprint(i))})
	}
	res, err := ss.push(items...)
	if err != nil {
		t.Fatal(err)
	}
	var acks []engine.AckItem
	for i, p := range parts {
		if res[i].Status != engine.Queued {
			t.Fatalf("item %d: %+v", i, res[i])
		}
		// The item is in its shard's engine, and only there.
		s := ss.p.shardOfName("q", p)
		for k, e := range ss.engs {
			msgs, err := e.Pop(context.Background(), engine.PopRequest{Queue: "q", Partition: p, Group: fmt.Sprint("probe", k)})
			if k != s {
				if err == nil || len(msgs) > 0 {
					t.Fatalf("partition %s of shard %d served by shard %d's engine: %v %v", p, s, k, msgs, err)
				}
				continue
			}
			if err != nil || len(msgs) != 1 || string(msgs[0].Payload) != fmt.Sprint(i) || msgs[0].ID != res[i].MessageID {
				t.Fatalf("partition %s at its engine: %v %v", p, msgs, err)
			}
		}
		msgs, err := ss.pop(engine.PopRequest{Queue: "q", Partition: p, Group: "g"})
		if err != nil || len(msgs) != 1 {
			t.Fatalf("pop of %s: %v %v", p, msgs, err)
		}
		m := msgs[0]
		acks = append(acks, engine.AckItem{PartitionID: m.PartitionID, HasOffset: true, Offset: m.Offset, LeaseID: m.LeaseID, Group: "g", Status: engine.Completed})
	}
	// The acks of the first and last partitions swapped: order is kept per
	// item, whatever the shards.
	acks[0], acks[len(acks)-1] = acks[len(acks)-1], acks[0]
	ares, err := ss.ack(acks...)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ares {
		if ares[i].Err != nil || ares[i].Offset != acks[i].Offset {
			t.Fatalf("ack %d: %+v", i, ares[i])
		}
	}
	for _, p := range parts {
		if msgs, err := ss.pop(engine.PopRequest{Queue: "q", Partition: p, Group: "g"}); err != nil || len(msgs) != 0 {
			t.Fatalf("%s after its ack: %v %v", p, msgs, err)
		}
	}
}

// TestShardPlaneRefusesWholeWhenAShardIsNotLed: one shard of a call not
// led here refuses the call with not_leader before anything is taken.
func TestShardPlaneRefusesWholeWhenAShardIsNotLed(t *testing.T) {
	ss := newShardSet(t, 4)
	ss.nolead[2] = true
	var items []engine.PushItem
	for _, p := range ss.partitionsOver("q", 8) {
		items = append(items, engine.PushItem{Queue: "q", Partition: p, Payload: []byte("x")})
	}
	if _, err := ss.push(items...); protocol.CodeOf(err) != protocol.CodeNotLeader {
		t.Fatalf("push over a shard not led: %v, want not_leader", err)
	}
	for s, e := range ss.engs {
		if msgs, err := e.Pop(context.Background(), engine.PopRequest{Queue: "q"}); err != nil || len(msgs) != 0 {
			t.Fatalf("shard %d's engine holds %v (%v) after a refused push", s, msgs, err)
		}
	}
	if _, err := ss.pop(engine.PopRequest{Queue: "q", Partition: ss.partitionIn("q", 2)}); protocol.CodeOf(err) != protocol.CodeNotLeader {
		t.Fatalf("pop of a partition of a shard not led: %v", err)
	}
	// An ack naming a partition of a shard not led, with one led.
	p0 := ss.partitionIn("q", 0)
	if _, err := ss.push(engine.PushItem{Queue: "q", Partition: p0, Payload: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	msgs, err := ss.pop(engine.PopRequest{Queue: "q", Partition: p0})
	if err != nil || len(msgs) != 1 {
		t.Fatal(msgs, err)
	}
	var other engine.UUID
	for seq := uint64(0); ; seq++ {
		other = partitionIDWithSeq(msgs[0].PartitionID, seq)
		if s, _ := engine.PartitionShard(other, 4); s == 2 {
			break
		}
	}
	good := engine.AckItem{PartitionID: msgs[0].PartitionID, HasOffset: true, Offset: msgs[0].Offset, LeaseID: msgs[0].LeaseID, Status: engine.Completed}
	bad := good
	bad.PartitionID = other
	if _, err := ss.ack(good, bad); protocol.CodeOf(err) != protocol.CodeNotLeader {
		t.Fatalf("ack over a shard not led: %v", err)
	}
	if res, err := ss.ack(good); err != nil || res[0].Err != nil {
		t.Fatalf("the good ack alone, after the refusal: %v %v", res, err)
	}
}

// partitionIDWithSeq is id with its partition number replaced (the last
// eight bytes: engine/uuid.go's partitionID).
func partitionIDWithSeq(id engine.UUID, seq uint64) engine.UUID {
	for i := range 8 {
		id[15-i] = byte(seq >> (8 * i))
	}
	id[8] = 0x80 | id[8]&0x3f // the UUID variant
	return id
}

// TestShardPlanePopsAnyPartition: a pop of any partition finds messages in
// whichever shard holds them, and a parked one wakes for a push to any
// shard; a cancelled one takes nothing.
func TestShardPlanePopsAnyPartition(t *testing.T) {
	ss := newShardSet(t, 4)
	for s := range 4 {
		if _, err := ss.push(engine.PushItem{Queue: "q", Partition: ss.partitionIn("q", s), Payload: []byte(fmt.Sprint(s))}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for range 4 {
		msgs, err := ss.pop(engine.PopRequest{Queue: "q", AutoAck: true})
		if err != nil || len(msgs) != 1 {
			t.Fatalf("pop of any partition: %v %v", msgs, err)
		}
		seen[string(msgs[0].Payload)] = true
	}
	if len(seen) != 4 {
		t.Fatalf("four pops saw %v", seen)
	}
	if msgs, err := ss.pop(engine.PopRequest{Queue: "q", AutoAck: true}); err != nil || len(msgs) != 0 {
		t.Fatalf("a fifth pop: %v %v", msgs, err)
	}

	// Withdrawn, a parked pop takes nothing.
	w := ss.p.PopAsync(engine.PopRequest{Queue: "q2", Group: "late", Wait: true, Timeout: time.Minute}, func([]engine.Message, bool, error) {
		t.Error("a withdrawn pop answered")
	})
	if w == nil || !w.Cancel() {
		t.Fatalf("the parked pop: waiter %v", w)
	}
	ch := make(chan popped, 1)
	w = ss.p.PopAsync(engine.PopRequest{Queue: "q", Group: "g2", Wait: true, Timeout: time.Minute, Subscription: engine.SubNew}, func(m []engine.Message, _ bool, err error) {
		ch <- popped{slices.Clone(m), err}
	})
	if w == nil {
		t.Fatal("a pop with nothing to take did not park")
	}
	if _, err := ss.push(engine.PushItem{Queue: "q", Partition: ss.partitionIn("q", 3), Payload: []byte("late")},
		engine.PushItem{Queue: "q2", Partition: ss.partitionIn("q2", 1), Payload: []byte("late")}); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-ch:
		// g2 starts after what was there when it first read.
		if a.err != nil || len(a.msgs) != 1 || string(a.msgs[0].Payload) != "late" {
			t.Fatalf("parked pop: %v %v", a.msgs, a.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a parked pop of any partition did not wake for a push to shard 3")
	}
	n := 0
	for {
		msgs, err := ss.pop(engine.PopRequest{Queue: "q2", Group: "late", Batch: 10, AutoAck: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		n += len(msgs)
	}
	if n != 1 {
		t.Fatalf("the withdrawn pop's group read %d messages, want the one pushed after it", n)
	}
}

// TestShardPlaneGivesBackWhatAPollTookForNobody: a parked pop of any
// partition is woken at several engines at once (a push over every shard);
// it answers with one engine's messages, and what the others took comes
// back at once: leased, by a retry that spends no retry; autoAck, held for
// the next pop. Each message is delivered exactly once, none is lost.
func TestShardPlaneGivesBackWhatAPollTookForNobody(t *testing.T) {
	for _, autoAck := range []bool{false, true} {
		t.Run(fmt.Sprint("autoAck=", autoAck), func(t *testing.T) {
			ss := newShardSet(t, 4)
			parts := make([]string, 4)
			for s := range parts {
				parts[s] = ss.partitionIn("q", s)
			}
			got := map[engine.UUID]bool{}
			take := func(msgs []engine.Message) {
				for _, m := range msgs {
					if got[m.ID] {
						t.Fatalf("message %s delivered twice", m.Payload)
					}
					if m.RetryCount != 0 {
						t.Fatalf("message %s came back with retry count %d: giving back spent a retry", m.Payload, m.RetryCount)
					}
					got[m.ID] = true
					if !autoAck {
						if res, err := ss.ack(engine.AckItem{PartitionID: m.PartitionID, HasOffset: true, Offset: m.Offset, LeaseID: m.LeaseID, Group: m.Group, Status: engine.Completed}); err != nil || res[0].Err != nil {
							t.Fatalf("ack: %v %v", res, err)
						}
					}
				}
			}
			const rounds = 40
			for r := range rounds {
				ch := make(chan popped, 1)
				req := engine.PopRequest{Queue: "q", Group: "g", Wait: true, Timeout: time.Minute, AutoAck: autoAck}
				w := ss.p.PopAsync(req, func(m []engine.Message, _ bool, err error) { ch <- popped{slices.Clone(m), err} })
				var items []engine.PushItem
				for s := range parts {
					items = append(items, engine.PushItem{Queue: "q", Partition: parts[s], Payload: []byte(fmt.Sprint(r, "/", s))})
				}
				if _, err := ss.push(items...); err != nil {
					t.Fatal(err)
				}
				a := <-ch
				if a.err != nil || len(a.msgs) == 0 {
					t.Fatalf("round %d (parked %v): %v %v", r, w != nil, a.msgs, a.err)
				}
				take(a.msgs)
				// The rest of the round is there for pops that do not wait.
				deadline := time.Now().Add(5 * time.Second)
				for len(got) < (r+1)*len(parts) {
					msgs, err := ss.pop(engine.PopRequest{Queue: "q", Group: "g", Batch: 10, AutoAck: autoAck})
					if err != nil {
						t.Fatal(err)
					}
					take(msgs)
					if len(msgs) == 0 {
						if time.Now().After(deadline) {
							t.Fatalf("round %d: %d of %d messages came back", r, len(got), (r+1)*len(parts))
						}
						time.Sleep(time.Millisecond)
					}
				}
			}
		})
	}
}

// TestShardPlaneLeasesAndTransactions: an extension finds its lease at its
// shard's engine; a transaction stays in one shard.
func TestShardPlaneLeasesAndTransactions(t *testing.T) {
	ss := newShardSet(t, 4)
	p2, p3 := ss.partitionIn("q", 2), ss.partitionIn("q", 3)
	if _, err := ss.push(engine.PushItem{Queue: "q", Partition: p2, Payload: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	msgs, err := ss.pop(engine.PopRequest{Queue: "q", Partition: p2})
	if err != nil || len(msgs) != 1 {
		t.Fatal(msgs, err)
	}
	extend := func(id engine.UUID) (time.Time, error) {
		type r struct {
			at  time.Time
			err error
		}
		ch := make(chan r, 1)
		ss.p.ExtendLeaseAsync(context.Background(), id, time.Hour, func(at time.Time, err error) { ch <- r{at, err} })
		a := <-ch
		return a.at, a.err
	}
	at, err := extend(msgs[0].LeaseID)
	if err != nil || time.Until(at) < 59*time.Minute {
		t.Fatalf("extension: %v %v", at, err)
	}
	if _, err := extend(engine.UUID{1}); !errors.Is(err, engine.ErrLeaseInvalid) {
		t.Fatalf("extension of no lease: %v", err)
	}
	if id, ok := ss.p.LiveLease(msgs[0].PartitionID, ""); !ok || id != msgs[0].LeaseID {
		t.Fatalf("LiveLease: %v %v", id, ok)
	}

	txn := func(acks []engine.AckItem, pushes []engine.PushItem) (engine.TxnResult, error) {
		type r struct {
			res engine.TxnResult
			err error
		}
		ch := make(chan r, 1)
		ss.p.TransactionAsync(context.Background(), acks, pushes, func(res engine.TxnResult, err error) { ch <- r{res, err} })
		a := <-ch
		return a.res, a.err
	}
	ack := engine.AckItem{PartitionID: msgs[0].PartitionID, HasOffset: true, Offset: msgs[0].Offset, LeaseID: msgs[0].LeaseID, Status: engine.Completed}
	if _, err := txn([]engine.AckItem{ack}, []engine.PushItem{{Queue: "q", Partition: p3, Payload: []byte("b")}}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("a transaction over two shards: %v", err)
	}
	res, err := txn([]engine.AckItem{ack}, []engine.PushItem{{Queue: "q", Partition: p2, Payload: []byte("b")}})
	if err != nil || res.Err != nil {
		t.Fatalf("a transaction in one shard: %+v %v", res, err)
	}
	if msgs, err := ss.pop(engine.PopRequest{Queue: "q", Partition: p2}); err != nil || len(msgs) != 1 || string(msgs[0].Payload) != "b" {
		t.Fatalf("after the transaction: %v %v", msgs, err)
	}
}

var _ netserver.PopWaiter = (*anyPop)(nil)

// txnKey keeps txnAcross's derived transactionIds within
// engine.MaxNameBytes whatever the acked message's own transactionId, is
// the same for the same message, and differs between messages.
func TestTxnKeyFitsAName(t *testing.T) {
	long := strings.Repeat("t", engine.MaxNameBytes)
	a := engine.AckItem{PartitionID: engine.UUID{1}, TransactionID: long}
	key := txnKey(&a)
	if derived := key + "-txn-99"; len(derived) > engine.MaxNameBytes || len(key) > 36 {
		t.Fatalf("derived transactionId of %d bytes (key %d)", len(derived), len(key))
	}
	if txnKey(&a) != key {
		t.Fatal("txnKey is not the same for the same message")
	}
	others := []engine.AckItem{
		{PartitionID: engine.UUID{2}, TransactionID: long},
		{PartitionID: engine.UUID{1}, TransactionID: long + "x"},
		{PartitionID: engine.UUID{1}, HasOffset: true, Offset: 7},
	}
	for _, o := range others {
		if txnKey(&o) == key {
			t.Fatalf("txnKey of %+v is that of another message", o)
		}
	}
}
