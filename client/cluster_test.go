package client_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/protocol"
)

// TestClusterRoutesByShard: three brokers of one cluster. A client dialled
// to any of them pushes to partitions spread over all three (each message
// stored by its partition's owner only), pops them all back with pops of
// any partition and of named ones, and acks them at their owners; nothing
// is lost or delivered twice. A queue configured through one broker has
// its options on every broker. A broker asked for a partition it does not
// own refuses with not_owner.
func TestClusterRoutesByShard(t *testing.T) {
	cl := brokertest.StartCluster(t, 3, nil)
	ctx := testCtx(t)
	dialAt := func(i int) *client.Client {
		c, err := client.Dial(ctx, cl.Brokers[i].TCPAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c0, c2 := dialAt(0), dialAt(2)
	o := client.DefaultQueueOptions()
	o.RetryLimit = 7
	if _, err := c2.Configure(ctx, "jobs", o); err != nil {
		t.Fatal(err)
	}
	for i, b := range cl.Brokers {
		qi, err := b.Engine().Queue("jobs")
		if err != nil || qi.Options.RetryLimit != 7 {
			t.Fatalf("broker b%d after a configure through b3: %+v %v", i+1, qi.Options, err)
		}
	}
	const parts, per = 24, 5
	// The partitions interleave: each broker's part of the push is
	// scattered over the batch, and its results go back to their places.
	var items []client.Item
	for k := range per {
		for p := range parts {
			items = append(items, client.Item{Queue: "jobs", Partition: fmt.Sprintf("p%d", p), Payload: fmt.Appendf(nil, "p%d-%d", p, k),
				TransactionID: fmt.Sprintf("t-p%d-%d", p, k)})
		}
	}
	res, err := c0.Push(ctx, items...)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	idOf := map[string]client.ID{}
	for i, r := range res {
		if r.TransactionID != items[i].TransactionID || r.Status != client.PushQueued {
			t.Fatalf("result %d: %+v, for item %s", i, r, items[i].TransactionID)
		}
		idOf[string(items[i].Payload)] = r.MessageID
	}
	holding := 0
	var total uint64
	for _, b := range cl.Brokers {
		st := b.Engine().Stats()
		total += st.Pushed
		if st.Pushed > 0 {
			holding++
		}
	}
	if total != parts*per || holding != 3 {
		t.Fatalf("%d messages stored on %d brokers, want %d on 3", total, holding, parts*per)
	}
	// Listings and figures add up the three brokers'.
	qs, err := c2.Queues(ctx)
	if err != nil || len(qs) != 1 || qs[0].Name != "jobs" || qs[0].Messages != parts*per || qs[0].PartitionCount < parts {
		t.Fatalf("queues of the cluster: %+v %v", qs, err)
	}
	qd, err := c0.QueueInfo(ctx, "jobs")
	if err != nil || qd.Messages != parts*per || len(qd.Partitions) != qd.PartitionCount || qd.Options.RetryLimit != 7 {
		t.Fatalf("queue info of the cluster: %d messages, %d partitions of %d, %v", qd.Messages, len(qd.Partitions), qd.PartitionCount, err)
	}
	if st, err := c0.Stats(ctx); err != nil || st.Pushed != parts*per {
		t.Fatalf("stats of the cluster: pushed %d, %v", st.Pushed, err)
	}
	// A broker refuses a partition it does not own.
	refused := 0
	for p := range parts {
		_, err := cl.Brokers[1].Engine().Push(ctx, []engine.PushItem{{Queue: "elsewhere", Partition: fmt.Sprintf("p%d", p), Payload: []byte("x")}})
		if err != nil {
			if protocol.CodeOf(err) != protocol.CodeNotOwner {
				t.Fatalf("a push to another broker's partition: %v", err)
			}
			refused++
		}
	}
	if refused == 0 || refused == parts {
		t.Fatalf("b2 refused %d of %d partitions", refused, parts)
	}
	// Pop everything back: a named partition, then any partition.
	seen := map[string]int{}
	got, err := c2.Queue("jobs").Partition("p3").Batch(per).Pop(ctx)
	if err != nil || len(got) != per {
		t.Fatalf("pop of p3: %d messages, %v", len(got), err)
	}
	if _, err := c2.Ack(ctx, got, client.Completed, client.AckOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, m := range got {
		seen[string(m.Payload)]++
	}
	// A message given back by a pop whose answer came second is popped
	// again: the loop ends when all were seen, or after a few seconds
	// with nothing new.
	quiet := time.Now()
	for len(seen) < parts*per && time.Since(quiet) < 5*time.Second {
		msgs, err := c0.Queue("jobs").Batch(7).Partitions(3).Wait(true).Timeout(time.Second).Pop(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) > 0 {
			quiet = time.Now()
		}
		acks, err := c0.Ack(ctx, msgs, client.Completed, client.AckOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range msgs {
			if acks[i].Err != nil {
				t.Fatalf("ack of %s: %v", m.Payload, acks[i].Err)
			}
			if m.ID != idOf[string(m.Payload)] {
				t.Fatalf("%s popped with id %v; its push answered %v", m.Payload, m.ID, idOf[string(m.Payload)])
			}
			seen[string(m.Payload)]++
		}
	}
	for _, it := range items {
		if n := seen[string(it.Payload)]; n != 1 {
			t.Errorf("%s delivered %d times", it.Payload, n)
		}
	}
	if msgs, err := c2.Queue("jobs").Pop(ctx); err != nil || len(msgs) != 0 {
		t.Fatalf("after everything was acked: %d messages, %v", len(msgs), err)
	}
	// Closing a cluster's client twice (here, and in the cleanup) is no
	// error: it closed its routing twice, a panic.
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestClusterBrokerDownIsUnavailableFast: with one broker stopped, its
// partitions answer unavailable at once (not a hang) while the others
// serve; once it is back, what it had acknowledged is there.
func TestClusterBrokerDownIsUnavailableFast(t *testing.T) {
	cl := brokertest.StartCluster(t, 3, nil)
	ctx := testCtx(t)
	c, err := client.Dial(ctx, cl.Brokers[0].TCPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var items []client.Item
	for p := range 24 {
		items = append(items, client.Item{Queue: "q", Partition: fmt.Sprintf("p%d", p), Payload: fmt.Appendf(nil, "p%d", p)})
	}
	if res, err := c.Push(ctx, items...); err != nil || res.FirstErr() != nil {
		t.Fatalf("push: %v %v", err, res.FirstErr())
	}
	down := cl.Brokers[2].Engine().Stats().Pushed
	cl.Stop(2)
	start := time.Now()
	res, err := c.Push(ctx, items...)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if took > time.Second {
		t.Fatalf("a push with one broker down took %v: %v", took, res.FirstErr())
	}
	var failed uint64
	for _, r := range res {
		if r.Err != nil {
			if protocol.CodeOf(r.Err) != protocol.CodeUnavailable {
				t.Fatalf("an item of the stopped broker: %v", r.Err)
			}
			failed++
		}
	}
	if failed != down || failed == 0 {
		t.Fatalf("%d items refused, the stopped broker held %d partitions' messages", failed, down)
	}
	cl.Restart(2)
	if qi, err := cl.Brokers[2].Engine().Queue("q"); err != nil || qi.Messages != down {
		t.Fatalf("after its restart b3 holds %d messages of q (%v); it had acknowledged %d", qi.Messages, err, down)
	}
	brokertest.CheckFor(t, 20*time.Second, func() error { // the client finds it again
		res, err := c.Push(ctx, items...)
		if err == nil {
			err = res.FirstErr()
		}
		return err
	})
}

// TestClusterTransactionsAndDLQ: a transaction whose ack and push fall in
// different shards is pushed, then acked, and sent again pushes nothing
// twice; the dead letters of every broker list as one, paged.
func TestClusterTransactionsAndDLQ(t *testing.T) {
	cl := brokertest.StartCluster(t, 3, nil)
	ctx := testCtx(t)
	c, err := client.Dial(ctx, cl.Brokers[1].TCPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Find a source partition and a sink partition of different owners.
	src, sink := "", ""
	md := map[string]int{}
	for p := range 40 {
		name := fmt.Sprintf("p%d", p)
		if _, err := c.Push(ctx, client.Item{Queue: "in", Partition: name, Payload: []byte(name)}); err != nil {
			t.Fatal(err)
		}
		for i, b := range cl.Brokers {
			if qi, err := b.Engine().Queue("in"); err == nil && qi.Messages > uint64(md[fmt.Sprint(i)]) {
				md[fmt.Sprint(i)] = int(qi.Messages)
				if src == "" {
					src = name + "@" + fmt.Sprint(i)
				} else if sink == "" && !strings.HasSuffix(src, "@"+fmt.Sprint(i)) {
					sink = name
				}
			}
		}
	}
	if src == "" || sink == "" {
		t.Fatal("no two partitions of different owners in 40")
	}
	srcPart, _, _ := strings.Cut(src, "@")
	msgs, err := c.Queue("in").Partition(srcPart).Group("g").Pop(ctx)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("pop: %d %v", len(msgs), err)
	}
	for range 2 { // the second is a repeat: its push is a duplicate
		r, err := c.Transaction().Ack(msgs[0], client.Completed).Push(client.Item{Queue: "in", Partition: sink, Payload: []byte("result")}).Commit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Pushes) != 1 || r.Pushes[0].Err != nil {
			t.Fatalf("the transaction's push: %+v", r.Pushes)
		}
	}
	got, err := c.Queue("in").Partition(sink).Group("g").Batch(10).Pop(ctx)
	if err != nil || len(got) != 2 || string(got[1].Payload) != "result" {
		t.Fatalf("the sink holds %d messages (%v), want its own and one result", len(got), err)
	}
	if again, err := c.Queue("in").Partition(srcPart).Group("g").Pop(ctx); err != nil || len(again) != 0 {
		t.Fatalf("the acked source message came back: %d %v", len(again), err)
	}
	// Dead letters on every broker, listed as one.
	o := client.DefaultQueueOptions()
	o.RetryLimit = 0
	if _, err := c.Configure(ctx, "dead", o); err != nil {
		t.Fatal(err)
	}
	const n = 30
	for p := range n {
		if _, err := c.Push(ctx, client.Item{Queue: "dead", Partition: fmt.Sprintf("p%d", p), Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	failed := 0
	for failed < n {
		ms, err := c.Queue("dead").Batch(10).Partitions(10).Pop(ctx)
		if err != nil || len(ms) == 0 {
			t.Fatalf("pop of dead: %d %v", len(ms), err)
		}
		if _, err := c.Ack(ctx, ms, client.DLQ, client.AckOptions{Error: "no"}); err != nil {
			t.Fatal(err)
		}
		failed += len(ms)
	}
	holders := 0
	for _, b := range cl.Brokers {
		if _, total, _ := b.Engine().DLQ(engine.DLQFilter{Queue: "dead"}); total > 0 {
			holders++
		}
	}
	seen := map[client.ID]bool{}
	for off := 0; ; off += 7 {
		page, total, err := c.DLQ(ctx, client.DLQFilter{Queue: "dead", Limit: 7, Offset: off})
		if err != nil {
			t.Fatal(err)
		}
		if total != n {
			t.Fatalf("total %d, want %d", total, n)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			if seen[e.ID] {
				t.Fatalf("entry %s listed twice", e.ID)
			}
			seen[e.ID] = true
		}
	}
	if len(seen) != n || holders < 2 {
		t.Fatalf("listed %d of %d dead letters held by %d brokers", len(seen), n, holders)
	}
}

// TestClusterQueueMadeAgainSurvivesRestart: a queue deleted, then made
// again by pushes, keeps its new messages when its brokers restart (the
// deletion's tombstone in etcd is not applied again at start).
func TestClusterQueueMadeAgainSurvivesRestart(t *testing.T) {
	cl := brokertest.StartCluster(t, 3, nil)
	ctx := testCtx(t)
	c, err := client.Dial(ctx, cl.Brokers[0].TCPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Configure(ctx, "again", client.DefaultQueueOptions()); err != nil {
		t.Fatal(err)
	}
	var items []client.Item
	for p := range 12 {
		items = append(items, client.Item{Queue: "again", Partition: fmt.Sprintf("p%d", p), Payload: []byte("x")})
	}
	if _, err := c.Push(ctx, items...); err != nil {
		t.Fatal(err)
	}
	if existed, err := c.DeleteQueue(ctx, "again"); err != nil || !existed {
		t.Fatalf("delete: %v %v", existed, err)
	}
	if res, err := c.Push(ctx, items...); err != nil || res.FirstErr() != nil {
		t.Fatalf("push after the delete: %v %v", err, res.FirstErr())
	}
	for i := range cl.Brokers {
		before, err := cl.Brokers[i].Engine().Queue("again")
		if err != nil {
			continue // this broker holds none of its partitions
		}
		cl.Stop(i)
		cl.Restart(i)
		after, err := cl.Brokers[i].Engine().Queue("again")
		if err != nil || after.Messages != before.Messages {
			t.Fatalf("b%d held %d messages of the queue made again; after its restart %d (%v)", i+1, before.Messages, after.Messages, err)
		}
	}
}
