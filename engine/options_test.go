package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

var testKey = bytes.Repeat([]byte{0x42}, 32)

// TestEncryptionSealsPayloadsAtRest: an encrypting queue's payloads are
// sealed in the journal (no plaintext in any record), opened on delivery,
// and survive a restart; the DLQ opens them too.
func TestEncryptionSealsPayloadsAtRest(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.EncryptionKey = testKey })
	f.configure("secret", func(o *QueueOptions) { o.EncryptionEnabled = true })
	secret := []byte(`{"card":"4111-1111-1111-1111"}`)
	if r := f.pushItems(PushItem{Queue: "secret", Payload: secret}); r[0].Status != Queued {
		t.Fatalf("push: %+v", r[0])
	}
	f.push("plain", "", "visible-text")
	f.j.mu.Lock()
	var sawPlain bool
	for _, rec := range f.j.recs {
		if bytes.Contains(rec, []byte("4111-1111")) {
			t.Errorf("plaintext payload in a journal record")
		}
		sawPlain = sawPlain || bytes.Contains(rec, []byte("visible-text"))
	}
	f.j.mu.Unlock()
	if !sawPlain {
		t.Fatal("the check cannot see payloads at all") // the test's own control
	}
	msgs := f.pop(PopRequest{Queue: "secret"})
	if len(msgs) != 1 || !bytes.Equal(msgs[0].Payload, secret) {
		t.Fatalf("delivered %q", payloads(msgs))
	}
	it := ackOf(msgs[0], DLQ)
	f.ack(it)
	f.restart()
	dlq, _, _ := f.e.DLQ(DLQFilter{Queue: "secret"})
	if len(dlq) != 1 || !bytes.Equal(dlq[0].Message.Payload, secret) {
		t.Fatalf("DLQ after restart: %+v", dlq)
	}
	again := f.pop(PopRequest{Queue: "secret", Group: "replay"})
	if len(again) != 1 || !bytes.Equal(again[0].Payload, secret) {
		t.Fatalf("replay after restart: %q", payloads(again))
	}
}

// TestEncryptionWithoutKeyRefusesPushes: Queen stores plaintext silently;
// Regent refuses with a clear error.
func TestEncryptionWithoutKeyRefusesPushes(t *testing.T) {
	f := newFixture(t)
	f.configure("secret", func(o *QueueOptions) { o.EncryptionEnabled = true })
	r := f.pushItems(PushItem{Queue: "secret", Payload: []byte("x")})
	if r[0].Status != Failed || !errors.Is(r[0].Err, ErrEncryption) {
		t.Fatalf("push without a key: %+v", r[0])
	}
	res, err := f.e.Transaction(context.Background(), nil, []PushItem{{Queue: "secret", Payload: []byte("x")}})
	if err != nil || !errors.Is(res.Err, ErrEncryption) {
		t.Fatalf("transaction without a key: %+v %v", res, err)
	}
}

func TestProducerSubIsKeptWithTheMessage(t *testing.T) {
	f := newFixture(t)
	f.pushItems(PushItem{Queue: "q", Payload: []byte("a"), ProducerSub: "svc-orders"}, PushItem{Queue: "q", Payload: []byte("b")})
	f.restart()
	msgs := f.pop(PopRequest{Queue: "q", Batch: 2})
	if len(msgs) != 2 || msgs[0].ProducerSub != "svc-orders" || msgs[1].ProducerSub != "" {
		t.Fatalf("subjects: %+v", msgs)
	}
}

// TestDelayedProcessing: a message is not delivered before createdAt +
// delay, and the messages after it wait behind it (order holds); a parked
// poll is woken when the delay passes, by the partition's timer.
func TestDelayedProcessing(t *testing.T) {
	f := newFixture(t)
	f.configure("later", func(o *QueueOptions) { o.DelayedProcessing = 10 * time.Second })
	f.push("later", "", "first")
	f.clock.Advance(4 * time.Second)
	f.push("later", "", "second")
	if got := f.pop(PopRequest{Queue: "later", Batch: 5}); len(got) != 0 {
		t.Fatalf("delivered before the delay: %s", payloads(got))
	}
	ch := make(chan []Message, 1)
	f.e.PopAsync(PopRequest{Queue: "later", Batch: 5, Wait: true, Timeout: time.Minute}, func(m []Message, _ bool, err error) { ch <- m })
	f.advance(5 * time.Second) // 9 s after the first
	select {
	case m := <-ch:
		t.Fatalf("woken before the delay: %s", payloads(m))
	default:
	}
	f.advance(1100 * time.Millisecond) // 10.1 s: the first is visible, the second not yet
	select {
	case m := <-ch:
		wantPayloads(t, m, "first")
	case <-time.After(5 * time.Second):
		t.Fatal("the partition's timer did not wake the parked poll")
	}
}

// TestWindowBuffer: a partition is served only once its newest message is
// windowBuffer old, so a burst comes out as one batch.
func TestWindowBuffer(t *testing.T) {
	f := newFixture(t)
	f.configure("burst", func(o *QueueOptions) { o.WindowBuffer = 2 * time.Second })
	f.push("burst", "", "a")
	f.advance(1500 * time.Millisecond)
	f.push("burst", "", "b")
	f.advance(1500 * time.Millisecond) // a is 3 s old, b only 1.5 s
	if got := f.pop(PopRequest{Queue: "burst", Batch: 10}); len(got) != 0 {
		t.Fatalf("served inside the window: %s", payloads(got))
	}
	f.advance(600 * time.Millisecond)
	wantPayloads(t, f.pop(PopRequest{Queue: "burst", Batch: 10}), "a,b")
}

// TestMaxSize: pushes past the queue's maxSize are refused per item; room
// comes back as the slowest group finishes messages.
func TestMaxSize(t *testing.T) {
	f := newFixture(t)
	f.configure("small", func(o *QueueOptions) { o.MaxSize = 3 })
	res := f.push("small", "p1", "1", "2")
	res = append(res, f.push("small", "p2", "3", "4")...)
	if res[0].Status != Queued || res[1].Status != Queued || res[2].Status != Queued || res[3].Status != Failed || !errors.Is(res[3].Err, ErrQueueFull) {
		t.Fatalf("results: %+v", res)
	}
	// A transaction that would go past it changes nothing.
	tr, err := f.e.Transaction(context.Background(), nil, []PushItem{{Queue: "small", TransactionID: "t-x", Payload: []byte("x")}})
	if err != nil || !errors.Is(tr.Err, ErrQueueFull) {
		t.Fatalf("transaction: %+v %v", tr, err)
	}
	// Two groups: room comes back only when the slower one finishes.
	fast := f.pop(PopRequest{Queue: "small", Group: "fast", Batch: 10, Partitions: 2})
	slow := f.pop(PopRequest{Queue: "small", Group: "slow", Batch: 1, Partitions: 1})
	f.ackMsgs(fast, Completed)
	if r := f.push("small", "p1", "5"); r[0].Status != Failed {
		t.Fatalf("room before the slow group finished: %+v", r[0])
	}
	f.ackMsgs(slow, Completed)
	for {
		m := f.pop(PopRequest{Queue: "small", Group: "slow", Batch: 10, Partitions: 2})
		if len(m) == 0 {
			break
		}
		f.ackMsgs(m, Completed)
	}
	if d, _ := f.e.Depth("small"); d != 0 {
		t.Fatalf("depth %d after everything was done", d)
	}
	if r := f.push("small", "p1", "5", "6", "7", "8"); r[2].Status != Queued || r[3].Status != Failed {
		t.Fatalf("after the room came back: %+v", r)
	}
	// The transactionId of the refused transaction is free.
	if r := f.pushItems(PushItem{Queue: "other", TransactionID: "t-x"}); r[0].Status != Queued {
		t.Fatalf("%+v", r[0])
	}
	f.restart()
	if d, _ := f.e.Depth("small"); d != 3 {
		t.Fatalf("depth after restart %d, want 3", d)
	}
}

// TestDedupWindow: a transactionId is a duplicate within the queue's window
// (across a restart too), and free again after it.
func TestDedupWindow(t *testing.T) {
	f := newFixture(t)
	f.configure("d", func(o *QueueOptions) { o.DedupWindow = 10 * time.Minute })
	first := f.pushItems(PushItem{Queue: "d", TransactionID: "pay-1", Payload: []byte("a")})
	f.clock.Advance(9 * time.Minute)
	if r := f.pushItems(PushItem{Queue: "d", TransactionID: "pay-1"}); r[0].Status != Duplicate || r[0].MessageID != first[0].MessageID {
		t.Fatalf("inside the window: %+v", r[0])
	}
	f.restart()
	if r := f.pushItems(PushItem{Queue: "d", TransactionID: "pay-1"}); r[0].Status != Duplicate {
		t.Fatalf("inside the window, after a restart: %+v", r[0])
	}
	f.clock.Advance(2 * time.Minute)
	if r := f.pushItems(PushItem{Queue: "d", TransactionID: "pay-1", Payload: []byte("b")}); r[0].Status != Queued {
		t.Fatalf("after the window: %+v", r[0])
	}
	// Many ids in one run, some repeated: the map path of long runs.
	var items []PushItem
	for i := 0; i < 40; i++ {
		items = append(items, PushItem{Queue: "d", TransactionID: fmt.Sprint("bulk-", i%30)})
	}
	res := f.pushItems(items...)
	for i, r := range res {
		if want := Queued; i >= 30 {
			if r.Status != Duplicate || r.MessageID != res[i-30].MessageID {
				t.Fatalf("item %d: %+v", i, r)
			}
		} else if r.Status != want {
			t.Fatalf("item %d: %+v", i, r)
		}
	}
}

// TestDedupFingerprintCollisionIsNotADuplicate: two ids whose fingerprints
// collide are told apart by the stored message.
func TestDedupFingerprintCollisionIsNotADuplicate(t *testing.T) {
	var x dedupIndex
	x.put(fingerprint("a"), 5, 0)
	if off, ok := x.get(fingerprint("a")); !ok || off != 5 {
		t.Fatalf("get: %d %v", off, ok)
	}
	f := newFixture(t)
	f.pushItems(PushItem{Queue: "c", TransactionID: "one"})
	p := f.e.queue("c").partition(DefaultPartition)
	p.st().mu.Lock()
	// Forge a collision: "two" points at the message of "one".
	p.dedup.put(fingerprint("two"), 0, 0)
	p.st().mu.Unlock()
	if r := f.pushItems(PushItem{Queue: "c", TransactionID: "two"}); r[0].Status != Queued {
		t.Fatalf("a colliding fingerprint refused a new message: %+v", r[0])
	}
}

// TestRetentionByAge: retentionSeconds removes old messages (whole push
// records), moves cursors past them, and survives a restart.
func TestRetentionByAge(t *testing.T) {
	f := newFixture(t)
	f.configure("r", func(o *QueueOptions) { o.RetentionEnabled, o.RetentionSeconds = true, 60 })
	f.push("r", "", "old1", "old2")
	f.clock.Advance(45 * time.Second)
	f.push("r", "", "new")
	f.clock.Advance(20 * time.Second) // old ones are 65 s old, new one 20 s
	if n, err := f.e.RetentionSweep(); err != nil || n != 2 {
		t.Fatalf("sweep removed %d, %v", n, err)
	}
	wantPayloads(t, f.pop(PopRequest{Queue: "r", Group: "late", Batch: 10}), "new")
	f.restart()
	wantPayloads(t, f.pop(PopRequest{Queue: "r", Group: "later", Batch: 10}), "new")
	if qi, _ := f.e.Queue("r"); qi.Messages != 1 {
		t.Fatalf("queue holds %d messages", qi.Messages)
	}
}

// TestCompletedRetention: completedRetentionSeconds removes only what every
// group has passed.
func TestCompletedRetention(t *testing.T) {
	f := newFixture(t)
	f.configure("c", func(o *QueueOptions) { o.RetentionEnabled, o.CompletedRetentionSeconds = true, 10 })
	f.push("c", "", "a")
	f.push("c", "", "b")
	f.ackMsgs(f.pop(PopRequest{Queue: "c", Group: "g1", Batch: 10}), Completed)
	f.ackMsgs(f.pop(PopRequest{Queue: "c", Group: "g2", Batch: 1}), Completed) // g2 passed "a" only
	f.clock.Advance(11 * time.Second)
	if n, _ := f.e.RetentionSweep(); n != 1 {
		t.Fatalf("removed %d, want only the message both groups passed", n)
	}
	wantPayloads(t, f.pop(PopRequest{Queue: "c", Group: "g2", Batch: 10}), "b")
}

// TestMaxWaitEviction: messages nobody consumed within maxWaitTimeSeconds
// are evicted and counted; a message under a live lease is not.
func TestMaxWaitEviction(t *testing.T) {
	f := newFixture(t)
	f.configure("w", func(o *QueueOptions) { o.MaxWaitTimeSeconds = 30 })
	f.push("w", "p1", "stale")
	f.push("w", "p2", "held")
	held := f.pop(PopRequest{Queue: "w", Partition: "p2"})
	f.clock.Advance(31 * time.Second)
	f.push("w", "p1", "fresh")
	if n, _ := f.e.RetentionSweep(); n != 1 {
		t.Fatalf("removed %d, want 1 (the leased message stays)", n)
	}
	if st := f.e.Stats(); st.Evicted != 1 {
		t.Fatalf("evicted %d", st.Evicted)
	}
	wantPayloads(t, f.pop(PopRequest{Queue: "w", Partition: "p1", Batch: 10}), "fresh")
	if r := f.ackMsgs(held, Completed); r[0].Err != nil {
		t.Fatalf("the leased message was evicted under its lease: %v", r[0].Err)
	}
}

// TestDLQRedriveAndPurge: redrive puts entries back at the end of their
// partition as new messages and out of the DLQ; purge drops them; both
// survive a restart.
func TestDLQRedriveAndPurge(t *testing.T) {
	f := newFixture(t)
	f.push("d", "p", "bad1", "bad2", "bad3")
	msgs := f.pop(PopRequest{Queue: "d", Batch: 3})
	f.ack(ackOf(msgs[0], DLQ), ackOf(msgs[1], DLQ), ackOf(msgs[2], DLQ))
	entries, total, _ := f.e.DLQ(DLQFilter{Queue: "d"})
	if total != 3 {
		t.Fatalf("DLQ holds %d", total)
	}
	red, err := f.e.RedriveDLQ(context.Background(), DLQFilter{Queue: "d"}, []UUID{entries[0].ID, entries[2].ID})
	if err != nil || len(red) != 2 || red[0].MessageID == msgs[0].ID {
		t.Fatalf("redrive: %+v %v", red, err)
	}
	back := f.pop(PopRequest{Queue: "d", Batch: 10})
	wantPayloads(t, back, "bad1,bad3")
	if back[0].Offset != 3 {
		t.Fatalf("redriven message at offset %d, want the end of the partition (3)", back[0].Offset)
	}
	if n, err := f.e.PurgeDLQ(context.Background(), DLQFilter{Queue: "d"}, nil); err != nil || n != 1 {
		t.Fatalf("purge: %d %v", n, err)
	}
	f.restart()
	if _, total, _ := f.e.DLQ(DLQFilter{Queue: "d"}); total != 0 {
		t.Fatalf("DLQ after restart holds %d", total)
	}
}

// TestPopByNamespaceAndTaskByPriority: a pop naming a namespace and task
// reads the queues that carry them, higher priority first, taking turns
// within a priority; a parked one is woken by a push to any of them.
func TestPopByNamespaceAndTaskByPriority(t *testing.T) {
	f := newFixture(t)
	f.configure("billing.invoice-low", func(o *QueueOptions) { o.Namespace, o.Task, o.Priority = "billing", "invoice", 1 })
	f.configure("billing.invoice-high", func(o *QueueOptions) { o.Namespace, o.Task, o.Priority = "billing", "invoice", 9 })
	f.configure("billing.refund", func(o *QueueOptions) { o.Namespace, o.Task = "billing", "refund" })
	f.push("billing.invoice-low", "", "low")
	f.push("billing.invoice-high", "", "high")
	f.push("billing.refund", "", "refund")
	first := f.pop(PopRequest{Namespace: "billing", Task: "invoice", Group: "w"})
	wantPayloads(t, first, "high")
	f.ackMsgs(first, Completed)
	low := f.pop(PopRequest{Namespace: "billing", Task: "invoice", Group: "w"})
	wantPayloads(t, low, "low")
	f.ackMsgs(low, Completed)
	wantPayloads(t, f.pop(PopRequest{Namespace: "billing", Group: "w"}), "refund")
	ch := make(chan []Message, 1)
	f.e.PopAsync(PopRequest{Task: "invoice", Group: "w", Wait: true, Timeout: time.Minute}, func(m []Message, _ bool, err error) { ch <- m })
	f.push("billing.invoice-low", "", "late")
	select {
	case m := <-ch:
		wantPayloads(t, m, "late")
	case <-time.After(5 * time.Second):
		t.Fatal("the parked pop by task was not woken")
	}
	// Queues of one priority take turns.
	f.configure("a.x", func(o *QueueOptions) { o.Namespace, o.Task = "turns", "x" })
	f.configure("b.x", func(o *QueueOptions) { o.Namespace, o.Task = "turns", "x" })
	f.push("a.x", "", "a1", "a2")
	f.push("b.x", "", "b1", "b2")
	seen := map[string]int{}
	for i := 0; i < 4; i++ {
		m := f.pop(PopRequest{Namespace: "turns", Group: "t"})
		seen[m[0].Queue]++
		f.ackMsgs(m, Completed)
	}
	if seen["a.x"] != 2 || seen["b.x"] != 2 {
		t.Fatalf("queues of one priority did not take turns: %v", seen)
	}
}

// TestEmptyIdlePartitionsAreForgotten: a partition that retention emptied
// and that stayed idle is forgotten (memory and name freed), also after a
// restart; a later push makes a new partition.
func TestEmptyIdlePartitionsAreForgotten(t *testing.T) {
	f := newFixture(t)
	f.configure("tmp", func(o *QueueOptions) { o.RetentionEnabled, o.RetentionSeconds = true, 60 })
	old := f.push("tmp", "session-1", "x")
	f.push("tmp", "session-2", "y")
	f.clock.Advance(2 * time.Minute)
	f.push("tmp", "session-2", "z") // session-2 stays busy
	f.e.RetentionSweep()            // empties session-1
	if qi, _ := f.e.Queue("tmp"); qi.Partitions != 3 {
		t.Fatalf("%d partitions before the idle time", qi.Partitions)
	}
	f.clock.Advance(ForgetIdleAfter)
	f.push("tmp", "session-2", "w")
	f.e.RetentionSweep()
	qi, _ := f.e.Queue("tmp")
	for _, p := range qi.PartitionList {
		if p.Name == "session-1" {
			t.Fatalf("the empty idle partition is still known: %+v", qi.PartitionList)
		}
	}
	f.restart()
	qi, _ = f.e.Queue("tmp")
	for _, p := range qi.PartitionList {
		if p.Name == "session-1" {
			t.Fatal("the forgotten partition came back after a restart")
		}
	}
	again := f.push("tmp", "session-1", "new")
	if again[0].PartitionID == old[0].PartitionID || again[0].Offset != 0 {
		t.Fatalf("a push to a forgotten name: %+v (old partition %s)", again[0], old[0].PartitionID)
	}
}

// TestDeleteMessage: a deleted message is never delivered again nor found,
// for any group, also after a restart from the journal and from a snapshot;
// the groups pass it as done.
func TestDeleteMessage(t *testing.T) {
	f := newFixture(t)
	res := f.pushItems(PushItem{Queue: "m", TransactionID: "a", Payload: []byte("a")},
		PushItem{Queue: "m", TransactionID: "b", Payload: []byte("b")},
		PushItem{Queue: "m", TransactionID: "c", Payload: []byte("c")})
	ok, err := f.e.DeleteMessage(context.Background(), res[1].PartitionID, "b")
	if err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if ok, _ := f.e.DeleteMessage(context.Background(), res[1].PartitionID, "b"); ok {
		t.Fatal("deleted twice")
	}
	msgs := f.pop(PopRequest{Queue: "m", Batch: 10})
	wantPayloads(t, msgs, "a,c")
	if r := f.ackMsgs(msgs, Completed); r[0].Err != nil || r[1].Err != nil {
		t.Fatalf("acks: %+v", r)
	}
	if got := f.pop(PopRequest{Queue: "m", Batch: 10}); len(got) != 0 {
		t.Fatalf("after acking the rest: %s", payloads(got))
	}
	if _, err := f.e.FindMessage(res[1].PartitionID, "b"); !errors.Is(err, ErrMessageNotFound) {
		t.Fatalf("find a deleted message: %v", err)
	}
	// A group that only meets the deleted message passes it.
	one := f.pushItems(PushItem{Queue: "solo", TransactionID: "x", Payload: []byte("x")})
	f.e.DeleteMessage(context.Background(), one[0].PartitionID, "x")
	if got := f.pop(PopRequest{Queue: "solo", Batch: 10}); len(got) != 0 {
		t.Fatalf("deleted-only partition delivered %s", payloads(got))
	}
	f.push("solo", "", "y")
	wantPayloads(t, f.pop(PopRequest{Queue: "solo", Batch: 10}), "y")
	f.restart()
	wantPayloads(t, f.pop(PopRequest{Queue: "m", Group: "fresh", Batch: 10}), "a,c")
	if err := f.e.Snapshot(); err != nil {
		t.Fatal(err)
	}
	f.restart()
	wantPayloads(t, f.pop(PopRequest{Queue: "m", Group: "fresher", Batch: 10}), "a,c")
}
