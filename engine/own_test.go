package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// lender hands out strings that alias buffers it can spoil later, as the
// binary protocol's pooled decode arenas do: a string the engine keeps
// without copying it reads as "#####" once spoiled.
type lender struct{ bufs [][]byte }

func (l *lender) s(v string) string {
	if v == "" {
		return ""
	}
	b := []byte(v)
	l.bufs = append(l.bufs, b)
	return unsafe.String(&b[0], len(b))
}

func (l *lender) spoil() {
	for _, b := range l.bufs {
		for i := range b {
			b[i] = '#'
		}
	}
	l.bufs = nil
}

// TestEngineOwnsWhatItKeeps drives every operation that keeps a string with
// strings that alias a caller's buffer, spoils the buffer after each call
// (and after each answer), and then checks every kept string: in memory,
// after a restart from the journal, and after a restart from a snapshot.
func TestEngineOwnsWhatItKeeps(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Stripes = 4 })
	var ln lender
	ctx := context.Background()
	after := func() { ln.spoil() }

	// Configure: name, namespace and task.
	o := DefaultQueueOptions()
	o.RetryLimit = 0
	o.Namespace, o.Task = ln.s("billing-ns"), ln.s("invoice-task")
	if _, err := f.e.Configure(context.Background(), ln.s("orders"), o); err != nil {
		t.Fatal(err)
	}
	after()
	// Push: auto-created dotted queue (namespace and task cut from the
	// name), partition names, transactionIds, traceIds, producer subject.
	for i := 0; i < 3; i++ {
		items := []PushItem{
			{Queue: ln.s("orders"), Partition: ln.s("cust-a"), TransactionID: ln.s(fmt.Sprintf("txn-a%d", i)), TraceID: ln.s(fmt.Sprintf("trace-a%d", i)), ProducerSub: ln.s("alice"), Payload: []byte(fmt.Sprintf("a%d", i))},
			{Queue: ln.s("orders"), Partition: ln.s("cust-b"), TransactionID: ln.s(fmt.Sprintf("txn-b%d", i)), Payload: []byte(fmt.Sprintf("b%d", i))},
			{Queue: ln.s("metrics.cpu"), Partition: ln.s("host-1"), TransactionID: ln.s(fmt.Sprintf("txn-m%d", i)), Payload: []byte(fmt.Sprintf("m%d", i))},
		}
		res := f.pushItems(items...)
		after()
		for _, r := range res {
			if r.Status != Queued {
				t.Fatalf("push: %+v", r)
			}
		}
	}
	// A parked pop by partition name, woken by a push.
	got := make(chan []Message, 1)
	f.e.PopAsync(PopRequest{Queue: ln.s("orders"), Partition: ln.s("cust-c"), Group: ln.s("late-group"), Wait: true, Timeout: time.Minute},
		func(m []Message, _ bool, err error) {
			if err != nil {
				t.Errorf("parked pop: %v", err)
			}
			got <- m
		})
	after()
	f.pushItems(PushItem{Queue: ln.s("orders"), Partition: ln.s("cust-c"), Payload: []byte("c0")})
	after()
	select {
	case m := <-got:
		if len(m) != 1 || string(m[0].Payload) != "c0" || m[0].Partition != "cust-c" || m[0].Group != "late-group" {
			t.Fatalf("parked pop answered %+v", m)
		}
		f.ack(ackOf(m[0], Completed))
	case <-time.After(10 * time.Second):
		t.Fatal("a parked pop whose partition name was spoiled was never woken")
	}
	// Pops by group, then dlq acks and failed acks past the retry limit,
	// each with an error text; a transaction with a push.
	for _, part := range []string{"cust-a", "cust-b"} {
		msgs := f.pop(PopRequest{Queue: ln.s("orders"), Partition: ln.s(part), Group: ln.s("billing"), Batch: 3})
		after()
		if len(msgs) != 3 {
			t.Fatalf("pop %s: %d messages", part, len(msgs))
		}
		items := []AckItem{ackOf(msgs[0], DLQ), ackOf(msgs[1], Completed), ackOf(msgs[2], FailedAck)}
		items[0].Group, items[1].Group, items[2].Group = ln.s("billing"), ln.s("billing"), ln.s("billing")
		items[0].Error = ln.s("dlq error of " + part)
		items[2].Error = ln.s("failed error of " + part)
		res := f.ack(items...)
		after()
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("ack: %v", r.Err)
			}
		}
	}
	msgs := f.pop(PopRequest{Queue: ln.s("metrics.cpu"), Group: ln.s("txn-group"), Batch: 1})
	after()
	tr, err := f.e.Transaction(ctx, []AckItem{{PartitionID: msgs[0].PartitionID, HasOffset: true, Offset: msgs[0].Offset,
		LeaseID: msgs[0].LeaseID, Group: ln.s("txn-group"), Status: Completed}},
		[]PushItem{{Queue: ln.s("orders"), Partition: ln.s("from-txn"), TransactionID: ln.s("txn-t0"), TraceID: ln.s("trace-t0"), ProducerSub: ln.s("bob"), Payload: []byte("t0")}})
	after()
	if err != nil || tr.Err != nil {
		t.Fatalf("transaction: %v %v", err, tr.Err)
	}
	// A seek creates no group: the group's first pop does, and the seek
	// moves it.
	f.pop(PopRequest{Queue: ln.s("orders"), Group: ln.s("seek-group"), AutoAck: true})
	after()
	if _, err := f.e.Seek(context.Background(), ln.s("orders"), ln.s("seek-group"), "", SeekTarget{ToEnd: true}); err != nil {
		t.Fatal(err)
	}
	after()

	check := func(when string) {
		t.Helper()
		var names []string
		for _, q := range f.e.Queues() {
			var gs []string
			for _, g := range q.Groups {
				if !strings.HasPrefix(g, "reader-") { // check's own readers
					gs = append(gs, g)
				}
			}
			names = append(names, fmt.Sprintf("%s[%s/%s]%v", q.Name, q.Options.Namespace, q.Options.Task, gs))
		}
		sort.Strings(names)
		want := "metrics.cpu[metrics/cpu][txn-group] orders[billing-ns/invoice-task][billing late-group seek-group]"
		if s := strings.Join(names, " "); s != want {
			t.Errorf("%s: queues %s, want %s", when, s, want)
		}
		qi, err := f.e.Queue("orders")
		if err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, p := range qi.PartitionList {
			parts = append(parts, p.Name)
		}
		sort.Strings(parts)
		if s := strings.Join(parts, ","); s != "Default,cust-a,cust-b,cust-c,from-txn" {
			t.Errorf("%s: partitions %s", when, s)
		}
		dl, _, err := f.e.DLQ(DLQFilter{Queue: "orders"})
		if err != nil {
			t.Fatal(err)
		}
		var errs []string
		for _, d := range dl {
			errs = append(errs, d.Message.Group+":"+d.Error)
		}
		sort.Strings(errs)
		if s := strings.Join(errs, "|"); s != "billing:dlq error of cust-a|billing:dlq error of cust-b|billing:failed error of cust-a|billing:failed error of cust-b" {
			t.Errorf("%s: dead-letter errors %s", when, s)
		}
		// transactionIds, traceIds and the producer subject come back with
		// the messages; a repeated transactionId is still a duplicate.
		all := f.pop(PopRequest{Queue: "orders", Group: "reader-" + strings.ReplaceAll(when, " ", "-"), Batch: 100, Partitions: 10})
		var seen []string
		for _, m := range all {
			seen = append(seen, fmt.Sprintf("%s:%s:%s:%s", m.Partition, m.TransactionID, m.TraceID, m.ProducerSub))
		}
		sort.Strings(seen)
		wantSeen := "cust-a:txn-a0:trace-a0:alice cust-a:txn-a1:trace-a1:alice cust-a:txn-a2:trace-a2:alice " +
			"cust-b:txn-b0:: cust-b:txn-b1:: cust-b:txn-b2:: from-txn:txn-t0:trace-t0:bob"
		var kept []string
		for _, s := range seen {
			if !strings.HasPrefix(s, "cust-c:") { // pushed without a transactionId: its id
				kept = append(kept, s)
			}
		}
		if s := strings.Join(kept, " "); s != wantSeen {
			t.Errorf("%s: messages\n%s\nwant\n%s", when, s, wantSeen)
		}
		res := f.pushItems(PushItem{Queue: "orders", Partition: "cust-a", TransactionID: "txn-a1", Payload: []byte("again")})
		if res[0].Status != Duplicate {
			t.Errorf("%s: a repeated transactionId is %v", when, res[0].Status)
		}
	}
	check("in memory")
	f.restart()
	check("after restart")
	if err := f.e.Snapshot(); err != nil {
		t.Fatal(err)
	}
	f.restart()
	check("after snapshot restart")
}
