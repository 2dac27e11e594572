package engine

import (
	"context"
	"testing"
	"time"
)

// flowOf returns queue q's flow, failing when QueueFlows does not list it.
func flowOf(t *testing.T, e *Engine, q string) QueueFlow {
	t.Helper()
	for _, f := range e.QueueFlows() {
		if f.Name == q {
			return f
		}
	}
	t.Fatalf("QueueFlows lists no %q", q)
	return QueueFlow{}
}

// Each queue counts what went through it, the same way as Stats counts the
// engine's: pushes, pops with their lag, acks (failed ones apart), dead
// letters, autoAck deliveries, transactions, and retention's removals.
func TestQueueFlowsCountPerQueue(t *testing.T) {
	f := newFixture(t)
	f.configure("a", func(o *QueueOptions) { o.RetryLimit = 0; o.RetryDelay = 0 })
	f.push("a", "p1", "1", "2", "3")
	f.push("a", "p2", "4")
	f.push("b", "", "x", "y")
	f.clock.Advance(1500 * time.Millisecond)
	msgs := f.pop(PopRequest{Queue: "a", Partition: "p1", Batch: 3})
	if len(msgs) != 3 {
		t.Fatalf("popped %d", len(msgs))
	}
	// Each message waited from its createdAt (unique stamps a nanosecond
	// apart) to the pop: just under 1.5 s.
	lagMs := func(m Message) uint64 { return uint64((f.clock.Now() - m.CreatedAt) / int64(time.Millisecond)) }
	wantSum, wantMax := lagMs(msgs[0])+lagMs(msgs[1])+lagMs(msgs[2]), lagMs(msgs[0])
	// Two completed, one failed (retryLimit 0: it goes to the DLQ).
	f.ackMsgs(msgs, Completed, Completed, FailedAck)
	f.clock.Advance(500 * time.Millisecond)
	bm := f.pop(PopRequest{Queue: "b", Batch: 1, AutoAck: true})
	bLag := lagMs(bm[0])

	a, b := flowOf(t, f.e, "a"), flowOf(t, f.e, "b")
	// Partitions: Default (made by configure), p1, p2.
	if a.Pushed != 4 || a.Popped != 3 || a.Acked != 3 || a.AckFailed != 1 || a.DeadLettered != 1 || a.Partitions != 3 {
		t.Errorf("queue a: %+v", a)
	}
	if a.PopLagCount != 3 || a.PopLagSumMs != wantSum || wantMax < 1499 {
		t.Errorf("queue a's lag: %d pops, %d ms in all; want 3 and %d", a.PopLagCount, a.PopLagSumMs, wantSum)
	}
	minute := f.clock.Now() / int64(time.Minute)
	if m := a.PopLagMax.In(minute); m != wantMax {
		t.Errorf("queue a's longest lag this minute: %d ms, want %d (%+v)", m, wantMax, a.PopLagMax)
	}
	if b.Pushed != 2 || b.Popped != 1 || b.Acked != 1 || b.AckFailed != 0 || b.PopLagSumMs != bLag || bLag < 1999 {
		t.Errorf("queue b (autoAck): %+v, lag %d", b, bLag)
	}
	st := f.e.Stats()
	if st.Pushed != a.Pushed+b.Pushed || st.Popped != a.Popped+b.Popped || st.Acked != a.Acked+b.Acked ||
		st.AckFailed != 1 || st.PopLagCount != 4 || st.PopLagSumMs != wantSum+bLag || st.PopLagMax.In(minute) != bLag {
		t.Errorf("Stats are not the sum of the queues: %+v", st)
	}

	// A transaction's acks and pushes count in the queues they touch.
	msgs = f.pop(PopRequest{Queue: "a", Partition: "p2", Batch: 1})
	if _, err := f.e.Transaction(context.Background(), []AckItem{ackOf(msgs[0], Completed)},
		[]PushItem{{Queue: "b", Payload: []byte("z")}}); err != nil {
		t.Fatalf("Transaction: %v", err)
	}
	if a, b := flowOf(t, f.e, "a"), flowOf(t, f.e, "b"); a.Acked != 4 || a.AckFailed != 1 || b.Pushed != 3 {
		t.Errorf("after a transaction: a %+v, b %+v", a, b)
	}

	// Retention: what it removed, what some group had not consumed, and
	// how many cuts.
	f.configure("r", func(o *QueueOptions) { o.RetentionEnabled, o.RetentionSeconds = true, 60 })
	f.push("r", "", "old1", "old2")
	f.pop(PopRequest{Queue: "r", Group: "g", Batch: 1, AutoAck: true})
	f.clock.Advance(2 * time.Minute)
	if n, err := f.e.RetentionSweep(); err != nil || n != 2 {
		t.Fatalf("sweep removed %d, %v", n, err)
	}
	r := flowOf(t, f.e, "r")
	if r.Retained != 2 || r.Evicted != 1 || r.RetentionCuts != 1 {
		t.Errorf("queue r after retention: %+v", r)
	}
	if st := f.e.Stats(); st.RetentionCuts != 1 || st.Retained != 2 {
		t.Errorf("Stats after retention: %+v", st)
	}
}

// The longest lag is kept per minute: a later minute's pops do not raise an
// earlier minute's, and a minute is readable until the minute after next.
func TestPopLagMaxPerMinute(t *testing.T) {
	var l popLag
	at := func(minute int64, sec int) int64 { return minute*int64(time.Minute) + int64(sec)*int64(time.Second) }
	msg := func(created int64) []Message { return []Message{{CreatedAt: created}} }
	const m = 29_000_000
	l.add(msg(at(m, 0)), at(m, 30))    // 30 s
	l.add(msg(at(m, 20)), at(m, 30))   // 10 s: not more
	l.add(msg(at(m, 0)), at(m+1, 5))   // 65 s, the next minute
	l.add(msg(at(m+1, 0)), at(m+1, 6)) // 6 s
	_, _, maxes := l.read()
	if maxes.In(m) != 30_000 || maxes.In(m+1) != 65_000 || maxes.In(m+2) != 0 {
		t.Fatalf("maxes %+v", maxes)
	}
	l.add(msg(at(m+2, 0)), at(m+2, 1))
	if _, _, maxes = l.read(); maxes.In(m) != 0 || maxes.In(m+1) != 65_000 || maxes.In(m+2) != 1000 {
		t.Fatalf("after minute m+2: %+v", maxes)
	}
}
