package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/log"
	"github.com/regentmq/regent/protocol"
)

func dial(t *testing.T, b *regent, opts ...client.Option) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, b.addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestEachFailSkipsRestOfPartitionBatch: the handler's error fails the
// message and the rest of that partition's batch comes back (the seed's
// "throw to fail" rule); other partitions of the batch go on.
func TestEachFailSkipsRestOfPartitionBatch(t *testing.T) {
	b := newBroker(t)
	c := dial(t, b)
	ctx := testCtx(t)
	o := client.DefaultQueueOptions()
	o.RetryDelay = 0
	c.Configure(ctx, "jobs", o)
	for _, p := range []string{"a", "b"} {
		for i := 0; i < 3; i++ {
			c.Queue("jobs").Partition(p).Push(ctx, []byte(fmt.Sprint(p, i)))
		}
	}
	var mu sync.Mutex
	var seen []string
	failed := false
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- c.Queue("jobs").Batch(10).Partitions(2).Each(runCtx, func(_ context.Context, m client.Message) error {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, string(m.Payload))
			if string(m.Payload) == "a1" && !failed {
				failed = true
				return errors.New("first try fails")
			}
			if len(seen) >= 7 { // 6 messages + a1 again, with a2 after it
				stop()
			}
			return nil
		})
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	got := strings.Join(seen, ",")
	// a2 must not be handled before a1 succeeds again.
	first := strings.Index(got, "a2")
	retry := strings.LastIndex(got, "a1")
	if first < retry {
		t.Fatalf("a2 was handled before a1 came back: %s", got)
	}
	if strings.Count(got, "a1") != 2 || !strings.Contains(got, "b2") {
		t.Fatalf("handled %s", got)
	}
}

// TestEachExtendsLeasesOfSlowHandlers: a handler that runs past the lease
// keeps it (the loop extends it), so its ack is accepted and the message is
// not handed to a second consumer. The loop renews at a third of the
// lease's life, so two renewals may be late by up to a third each; with a
// lease of 400 ms that was about 270 ms, which a race-enabled run on two
// loaded cores went past (the competitor got the message). A 1.5 s lease
// leaves a second of scheduling delay.
func TestEachExtendsLeasesOfSlowHandlers(t *testing.T) {
	b := newBroker(t)
	c := dial(t, b)
	ctx := testCtx(t)
	o := client.DefaultQueueOptions()
	o.LeaseTime = 1500 * time.Millisecond
	c.Configure(ctx, "slow", o)
	c.Queue("slow").Push(ctx, []byte("long job"))
	var calls atomic.Int32
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- c.Queue("slow").Each(runCtx, func(ctx context.Context, m client.Message) error {
			calls.Add(1)
			time.Sleep(4500 * time.Millisecond) // three lease lifetimes
			return nil
		})
	}()
	// The handler must hold the message before a competitor asks: a
	// competitor that pops first gets it, which says nothing of renewals.
	brokertest.CheckFor(t, 10*time.Second, func() error {
		if calls.Load() == 0 {
			return errors.New("the handler has not started")
		}
		return nil
	})
	// A competing consumer must not get the message while the handler runs.
	other := dial(t, b)
	deadline := time.Now().Add(3800 * time.Millisecond)
	for time.Now().Before(deadline) {
		if m, _ := other.Queue("slow").Pop(ctx); len(m) > 0 {
			t.Fatalf("the lease ran out under a running handler: another consumer got %q", m[0].Payload)
		}
		time.Sleep(50 * time.Millisecond)
	}
	brokertest.CheckFor(t, 10*time.Second, func() error { // the handler returns, and its message is acked
		if st, err := c.Stats(ctx); err != nil || st.Acked != 1 {
			return fmt.Errorf("acked %d, err %v", st.Acked, err)
		}
		return nil
	})
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler called %d times", n)
	}
	if m, _ := other.Queue("slow").Pop(ctx); len(m) != 0 {
		t.Fatal("the completed message came back")
	}
}

// TestEachGivesBackOnShutdown: when ctx ends mid-batch, the rest of the
// batch is acked retry and comes back at once, with no retry spent.
func TestEachGivesBackOnShutdown(t *testing.T) {
	b := newBroker(t)
	c := dial(t, b)
	ctx := testCtx(t)
	for i := 0; i < 5; i++ {
		c.Queue("q").Push(ctx, []byte(fmt.Sprint(i)))
	}
	runCtx, stop := context.WithCancel(ctx)
	err := c.Queue("q").Batch(5).Each(runCtx, func(_ context.Context, m client.Message) error {
		if string(m.Payload) == "1" {
			stop()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rest, err := c.Queue("q").Batch(10).Pop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range rest {
		got = append(got, string(m.Payload))
		if m.RetryCount != 0 {
			t.Fatalf("giving back spent a retry: %+v", m)
		}
	}
	if strings.Join(got, ",") != "2,3,4" {
		t.Fatalf("after shutdown the queue holds %v, want 2,3,4", got)
	}
}

func TestProducerBatchesOnSizeAndTime(t *testing.T) {
	b := newBroker(t)
	c := dial(t, b)
	ctx := testCtx(t)
	p := c.Producer(client.ProducerOptions{BatchSize: 10, Linger: 20 * time.Millisecond})
	var pend []*client.Pending
	for i := 0; i < 25; i++ {
		pend = append(pend, p.Send(client.Item{Queue: "prod", Payload: []byte(fmt.Sprint(i))}))
	}
	for i, w := range pend {
		r, err := w.Wait(ctx)
		if err != nil || r.Status != client.PushQueued || r.Offset != uint64(i) {
			t.Fatalf("send %d: %+v %v", i, r, err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if r, _ := p.Send(client.Item{Queue: "prod"}).Wait(ctx); r.Status == client.PushQueued {
		t.Fatal("a closed producer sent")
	}
	// 25 messages in batches of 10: 3 push requests (10, 10, and 5 by linger).
	st, _ := c.Stats(ctx)
	if st.Pushed != 25 {
		t.Fatalf("pushed %d", st.Pushed)
	}
}

// TestConnectionLossFailsPendingCallsAndReconnects: a broker restart fails
// the parked call with ErrConnLost, and the client reconnects by itself.
func TestConnectionLossFailsPendingCallsAndReconnects(t *testing.T) {
	dir := t.TempDir()
	b := startRegent(t, broker.Options{Journal: log.Config{Dir: dir}})
	c := dial(t, b, client.WithConns(1), client.WithReconnectBackoff(10*time.Millisecond, 100*time.Millisecond))
	ctx := testCtx(t)
	c.Queue("r").Push(ctx, []byte("before"))
	// The push's slot is given back just after its answer is sent: wait for
	// it, or the poll below could be counted parked before it was sent (it
	// then reaches a draining broker and is refused "closed").
	brokertest.CheckFor(t, 5*time.Second, func() error {
		if n := b.TCPInFlight(); n != 0 {
			return fmt.Errorf("%d requests in flight at the broker, want none", n)
		}
		return nil
	})
	parked := make(chan error, 1)
	go func() {
		_, err := c.Queue("other").Wait(true).Timeout(10 * time.Second).Pop(ctx)
		parked <- err
	}()
	brokertest.CheckFor(t, 5*time.Second, func() error { // the poll parks at the broker
		if n := b.TCPInFlight(); n != 1 {
			return fmt.Errorf("%d requests in flight at the broker, want the parked poll", n)
		}
		return nil
	})
	b.Exit()
	select {
	case err := <-parked:
		// Shutdown answers parked polls (empty) before closing; either that
		// or a lost connection is a clear answer.
		if err != nil && !errors.Is(err, client.ErrConnLost) {
			t.Fatalf("parked call: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the parked call never returned")
	}
	// While the broker is down, calls wait for a connection within their
	// context.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := c.Queue("r").Push(short, []byte("x")); err == nil {
		t.Fatal("push to a stopped broker succeeded")
	}
	// The broker comes back on the same address: the client reconnects.
	startRegent(t, broker.Options{Journal: log.Config{Dir: dir}, TCPAddr: b.addr})
	m, err := c.Queue("r").Pop(ctx)
	if err != nil || len(m) != 1 || string(m[0].Payload) != "before" {
		t.Fatalf("after restart: %+v %v", m, err)
	}
}

func TestAckErrorsCarryCodes(t *testing.T) {
	b := newBroker(t)
	c := dial(t, b)
	ctx := testCtx(t)
	c.Queue("codes").Push(ctx, []byte("x"))
	m, _ := c.Queue("codes").Pop(ctx)
	m[0].LeaseID = client.ID{1}
	res, err := c.Ack(ctx, m, client.Completed, client.AckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pe *protocol.Error
	if !errors.As(res[0].Err, &pe) || pe.Code != protocol.CodeLeaseInvalid {
		t.Fatalf("forged lease: %v", res[0].Err)
	}
	if _, err := c.Queue("").Pop(ctx); !errors.As(err, &pe) || pe.Code != protocol.CodeInvalid {
		t.Fatalf("empty queue name: %v", err)
	}
}

func TestIDRoundTrip(t *testing.T) {
	id := client.ID{0x01, 0x9a, 0xbc, 0xde, 0xf0, 0x12, 0x70, 0x34, 0x80, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x12}
	got, err := client.ParseID(id.String())
	if err != nil || got != id {
		t.Fatalf("%s -> %v %v", id, got, err)
	}
	if _, err := client.ParseID("not-a-uuid"); err == nil {
		t.Fatal("parsed garbage")
	}
	ids := []string{id.String()}
	sort.Strings(ids)
}

func TestPopByLabels(t *testing.T) {
	b := newBroker(t)
	c := dial(t, b)
	ctx := testCtx(t)
	o := client.DefaultQueueOptions()
	o.Namespace, o.Task, o.Priority = "media", "resize", 2
	c.Configure(ctx, "resize-fast", o)
	o.Priority = 1
	c.Configure(ctx, "resize-slow", o)
	c.Queue("resize-slow").Push(ctx, []byte("slow"))
	c.Queue("resize-fast").Push(ctx, []byte("fast"))
	m, err := c.Labels("media", "resize").AutoAck(true).Pop(ctx)
	if err != nil || len(m) != 1 || string(m[0].Payload) != "fast" || m[0].Queue != "resize-fast" {
		t.Fatalf("pop by labels: %+v %v", m, err)
	}
}

// TestPopBatchReusesMemory: a Batch popped into again keeps its message
// slice, its string arena and its ack results, and still answers right.
func TestPopBatchReusesMemory(t *testing.T) {
	c, ctx := thirtyMessages(t, "reuse", "payload-%02d")
	req := client.PopRequest{Queue: "reuse", Batch: 10}
	var bt client.Batch
	var msgs0 *client.Message
	var pay0 *byte
	var res0 *client.AckResult
	for round := 0; round < 3; round++ {
		if err := c.PopBatch(ctx, req, &bt); err != nil {
			t.Fatal(err)
		}
		if len(bt.Messages) != 10 {
			t.Fatalf("round %d: %d messages", round, len(bt.Messages))
		}
		for i, m := range bt.Messages {
			if want := fmt.Sprintf("payload-%02d", round*10+i); string(m.Payload) != want || m.Queue != "reuse" || m.TransactionID != m.ID.String() {
				t.Fatalf("round %d message %d: %q %q %q (id %s)", round, i, m.Payload, m.Queue, m.TransactionID, m.ID)
			}
		}
		res, err := c.AckBatch(ctx, &bt, client.Completed, client.AckOptions{})
		if err != nil || len(res) != 10 {
			t.Fatal(len(res), err)
		}
		for i, r := range res {
			if r.Err != nil {
				t.Fatalf("round %d ack %d: %v", round, i, r.Err)
			}
		}
		if round == 0 {
			msgs0, pay0, res0 = unsafe.SliceData(bt.Messages), unsafe.SliceData(bt.Messages[0].Payload), &res[0]
			continue
		}
		if unsafe.SliceData(bt.Messages) != msgs0 || unsafe.SliceData(bt.Messages[0].Payload) != pay0 || &res[0] != res0 {
			t.Fatalf("round %d: the batch's memory was not reused", round)
		}
	}
	// A pop given up on leaves the batch usable.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.PopBatch(cctx, client.PopRequest{Queue: "reuse", Batch: 10}, &bt); err == nil {
		t.Fatal("a cancelled pop answered")
	}
	if len(bt.Messages) != 0 {
		t.Fatalf("a failed pop left %d messages", len(bt.Messages))
	}
	// (Another queue: the given-up pop may still reach the broker, after
	// a push on another of the client's connections.)
	c.Queue("reuse2").Push(ctx, []byte("late"))
	if err := c.PopBatch(ctx, client.PopRequest{Queue: "reuse2", Batch: 10}, &bt); err != nil || len(bt.Messages) != 1 || string(bt.Messages[0].Payload) != "late" {
		t.Fatalf("after a cancelled pop: %v %d", err, len(bt.Messages))
	}
}

// TestSendAckThenWait: an ack sent without waiting is answered through
// WaitAck, once, and a batch takes one SendAck at a time.
func TestSendAckThenWait(t *testing.T) {
	c, ctx := thirtyMessages(t, "sendack", "%d")
	req := client.PopRequest{Queue: "sendack", Batch: 10}
	var bt client.Batch
	if _, err := c.WaitAck(ctx, &bt); err == nil {
		t.Fatal("WaitAck with no ack sent answered")
	}
	for round := 0; round < 3; round++ {
		if err := c.PopBatch(ctx, req, &bt); err != nil {
			t.Fatal(err)
		}
		if len(bt.Messages) != 10 || string(bt.Messages[0].Payload) != fmt.Sprint(round*10) {
			t.Fatalf("round %d: %d messages; the acks before did not take effect?", round, len(bt.Messages))
		}
		if err := c.SendAck(ctx, &bt, client.Completed, client.AckOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.SendAck(ctx, &bt, client.Completed, client.AckOptions{}); err == nil {
			t.Fatal("a second SendAck before WaitAck was taken")
		}
		res, err := c.WaitAck(ctx, &bt)
		if err != nil || len(res) != 10 {
			t.Fatal(len(res), err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		if _, err := c.WaitAck(ctx, &bt); err == nil {
			t.Fatal("a second WaitAck answered")
		}
	}
}

// thirtyMessages starts a broker and pushes 30 messages to queue, payload i
// formatted with format.
func thirtyMessages(t *testing.T, queue, format string) (*client.Client, context.Context) {
	c := dial(t, newBroker(t))
	ctx := testCtx(t)
	for i := 0; i < 30; i++ {
		if _, err := c.Queue(queue).Push(ctx, []byte(fmt.Sprintf(format, i))); err != nil {
			t.Fatal(err)
		}
	}
	return c, ctx
}

// TestPushRetriesWhenTheJournalIsBehind: with a journal that takes little
// ahead of its disk (MaxQueuedBytes 100 KiB), concurrent pushes of 64 KiB
// are answered "overloaded" by the broker, which keeps nothing of them; the
// client sends them again after a back-off, and every one is queued once.
func TestPushRetriesWhenTheJournalIsBehind(t *testing.T) {
	b := startRegent(t, broker.Options{Journal: log.Config{MaxBatchBytes: 64 << 10, MaxQueuedBytes: 100 << 10}})
	c := dial(t, b)
	ctx := testCtx(t)
	payload := bytes.Repeat([]byte{'p'}, 64<<10)
	const producers, each = 16, 10
	var wg sync.WaitGroup
	errs := make(chan error, producers*each)
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				txn := fmt.Sprintf("p%d-%d", p, i)
				res, err := c.Push(ctx, client.Item{Queue: "behind", Partition: fmt.Sprint(p % 4), TransactionID: txn, Payload: payload})
				if err == nil && res[0].Status != client.PushQueued {
					err = fmt.Errorf("%s: %v %v", txn, res[0].Status, res[0].Err)
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := b.Journal().Stats(); st.BusyRefusals == 0 {
		t.Fatalf("the journal never refused a record (stats %+v): the test shows nothing", st)
	} else {
		t.Logf("%d records refused while the journal was behind, all sent again", st.BusyRefusals)
	}
	n := 0
	for {
		msgs, err := c.Queue("behind").Group("check").Batch(100).Partitions(4).AutoAck(true).Pop(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		n += len(msgs)
	}
	if n != producers*each {
		t.Fatalf("%d messages stored, want %d", n, producers*each)
	}
}
