package tcp_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver/internal/testhooks"
	"github.com/regentmq/regent/netserver/tcp"
	"github.com/regentmq/regent/protocol"
)

// tcpFixture is a real broker (brokertest's: journal in a temp dir,
// engine, both doors on 127.0.0.1:0) and a real client of its TCP door.
type tcpFixture struct {
	t    *testing.T
	addr string // the TCP door's
	http string // the HTTP door's (newTCP's only)
	e    *engine.Engine
	c    *client.Client
	srv  *tcp.Server // newDoor's only (tcp_auth_test.go): a broker does not lend its door
}

// newTCP starts a broker whose TCP door mods adjust; as serve does, the
// engine's pop budget fits the door's frame, so that every message a push
// accepts fits a reply.
func newTCP(t *testing.T, mods ...func(*tcp.Config)) *tcpFixture {
	t.Helper()
	b := brokertest.Start(t, broker.Options{
		Engine: engine.Config{SnapshotEveryBytes: -1},
		TuneTCP: func(c *tcp.Config) {
			for _, m := range mods {
				m(c)
			}
		},
	})
	f := &tcpFixture{t: t, addr: b.TCPAddr().String(), http: b.HTTPAddr().String(), e: b.Engine()}
	f.c = f.dial()
	t.Cleanup(func() { f.c.Close() })
	return f
}

func (f *tcpFixture) dial(opts ...client.Option) *client.Client {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, f.addr, opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func ctx5(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testhooks.Patience(10*time.Second))
	t.Cleanup(cancel)
	return ctx
}

func texts(ms []client.Message) string {
	s := ""
	for i, m := range ms {
		if i > 0 {
			s += ","
		}
		s += string(m.Payload)
	}
	return s
}

func TestTCPSeedBatchExample(t *testing.T) {
	f := newTCP(t)
	ctx := ctx5(t)
	o := client.DefaultQueueOptions()
	o.RetryDelay = 300 * time.Millisecond
	cfg, err := f.c.Configure(ctx, "events", o)
	if err != nil || !cfg.Created || cfg.Options.RetryDelay != 300*time.Millisecond {
		t.Fatalf("configure: %+v %v", cfg, err)
	}
	for i := 0; i < 4; i++ {
		if res, err := f.c.Queue("events").Push(ctx, []byte(fmt.Sprint("m", i))); err != nil || res[0].Status != client.PushQueued {
			t.Fatalf("push: %+v %v", res, err)
		}
	}
	msgs, err := f.c.Queue("events").Group("auditor").SubscriptionMode(client.FromOldest).Batch(50).Wait(true).Pop(ctx)
	if err != nil || texts(msgs) != "m0,m1,m2,m3" {
		t.Fatalf("pop: %q %v", texts(msgs), err)
	}
	res, err := f.c.AckEach(ctx,
		client.Ack{Message: msgs[0], Status: client.Completed},
		client.Ack{Message: msgs[1], Status: client.Failed, Error: "timeout"},
		client.Ack{Message: msgs[2], Status: client.Completed},
		client.Ack{Message: msgs[3], Status: client.Completed})
	if err != nil || res[0].Err != nil || res[1].Err != nil || res[2].Err == nil || res[3].Err == nil {
		t.Fatalf("acks: %+v %v", res, err)
	}
	if !errors.Is(res[2].Err, protocol.NewError(protocol.CodeLeaseInvalid, "")) {
		t.Fatalf("ack after release: %v, want lease_invalid", res[2].Err)
	}
	start := time.Now()
	again, err := f.c.Queue("events").Group("auditor").Batch(50).Wait(true).Timeout(5 * time.Second).Pop(ctx)
	if err != nil || texts(again) != "m1,m2,m3" {
		t.Fatalf("redelivery: %q %v", texts(again), err)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Fatalf("redelivered after %v, before retryDelay", waited)
	}
	if again[0].RetryCount != 1 {
		t.Fatalf("retry count %d", again[0].RetryCount)
	}
}

func TestTCPLongPollWokenByPushFromAnotherConnection(t *testing.T) {
	f := newTCP(t)
	ctx := ctx5(t)
	other := f.dial(client.WithConns(1))
	defer other.Close()
	// The queue exists (a poll on a missing queue creates nothing, so it
	// could not be seen parking): the poll's first pop creates its group.
	if _, err := other.Configure(ctx, "wake", client.DefaultQueueOptions()); err != nil {
		t.Fatal(err)
	}
	got := make(chan []client.Message, 1)
	go func() {
		m, err := f.c.Queue("wake").Wait(true).Timeout(8 * time.Second).Pop(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- m
	}()
	// The poll parks first: poll the queue's group list for it.
	brokertest.CheckFor(t, 5*time.Second, func() error {
		qs, err := other.Queues(ctx)
		if err != nil || len(qs) != 1 || len(qs[0].Groups) != 1 {
			return fmt.Errorf("the long poll never reached the broker: queues %+v, %v", qs, err)
		}
		return nil
	})
	start := time.Now()
	if _, err := other.Queue("wake").Push(ctx, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if texts(m) != "hello" {
			t.Fatalf("woken with %q", texts(m))
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("woken after %v", d)
		}
	case <-time.After(7 * time.Second):
		t.Fatal("long poll not woken by the push")
	}
}

func TestTCPEveryOperation(t *testing.T) {
	f := newTCP(t)
	ctx := ctx5(t)
	c := f.c
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.Push(ctx, client.Item{Queue: "ops", Partition: "p1", TransactionID: "tx-1", Payload: []byte("a")},
		client.Item{Queue: "ops", Partition: "p1", TransactionID: "tx-1", Payload: []byte("dup")},
		client.Item{Queue: "", Payload: []byte("bad")})
	if err != nil || res[0].Status != client.PushQueued || res[1].Status != client.PushDuplicate || res[1].MessageID != res[0].MessageID || res[2].Status != client.PushFailed {
		t.Fatalf("push: %+v %v", res, err)
	}
	if !errors.Is(res[2].Err, protocol.NewError(protocol.CodeInvalid, "")) {
		t.Fatalf("failed item: %v", res[2].Err)
	}
	msgs, err := c.Queue("ops").Partition("p1").Pop(ctx)
	if err != nil || len(msgs) != 1 || msgs[0].TransactionID != "tx-1" || msgs[0].Queue != "ops" {
		t.Fatalf("pop: %+v %v", msgs, err)
	}
	exp, err := c.Extend(ctx, msgs[0].LeaseID, time.Hour)
	if err != nil || time.Until(exp) < 59*time.Minute {
		t.Fatalf("extend: %v %v", exp, err)
	}
	// Transaction: ack the input, push the result.
	tr, err := c.Transaction().Ack(msgs[0], client.Completed).Push(client.Item{Queue: "out", Payload: []byte("result")}).Commit(ctx)
	if err != nil || tr.Err != nil || tr.Pushes[0].Status != client.PushQueued {
		t.Fatalf("txn: %+v %v", tr, err)
	}
	// A refused transaction changes nothing.
	forged := msgs[0]
	forged.LeaseID[0] ^= 0xff
	tr, err = c.Transaction().Ack(forged, client.Completed).Push(client.Item{Queue: "out", Payload: []byte("again")}).Commit(ctx)
	if err != nil || !errors.Is(tr.Err, protocol.NewError(protocol.CodeTxnAborted, "")) {
		t.Fatalf("refused txn: %+v %v", tr, err)
	}
	if out, _ := c.Queue("out").Batch(10).Pop(ctx); texts(out) != "result" {
		t.Fatalf("out holds %q", texts(out))
	}
	// DLQ through a dlq ack.
	c.Queue("ops").Partition("p2").Push(ctx, []byte("poison"))
	m2, _ := c.Queue("ops").Partition("p2").Pop(ctx)
	if r, err := c.Ack(ctx, m2, client.DLQ, client.AckOptions{Error: "cannot parse"}); err != nil || !r[0].DeadLettered {
		t.Fatalf("dlq ack: %+v %v", r, err)
	}
	dlq, total, err := c.DLQ(ctx, client.DLQFilter{Queue: "ops"})
	if err != nil || total != 1 || dlq[0].Error != "cannot parse" || string(dlq[0].Message.Payload) != "poison" {
		t.Fatalf("dlq: %+v %d %v", dlq, total, err)
	}
	qs, err := c.Queues(ctx)
	if err != nil || len(qs) != 2 {
		t.Fatalf("queues: %+v %v", qs, err)
	}
	qi, err := c.QueueInfo(ctx, "ops")
	if err != nil || len(qi.Partitions) != 2 || qi.DeadLetters != 1 {
		t.Fatalf("queue info: %+v %v", qi, err)
	}
	if _, err := c.QueueInfo(ctx, "nope"); !errors.Is(err, protocol.NewError(protocol.CodeQueueNotFound, "")) {
		t.Fatalf("unknown queue: %v", err)
	}
	// Seek a group to the end, then delete it.
	c.Queue("ops").Group("g").Partition("p1").Pop(ctx)
	if n, err := c.Seek(ctx, "ops", "g", client.SeekTo{ToEnd: true}); err != nil || n != 2 {
		t.Fatalf("seek: %d %v", n, err)
	}
	if m, _ := c.Queue("ops").Group("g").Batch(10).Partitions(2).Pop(ctx); len(m) != 0 {
		t.Fatalf("after seek to end: %q", texts(m))
	}
	if n, err := c.DeleteGroup(ctx, "ops", "g"); err != nil || n != 1 {
		t.Fatalf("delete group: %d %v", n, err)
	}
	if m, _ := c.Queue("ops").Group("g").Batch(10).Partitions(2).Pop(ctx); len(m) != 2 {
		t.Fatalf("deleted group starts over: got %q", texts(m))
	}
	st, err := c.Stats(ctx)
	if err != nil || st.Pushed != 3 || st.Connections < 1 {
		t.Fatalf("stats: %+v %v", st, err)
	}
	if ok, err := c.DeleteQueue(ctx, "ops"); err != nil || !ok {
		t.Fatalf("delete queue: %v %v", ok, err)
	}
}

func TestTCPPipelines10000RequestsOnOneConnection(t *testing.T) {
	f := newTCP(t)
	ctx := ctx5(t)
	c := f.dial(client.WithConns(1))
	defer c.Close()
	const n = 10000
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			txn := fmt.Sprint("t-", i)
			res, err := c.Push(ctx, client.Item{Queue: "pipe", Partition: fmt.Sprint("p", i%8), TransactionID: txn, Payload: []byte(txn)})
			switch {
			case err != nil:
				errs <- err
			case res[0].TransactionID != txn || res[0].Status != client.PushQueued:
				errs <- fmt.Errorf("request %d got the reply %+v", i, res[0])
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st, _ := c.Stats(ctx)
	if st.Pushed != n {
		t.Fatalf("broker counted %d pushes, want %d", st.Pushed, n)
	}
}

// rawConn is a hand-driven connection for malformed input.
func rawConn(t *testing.T, f *tcpFixture, hello bool) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if hello {
		nc.Write(protocol.AppendHelloRequest(nil, 1, &protocol.HelloRequest{Major: protocol.VersionMajor}))
		rd := protocol.NewReader(nc, 0)
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if fr, err := rd.Next(); err != nil || fr.IsError() {
			t.Fatalf("hello: %v", err)
		}
	}
	return nc
}

// expectErrorThenClose reads an error reply with the wanted code and then
// the end of the connection.
func expectErrorThenClose(t *testing.T, nc net.Conn, want protocol.Code) {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	rd := protocol.NewReader(nc, 0)
	fr, err := rd.Next()
	if err != nil && !errors.Is(err, protocol.ErrUnknownOp) { // the reply carries the request's unknown op
		t.Fatalf("no error reply: %v", err)
	}
	var er protocol.ErrorReply
	if !fr.IsError() || er.Decode(fr.Body) != nil || er.Code != want {
		t.Fatalf("reply %+v (code %v), want error %v", fr.Header, er.Code, want)
	}
	if _, err := rd.Next(); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !isReset(err) {
		t.Fatalf("connection still open after a fatal error: %v", err)
	}
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne)
}

func TestTCPMalformedInput(t *testing.T) {
	f := newTCP(t)
	ctx := ctx5(t)
	header := func(length uint32, op protocol.Op, flags byte, id uint64) []byte {
		b := binary.BigEndian.AppendUint32(nil, length)
		b = append(b, byte(op), flags)
		return binary.BigEndian.AppendUint64(b, id)
	}
	cases := []struct {
		name  string
		hello bool
		send  []byte
		want  protocol.Code
	}{
		{"absurd length", true, header(0xFFFFFFF0, protocol.OpPush, 0, 7), protocol.CodeFrameTooLarge},
		{"unknown opcode", true, header(10, protocol.Op(0x7f), 0, 8), protocol.CodeUnknownOp},
		{"length below the header", true, header(3, protocol.OpPing, 0, 9), protocol.CodeMalformed},
		{"truncated push body", true, append(header(10+5, protocol.OpPush, 0, 10), 0x05, 1, 2, 3, 4), protocol.CodeMalformed},
		{"garbage body", true, append(header(10+8, protocol.OpAck, 0, 11), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), protocol.CodeMalformed},
		{"request before hello", false, protocol.AppendPingRequest(nil, 12), protocol.CodeVersionMismatch},
		{"wrong major version", false, protocol.AppendHelloRequest(nil, 13, &protocol.HelloRequest{Major: protocol.VersionMajor + 1}), protocol.CodeVersionMismatch},
		{"reply frame from a client", true, protocol.AppendPingReply(nil, 14), protocol.CodeMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := rawConn(t, f, tc.hello)
			if _, err := nc.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			expectErrorThenClose(t, nc, tc.want)
			// Everybody else keeps working.
			if err := f.c.Ping(ctx); err != nil {
				t.Fatalf("other connection broken: %v", err)
			}
		})
	}
	// A short frame (half a header) just waits for the rest.
	nc := rawConn(t, f, true)
	ping := protocol.AppendPingRequest(nil, 20)
	nc.Write(ping[:5])
	time.Sleep(20 * time.Millisecond) // let the server see the partial frame in its own read
	nc.Write(ping[5:])
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if fr, err := protocol.NewReader(nc, 0).Next(); err != nil || fr.IsError() || fr.ID != 20 {
		t.Fatalf("split ping: %+v %v", fr.Header, err)
	}
}

// TestTCPClientThatNeverReads: a client that sends requests and never reads
// the replies is disconnected once its unread replies pass the cap; the
// server's memory for it stays bounded by the cap and others are served.
func TestTCPClientThatNeverReads(t *testing.T) {
	const cap = 256 << 10
	f := newTCP(t, func(c *tcp.Config) { c.MaxOutboundBytes = cap })
	ctx := ctx5(t)
	nc := rawConn(t, f, true)
	// QueueList replies are larger than the requests: fill a queue list.
	for i := 0; i < 20; i++ {
		f.c.Queue(fmt.Sprintf("queue-with-a-longish-name-%02d", i)).Push(ctx, []byte("x"))
	}
	req := protocol.AppendQueueListRequest(nil, 1)
	var burst []byte
	for i := 0; i < 1000; i++ {
		burst = append(burst, req...)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for i := 0; i < 2000; i++ {
			nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := nc.Write(burst); err != nil {
				return // the server closed us
			}
		}
	}()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("a client that never reads was not disconnected")
	}
	if err := f.c.Ping(ctx); err != nil {
		t.Fatalf("others not served: %v", err)
	}
}

// TestTCPPopTransactionIDs: a message pushed without a transactionId comes
// out of a pop with its id's text as one (the server writes that text into
// the reply itself), next to messages that have their own.
func TestTCPPopTransactionIDs(t *testing.T) {
	f := newTCP(t)
	ctx := ctx5(t)
	items := make([]client.Item, 150)
	for i := range items {
		items[i] = client.Item{Queue: "txn", Payload: []byte{byte(i)}}
		if i%3 == 0 {
			items[i].TransactionID = fmt.Sprint("own-", i)
		}
	}
	if _, err := f.c.Push(ctx, items...); err != nil {
		t.Fatal(err)
	}
	var got []client.Message
	for len(got) < len(items) {
		msgs, err := f.c.Pop(ctx, client.PopRequest{Queue: "txn", Batch: 100})
		if err != nil || len(msgs) == 0 {
			t.Fatalf("pop after %d: %v", len(got), err)
		}
		got = append(got, msgs...)
		if _, err := f.c.Ack(ctx, msgs, client.Completed, client.AckOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i, m := range got {
		want := m.ID.String()
		if i%3 == 0 {
			want = fmt.Sprint("own-", i)
		}
		if m.TransactionID != want || m.Payload[0] != byte(i) {
			t.Fatalf("message %d: transactionId %q, want %q", i, m.TransactionID, want)
		}
	}
}

// A lease extension with journaled leases (a replicated shard's engine) is
// answered once its record is durable, off the event loop; a bad lease is
// refused as before.
func TestTCPJournaledLeaseExtension(t *testing.T) {
	b := brokertest.Start(t, broker.Options{Engine: engine.Config{SnapshotEveryBytes: -1, JournalLeases: true}})
	ctx := ctx5(t)
	c, err := client.Dial(ctx, b.TCPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Push(ctx, client.Item{Queue: "q", Partition: "p", Payload: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Queue("q").Partition("p").Pop(ctx)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("pop: %v %d", err, len(msgs))
	}
	exp, err := c.Extend(ctx, msgs[0].LeaseID, time.Hour)
	if err != nil || time.Until(exp) < 59*time.Minute {
		t.Fatalf("extend: %v %v", exp, err)
	}
	forged := msgs[0].LeaseID
	forged[0] ^= 0xff
	if _, err := c.Extend(ctx, forged, time.Hour); !errors.Is(err, protocol.NewError(protocol.CodeLeaseInvalid, "")) {
		t.Fatalf("extend of a lease never granted: %v", err)
	}
}
