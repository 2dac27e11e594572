package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/engine"
)

// register registers a query and fails the test on an error.
func (n *node) register(name, hash string, reset bool) engine.RegisterResult {
	n.t.Helper()
	r, err := n.e.RegisterQuery(context.Background(), engine.QueryRegistration{Name: name, SourceQueue: "src", SinkQueue: "sink", ConfigHash: hash, Reset: reset})
	if err != nil {
		n.t.Fatalf("register %s %s: %v", name, hash, err)
	}
	return r
}

func (n *node) state(q, p engine.UUID, f engine.StateFilter) string {
	n.t.Helper()
	rows, err := n.e.State(q, p, f)
	if err != nil {
		n.t.Fatal(err)
	}
	var parts []string
	for _, r := range rows {
		parts = append(parts, r.Key+"="+string(r.Value))
	}
	return strings.Join(parts, ",")
}

func upsert(k, v string) engine.StateOp { return engine.StateOp{Key: k, Value: []byte(v)} }

// TestStreamsRegistration: Queen's matrix. A new name is fresh with a new
// id; the same hash keeps the state (reset or not); another hash is refused
// (ErrConflict, with the query as it is) unless reset, which wipes the
// state and keeps the id.
func TestStreamsRegistration(t *testing.T) {
	n := openNode(t, t.TempDir())
	defer n.close()
	r := n.register("q1", "h1", false)
	if !r.Fresh || r.Reset || r.Query.ID.IsZero() || r.Query.ConfigHash != "h1" {
		t.Fatalf("fresh registration: %+v", r)
	}
	id := r.Query.ID
	part := engine.UUID{9}
	if _, err := n.e.Cycle(context.Background(), engine.StreamCycle{QueryID: id, PartitionID: part, State: []engine.StateOp{upsert("k", `1`)}}); err != nil {
		t.Fatal(err)
	}
	for _, reset := range []bool{false, true} {
		if r := n.register("q1", "h1", reset); r.Fresh || r.Reset || r.Query.ID != id {
			t.Fatalf("same hash (reset %v): %+v", reset, r)
		}
		if got := n.state(id, part, engine.StateFilter{}); got != "k=1" {
			t.Fatalf("same hash (reset %v) lost the state: %q", reset, got)
		}
	}
	r2, err := n.e.RegisterQuery(context.Background(), engine.QueryRegistration{Name: "q1", SourceQueue: "src", ConfigHash: "h2"})
	if !errors.Is(err, engine.ErrConflict) || !strings.Contains(err.Error(), "config_hash mismatch") || r2.Query.ID != id || r2.Query.ConfigHash != "h1" {
		t.Fatalf("mismatch without reset: %+v %v", r2, err)
	}
	if got := n.state(id, part, engine.StateFilter{}); got != "k=1" {
		t.Fatalf("a refused registration changed the state: %q", got)
	}
	if r := n.register("q1", "h2", true); r.Fresh || !r.Reset || r.Query.ID != id || r.Query.ConfigHash != "h2" {
		t.Fatalf("mismatch with reset: %+v", r)
	}
	if got := n.state(id, part, engine.StateFilter{}); got != "" {
		t.Fatalf("reset kept the state: %q", got)
	}
	if r := n.register("q2", "h1", false); !r.Fresh || r.Query.ID == id {
		t.Fatalf("a second query: %+v", r)
	}
	for _, bad := range []engine.QueryRegistration{{SourceQueue: "s", ConfigHash: "h"}, {Name: "n", ConfigHash: "h"}, {Name: "n", SourceQueue: "s"}} {
		if _, err := n.e.RegisterQuery(context.Background(), bad); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("register %+v: %v, want ErrInvalid", bad, err)
		}
	}
}

// popLease pushes n messages (txn t0..tn-1) to src/p and pops them as group g.
func popLease(n *node, count int) []engine.Message {
	n.t.Helper()
	for i := 0; i < count; i++ {
		n.push("src", "p", fmt.Sprintf("t%d", i), fmt.Sprintf("m%d", i))
	}
	ms := n.pop(engine.PopRequest{Queue: "src", Partition: "p", Group: "g", Batch: count})
	if len(ms) != count {
		n.t.Fatalf("popped %d, want %d", len(ms), count)
	}
	return ms
}

func sinkPayloads(n *node, group string) string {
	n.t.Helper()
	var out []string
	for _, m := range n.pop(engine.PopRequest{Queue: "sink", Group: group, Batch: 100, AutoAck: true}) {
		out = append(out, string(m.Payload))
	}
	return strings.Join(out, ",")
}

// TestStreamsCycle: one cycle commits state, sink pushes and a cumulative
// ack together. With release_lease false the un-acked tail stays leased and
// comes back in order when the lease expires; with true it comes back at
// once. A stale lease rolls the whole cycle back; so does a replay of a
// cycle whose lease it released.
func TestStreamsCycle(t *testing.T) {
	n := openNode(t, t.TempDir())
	defer n.close()
	if _, err := n.e.Configure(context.Background(), "src", func() engine.QueueOptions {
		o := engine.DefaultQueueOptions()
		o.LeaseTime = 2 * time.Second
		return o
	}()); err != nil {
		t.Fatal(err)
	}
	id := n.register("sum", "h", false).Query.ID
	ms := popLease(n, 5)
	part := ms[0].PartitionID
	cycle := func(ack *engine.StreamAck, state []engine.StateOp, pushes ...string) (engine.StreamCycleResult, error) {
		var items []engine.PushItem
		for _, p := range pushes {
			items = append(items, engine.PushItem{Queue: "sink", Payload: []byte(p)})
		}
		return n.e.Cycle(context.Background(), engine.StreamCycle{QueryID: id, PartitionID: part, Group: "g", State: state, Pushes: items, Ack: ack})
	}
	// Acks up to t2, keeps the lease.
	res, err := cycle(&engine.StreamAck{TransactionID: "t2", LeaseID: ms[0].LeaseID, Count: 3}, []engine.StateOp{upsert("sum", `3`)}, "a", "b")
	if err != nil || res.Ack == nil || res.Ack.Count != 3 || res.Ack.LeaseReleased || res.StateOpsApplied != 1 || len(res.Pushes) != 2 || res.Queue != "src" {
		t.Fatalf("cycle 1: %+v %v", res, err)
	}
	if got := n.state(id, part, engine.StateFilter{}); got != "sum=3" {
		t.Fatalf("state after cycle 1: %q", got)
	}
	if got := sinkPayloads(n, "reader"); got != "a,b" {
		t.Fatalf("sink after cycle 1: %q", got)
	}
	if got := n.pop(engine.PopRequest{Queue: "src", Partition: "p", Group: "g", Batch: 10}); len(got) != 0 {
		t.Fatalf("the tail came back while the lease is live: %d messages", len(got))
	}
	// A cycle naming another lease: nothing of it lands.
	if _, err := cycle(&engine.StreamAck{TransactionID: "t3", LeaseID: engine.UUID{1}}, []engine.StateOp{upsert("sum", `99`)}, "stale"); !errors.Is(err, engine.ErrLeaseInvalid) {
		t.Fatalf("stale lease: %v", err)
	}
	// A transactionId not in the lease.
	if _, err := cycle(&engine.StreamAck{TransactionID: "nope", LeaseID: ms[0].LeaseID}, nil); !errors.Is(err, engine.ErrMessageNotFound) {
		t.Fatalf("unknown transactionId: %v", err)
	}
	// The lease expires: t3 and t4 come back, in order; cycle 1's acks hold.
	n.clock.Advance(3 * time.Second)
	n.e.Tick()
	if _, err := cycle(&engine.StreamAck{TransactionID: "t4", LeaseID: ms[0].LeaseID}, []engine.StateOp{upsert("sum", `99`)}, "late"); !errors.Is(err, engine.ErrLeaseInvalid) {
		t.Fatalf("expired lease: %v", err)
	}
	again := n.pop(engine.PopRequest{Queue: "src", Partition: "p", Group: "g", Batch: 10})
	if len(again) != 2 || again[0].TransactionID != "t3" || again[1].TransactionID != "t4" {
		t.Fatalf("after expiry: %+v", again)
	}
	if got := n.state(id, part, engine.StateFilter{}); got != "sum=3" {
		t.Fatalf("refused cycles changed the state: %q", got)
	}
	if got := sinkPayloads(n, "reader"); got != "" {
		t.Fatalf("refused cycles pushed: %q", got)
	}
	// Acks t3 and releases: t4 comes back at once.
	res, err = cycle(&engine.StreamAck{TransactionID: "t3", LeaseID: again[0].LeaseID, ReleaseLease: true}, []engine.StateOp{upsert("sum", `6`), {Key: "gone", Delete: true}}, "c")
	if err != nil || !res.Ack.LeaseReleased || res.StateOpsApplied != 2 {
		t.Fatalf("cycle releasing: %+v %v", res, err)
	}
	// The same cycle again (a retried request): its lease is gone, nothing lands.
	if _, err := cycle(&engine.StreamAck{TransactionID: "t3", LeaseID: again[0].LeaseID, ReleaseLease: true}, []engine.StateOp{upsert("sum", `6`)}, "c"); !errors.Is(err, engine.ErrLeaseInvalid) {
		t.Fatalf("replayed cycle: %v", err)
	}
	last := n.pop(engine.PopRequest{Queue: "src", Partition: "p", Group: "g", Batch: 10})
	if len(last) != 1 || last[0].TransactionID != "t4" {
		t.Fatalf("after a releasing ack: %+v", last)
	}
	if got := sinkPayloads(n, "reader"); got != "c" {
		t.Fatalf("sink after the releasing cycle: %q", got)
	}
	// dlq: t4 goes to the dead-letter queue, the cursor passes it.
	res, err = cycle(&engine.StreamAck{TransactionID: "t4", LeaseID: last[0].LeaseID, DeadLetter: true, Error: "bad"}, nil)
	if err != nil || !res.Ack.DeadLettered || res.Ack.Count != 0 {
		t.Fatalf("dlq cycle: %+v %v", res, err)
	}
	dead, total, _ := n.e.DLQ(engine.DLQFilter{Queue: "src"})
	if total != 1 || dead[0].Error != "bad" || dead[0].Message.TransactionID != "t4" {
		t.Fatalf("DLQ after a failed cycle: %+v", dead)
	}
	// An ack-less cycle (idle flush) needs no lease.
	if _, err := cycle(nil, []engine.StateOp{{Key: "sum", Delete: true}}, "flushed"); err != nil {
		t.Fatal(err)
	}
	if got := n.state(id, part, engine.StateFilter{}); got != "" {
		t.Fatalf("state after the flush: %q", got)
	}
	// State for a query that is not registered is refused.
	if _, err := n.e.Cycle(context.Background(), engine.StreamCycle{QueryID: engine.UUID{7}, PartitionID: part, State: []engine.StateOp{upsert("k", "1")}}); !errors.Is(err, engine.ErrQueryNotFound) {
		t.Fatalf("unregistered query: %v", err)
	}
}

// TestStreamsStateFilters: keys, prefix and ripe-at-or-before, ANDed, rows
// by key; shards are per (query, partition).
func TestStreamsStateFilters(t *testing.T) {
	n := openNode(t, t.TempDir())
	defer n.close()
	id := n.register("f", "h", false).Query.ID
	p1, p2 := engine.UUID{1}, engine.UUID{2}
	ops := []engine.StateOp{
		{Key: "tumb:60\x1fa", Value: []byte(`{"windowEnd":100}`), WindowEnd: 100, HasWindowEnd: true},
		{Key: "tumb:60\x1fb", Value: []byte(`{"windowEnd":200}`), WindowEnd: 200, HasWindowEnd: true},
		upsert("__wm__", `{"eventTimeMs":5}`),
		upsert("gate", `null`),
	}
	if _, err := n.e.Cycle(context.Background(), engine.StreamCycle{QueryID: id, PartitionID: p1, State: ops}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.e.Cycle(context.Background(), engine.StreamCycle{QueryID: id, PartitionID: p2, State: []engine.StateOp{upsert("other", "1")}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		f    engine.StateFilter
		want string
	}{
		{engine.StateFilter{}, `__wm__={"eventTimeMs":5},gate=null,tumb:60` + "\x1f" + `a={"windowEnd":100},tumb:60` + "\x1f" + `b={"windowEnd":200}`},
		{engine.StateFilter{Keys: []string{"gate", "missing"}}, "gate=null"},
		{engine.StateFilter{Prefix: "tumb:60\x1f", RipeAtOrBefore: 150, HasRipe: true}, `tumb:60` + "\x1f" + `a={"windowEnd":100}`},
		{engine.StateFilter{RipeAtOrBefore: 200, HasRipe: true}, `tumb:60` + "\x1f" + `a={"windowEnd":100},tumb:60` + "\x1f" + `b={"windowEnd":200}`},
		{engine.StateFilter{Prefix: "zzz"}, ""},
	} {
		if got := n.state(id, p1, c.f); got != c.want {
			t.Errorf("filter %+v: %q, want %q", c.f, got, c.want)
		}
	}
	if got := n.state(id, p2, engine.StateFilter{}); got != "other=1" {
		t.Errorf("shard p2: %q", got)
	}
	if got := n.state(engine.UUID{5}, p1, engine.StateFilter{}); got != "" {
		t.Errorf("unknown query: %q", got)
	}
}

// TestStreamsBounds: a key, a value or a query's state above its bound
// refuses the whole cycle.
func TestStreamsBounds(t *testing.T) {
	n := openNode(t, t.TempDir())
	defer n.close()
	id := n.register("b", "h", false).Query.ID
	p := engine.UUID{1}
	big := strings.Repeat("x", engine.MaxStateValueBytes)
	for _, ops := range [][]engine.StateOp{
		{upsert(strings.Repeat("k", engine.MaxStateKeyBytes+1), "1")},
		{upsert("k", big+"x")},
	} {
		if _, err := n.e.Cycle(context.Background(), engine.StreamCycle{QueryID: id, PartitionID: p, State: ops}); !errors.Is(err, engine.ErrTooLarge) {
			t.Fatalf("over a bound: %v", err)
		}
	}
	// Fill the query up to its bound, one value per cycle; the next is refused.
	perRow := int64(len(big) + 8 + engine.MaxStateRowOverhead)
	fit := int(engine.MaxQueryStateBytes / perRow)
	for i := 0; i < fit; i++ {
		if _, err := n.e.Cycle(context.Background(), engine.StreamCycle{QueryID: id, PartitionID: p, State: []engine.StateOp{upsert(fmt.Sprintf("k%07d", i), big)}}); err != nil {
			t.Fatalf("row %d of %d: %v", i, fit, err)
		}
	}
	if _, err := n.e.Cycle(context.Background(), engine.StreamCycle{QueryID: id, PartitionID: p, State: []engine.StateOp{upsert("one-more", big)}}); !errors.Is(err, engine.ErrTooLarge) {
		t.Fatalf("past the query's bound: %v", err)
	}
	// Replacing a value in place, or deleting, still works at the bound.
	if _, err := n.e.Cycle(context.Background(), engine.StreamCycle{QueryID: id, PartitionID: p, State: []engine.StateOp{{Key: "k0000000", Delete: true}, upsert("one-more", big)}}); err != nil {
		t.Fatalf("a delete and an upsert at the bound: %v", err)
	}
}

// TestStreamsSurviveRestart: registry and state come back from the journal
// alone and from a snapshot, and a reset replays as a reset.
func TestStreamsSurviveRestart(t *testing.T) {
	for _, every := range []int64{-1, 0} {
		t.Run(fmt.Sprintf("snapshotEvery=%d", every), func(t *testing.T) {
			dir := t.TempDir()
			n := openNode(t, dir, every)
			a := n.register("a", "h", false).Query.ID
			b := n.register("b", "h", false).Query.ID
			p := engine.UUID{3}
			for _, q := range []engine.UUID{a, b} {
				if _, err := n.e.Cycle(context.Background(), engine.StreamCycle{QueryID: q, PartitionID: p, State: []engine.StateOp{
					upsert("x", `{"windowEnd":10}`), upsert("y", "2"), {Key: "y", Delete: true}, upsert("z", `"3"`)}}); err != nil {
					t.Fatal(err)
				}
			}
			n.state(a, p, engine.StateFilter{})
			n.register("b", "h2", true) // reset: b's state goes
			n.close()
			n = openNode(t, dir, every)
			defer n.close()
			if got := n.state(a, p, engine.StateFilter{}); got != `x={"windowEnd":10},z="3"` {
				t.Fatalf("a's state after restart: %q", got)
			}
			if got := n.state(b, p, engine.StateFilter{}); got != "" {
				t.Fatalf("b's state after restart (reset before it): %q", got)
			}
			qs := n.e.Queries()
			if len(qs) != 2 || qs[0].ID != a || qs[1].ID != b || qs[1].ConfigHash != "h2" || qs[0].SinkQueue != "sink" {
				t.Fatalf("queries after restart: %+v", qs)
			}
			if r := n.register("a", "h", false); r.Fresh || r.Query.ID != a {
				t.Fatalf("a after restart: %+v", r)
			}
		})
	}
}
