package netserver_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
	"github.com/regentmq/regent/netserver/httpapi"
	"github.com/regentmq/regent/netserver/tcp"
	"github.com/regentmq/regent/protocol"
)

// abuseFixture is a broker with small limits, so that the limits can be
// hit cheaply, and a well-behaved client of each door that must keep
// working whatever the others send.
type abuseFixture struct {
	t        *testing.T
	b        *broker.Broker
	e        *engine.Engine
	httpAddr string
	c        *client.Client // the well-behaved TCP client
	hc       *http.Client
	n        int
}

const (
	abuseMaxFrame   = 64 << 10
	abuseMaxPayload = 1 << 10
	abuseMaxBody    = 32 << 10
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// newAbuse starts the broker; tmods and hmods adjust each door's
// configuration after the fixture's limits.
func newAbuse(t *testing.T, tmods []func(*tcp.Config), hmods ...func(*httpapi.Config)) *abuseFixture {
	t.Helper()
	b := brokertest.Start(t, broker.Options{
		Journal: log.Config{Sync: log.SyncNone},
		// MaxPopBytes: the engine's own default, not the frame's budget
		// (the payloads are 1 KiB at most).
		Engine: engine.Config{SnapshotEveryBytes: -1, MaxPayloadBytes: abuseMaxPayload, MaxPopBytes: 16 << 20},
		Logger: quietLog,
		TuneTCP: func(c *tcp.Config) {
			c.MaxFrameBytes = abuseMaxFrame
			for _, m := range tmods {
				m(c)
			}
		},
		TuneHTTP: func(c *httpapi.Config) {
			c.MaxBodyBytes = abuseMaxBody
			for _, m := range hmods {
				m(c)
			}
		},
	})
	f := &abuseFixture{t: t, b: b, e: b.Engine(), httpAddr: b.HTTPAddr().String(), c: dial(t, b, client.WithConns(1)),
		hc: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}}
	// Before brokertest's Exit: an unused connection would hold the HTTP
	// door's shutdown for 5 s (net/http counts it active).
	t.Cleanup(f.hc.CloseIdleConnections)
	return f
}

// othersStillWork: a well-behaved client of each door pushes a message and
// pops it back.
func (f *abuseFixture) othersStillWork(t *testing.T) {
	t.Helper()
	f.n++
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q := fmt.Sprintf("bystander-%d", f.n)
	if res, err := f.c.Queue(q).Push(ctx, []byte("tcp")); err != nil || res[0].Status != client.PushQueued {
		t.Fatalf("the well-behaved TCP client cannot push: %+v %v", res, err)
	}
	if st, body := f.do(t, "POST", "/api/v1/push", fmt.Sprintf(`{"items":[{"queue":%q,"payload":"http"}]}`, q), nil); st != 201 && st != 200 {
		t.Fatalf("the well-behaved HTTP client cannot push: %d %s", st, body)
	}
	msgs, err := f.c.Queue(q).Batch(10).AutoAck(true).Pop(ctx)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("the well-behaved TCP client cannot pop: %d messages, %v", len(msgs), err)
	}
	if f.b.TCPConnections() > 50 {
		t.Fatalf("%d TCP connections left open", f.b.TCPConnections())
	}
}

func (f *abuseFixture) do(t *testing.T, method, path, body string, hdr map[string]string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+f.httpAddr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := f.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// rawHello opens a raw TCP connection that has said Hello.
func (f *abuseFixture) raw(t *testing.T, hello bool) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", f.b.TCPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if hello {
		nc.Write(protocol.AppendHelloRequest(nil, 1, &protocol.HelloRequest{Major: protocol.VersionMajor}))
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if fr, err := protocol.NewReader(nc, 0).Next(); err != nil || fr.IsError() {
			t.Fatalf("hello: %v", err)
		}
	}
	return nc
}

func header(length uint32, op protocol.Op, id uint64) []byte {
	b := binary.BigEndian.AppendUint32(nil, length)
	b = append(b, byte(op), 0)
	return binary.BigEndian.AppendUint64(b, id)
}

// withBody replaces a frame's body (keeping its header's op and id, fixing
// its length).
func withBody(frame []byte, body []byte) []byte {
	out := append([]byte(nil), frame[:14]...)
	binary.BigEndian.PutUint32(out, uint32(10+len(body)))
	return append(out, body...)
}

// TestBadInputTable sends every kind of bad input through both doors. Each
// row states the answer expected; after each, a well-behaved client of each
// door must still be served.
func TestBadInputTable(t *testing.T) {
	f := newAbuse(t, nil)
	ctx := ctx5(t)

	// Frames that cannot be handled: an error reply naming the problem,
	// then the connection is closed (its framing can no longer be trusted).
	push := protocol.AppendPushRequest(nil, 10, &protocol.PushRequest{Items: []protocol.PushItem{{Queue: "q", Payload: []byte("x")}}})
	forged := binary.AppendUvarint(nil, 1_000_000_000) // a billion items in a few bytes
	ack := protocol.AppendAckRequest(nil, 8, &protocol.AckRequest{})
	fatal := []struct {
		name  string
		hello bool
		send  []byte
		want  protocol.Code
	}{
		{"absurd length (4 GiB)", true, header(0xFFFFFFF0, protocol.OpPush, 1), protocol.CodeFrameTooLarge},
		{"negative length (sign bit set)", true, header(0x80000001, protocol.OpPush, 2), protocol.CodeFrameTooLarge},
		{"length just above MaxFrameBytes", true, header(abuseMaxFrame+1, protocol.OpPush, 3), protocol.CodeFrameTooLarge},
		{"length below the header", true, header(3, protocol.OpPing, 4), protocol.CodeMalformed},
		{"unknown opcode", true, header(10, protocol.Op(0x7f), 5), protocol.CodeUnknownOp},
		{"opcode 0", true, header(10, protocol.Op(0), 6), protocol.CodeUnknownOp},
		{"truncated push body", true, withBody(push, push[14:len(push)-3]), protocol.CodeMalformed},
		{"push claiming a billion items", true, withBody(push, forged), protocol.CodeMalformed},
		{"pop body of garbage", true, append(header(10+6, protocol.OpPop, 7), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), protocol.CodeMalformed},
		{"ack body with trailing bytes", true, withBody(ack, append(ack[14:len(ack):len(ack)], 0)), protocol.CodeMalformed},
		{"reply frame from a client", true, protocol.AppendPingReply(nil, 9), protocol.CodeMalformed},
		{"request before hello", false, protocol.AppendPingRequest(nil, 11), protocol.CodeVersionMismatch},
		{"hello of another major version", false, protocol.AppendHelloRequest(nil, 12, &protocol.HelloRequest{Major: protocol.VersionMajor + 1}), protocol.CodeVersionMismatch},
	}
	for _, tc := range fatal {
		t.Run("tcp-frame/"+tc.name, func(t *testing.T) {
			nc := f.raw(t, tc.hello)
			if _, err := nc.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			expectErrorThenClose(t, nc, tc.want)
			f.othersStillWork(t)
		})
	}

	// Requests that are well framed but wrong: a clear answer on a
	// connection that stays open (and neighbours in one request unaffected).
	long := strings.Repeat("n", engine.MaxNameBytes+1)
	pushItem := func(it client.Item) (client.PushResult, error) {
		res, err := f.c.Push(ctx, it, client.Item{Queue: "neighbour", Payload: []byte("fine")})
		if err == nil && (len(res) != 2 || res[1].Status != client.PushQueued) {
			return client.PushResult{}, fmt.Errorf("the neighbouring item was not queued: %+v", res)
		}
		if err != nil {
			return client.PushResult{}, err
		}
		return res[0], nil
	}
	pushes := []struct {
		name string
		item client.Item
		want protocol.Code // CodeOK: queued
	}{
		{"payload above MaxPayloadBytes", client.Item{Queue: "q", Payload: make([]byte, abuseMaxPayload+1)}, protocol.CodeTooLarge},
		{"empty queue name", client.Item{Queue: "", Payload: []byte("x")}, protocol.CodeInvalid},
		{"queue name above 255 bytes", client.Item{Queue: long, Payload: []byte("x")}, protocol.CodeInvalid},
		{"queue name with a newline", client.Item{Queue: "a\nb", Payload: []byte("x")}, protocol.CodeInvalid},
		{"queue name with NUL", client.Item{Queue: "a\x00b", Payload: []byte("x")}, protocol.CodeInvalid},
		{"queue name with DEL", client.Item{Queue: "a\x7fb", Payload: []byte("x")}, protocol.CodeInvalid},
		{"queue name of invalid UTF-8", client.Item{Queue: "a\xffb", Payload: []byte("x")}, protocol.CodeInvalid},
		{"queue name with a slash", client.Item{Queue: "../etc", Payload: []byte("x")}, protocol.CodeInvalid},
		{"queue name with a backslash", client.Item{Queue: `a\b`, Payload: []byte("x")}, protocol.CodeInvalid},
		{"partition name above 255 bytes", client.Item{Queue: "q", Partition: long, Payload: []byte("x")}, protocol.CodeInvalid},
		{"partition name with a tab", client.Item{Queue: "q", Partition: "a\tb", Payload: []byte("x")}, protocol.CodeInvalid},
		// Partition names may hold '/' (Queen's do): names never reach the
		// filesystem, so a path in one is just a name.
		{"partition name that looks like a path", client.Item{Queue: "q", Partition: "../../etc/passwd", Payload: []byte("x")}, protocol.CodeOK},
		{"transactionId above 255 bytes", client.Item{Queue: "q", TransactionID: long, Payload: []byte("x")}, protocol.CodeInvalid},
		{"traceId above 255 bytes", client.Item{Queue: "q", TraceID: long, Payload: []byte("x")}, protocol.CodeInvalid},
	}
	for _, tc := range pushes {
		t.Run("tcp-push/"+tc.name, func(t *testing.T) {
			r, err := pushItem(tc.item)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == protocol.CodeOK && r.Status != client.PushQueued:
				t.Fatalf("%+v, want queued", r)
			case tc.want != protocol.CodeOK && (r.Status != client.PushFailed || protocol.CodeOf(r.Err) != tc.want || r.Err.Error() == ""):
				t.Fatalf("%+v, want failed with %v", r, tc.want)
			}
			f.othersStillWork(t)
		})
	}

	// Pops.
	f.c.Queue("popq").Push(ctx, []byte("a"), []byte("b"))
	pops := []struct {
		name string
		req  client.PopRequest
		want protocol.Code
	}{
		{"batch 0 (the default: 1)", client.PopRequest{Queue: "popq", Group: "b0", Batch: 0}, protocol.CodeOK},
		{"batch of a billion", client.PopRequest{Queue: "popq", Group: "b1", Batch: 1_000_000_000}, protocol.CodeInvalid},
		{"partitions of a billion", client.PopRequest{Queue: "popq", Group: "b2", Partitions: 1_000_000_000}, protocol.CodeOK},
		{"empty queue name", client.PopRequest{Queue: ""}, protocol.CodeInvalid},
		{"queue name with a slash", client.PopRequest{Queue: "a/b"}, protocol.CodeInvalid},
		{"group name with a control character", client.PopRequest{Queue: "popq", Group: "g\x01"}, protocol.CodeInvalid},
		{"group name above 255 bytes", client.PopRequest{Queue: "popq", Group: long}, protocol.CodeInvalid},
		{"partition name with a control character", client.PopRequest{Queue: "popq", Partition: "p\x1b[2J"}, protocol.CodeInvalid},
	}
	for _, tc := range pops {
		t.Run("tcp-pop/"+tc.name, func(t *testing.T) {
			_, err := f.c.Pop(ctx, tc.req)
			if got := protocol.CodeOf(err); got != tc.want {
				t.Fatalf("pop: %v (code %v), want %v", err, got, tc.want)
			}
			f.othersStillWork(t)
		})
	}

	// Acks: forged, stale, other-group and absent leases; messages that
	// never existed.
	f.c.Queue("ackq").Push(ctx, []byte("m0"), []byte("m1"), []byte("m2"))
	mine, err := f.c.Queue("ackq").Group("mine").Batch(2).Pop(ctx)
	if err != nil || len(mine) != 2 {
		t.Fatalf("pop: %v %v", mine, err)
	}
	theirs, err := f.c.Queue("ackq").Group("theirs").Batch(1).Pop(ctx)
	if err != nil || len(theirs) != 1 {
		t.Fatalf("pop: %v %v", theirs, err)
	}
	stale, err := f.c.Queue("ackq").Group("stale").Batch(1).Pop(ctx)
	if err != nil || len(stale) != 1 {
		t.Fatalf("pop: %v %v", stale, err)
	}
	if res, err := f.c.AckEach(ctx, client.Ack{Message: stale[0], Status: client.Completed}); err != nil || res[0].Err != nil {
		t.Fatalf("ack: %+v %v", res, err)
	}
	var forgedLease client.ID
	copy(forgedLease[:], "forged-lease-id!")
	with := func(m client.Message, mod func(*client.Message)) client.Message { mod(&m); return m }
	acks := []struct {
		name string
		ack  client.Ack
		want protocol.Code
	}{
		{"forged lease id", client.Ack{Message: with(mine[0], func(m *client.Message) { m.LeaseID = forgedLease }), Status: client.Completed}, protocol.CodeLeaseInvalid},
		{"no lease id", client.Ack{Message: with(mine[0], func(m *client.Message) { m.LeaseID = client.ID{} }), Status: client.Completed}, protocol.CodeLeaseRequired},
		{"another group's lease", client.Ack{Message: with(theirs[0], func(m *client.Message) { m.Group = "mine" }), Status: client.Completed}, protocol.CodeLeaseInvalid},
		{"stale lease, another status", client.Ack{Message: stale[0], Status: client.Failed}, protocol.CodeLeaseInvalid},
		{"stale lease, same status (a repeat: success)", client.Ack{Message: stale[0], Status: client.Completed}, protocol.CodeOK},
		{"message that never existed (offset)", client.Ack{Message: with(mine[0], func(m *client.Message) { m.Offset = 1 << 40; m.ID = client.ID{} }), Status: client.Completed}, protocol.CodeNotInFlight},
		{"partition that never existed", client.Ack{Message: with(mine[0], func(m *client.Message) { m.PartitionID = forgedLease }), Status: client.Completed}, protocol.CodeMessageNotFound},
		{"group that never read the queue", client.Ack{Message: with(mine[0], func(m *client.Message) { m.Group = "nobody" }), Status: client.Completed}, protocol.CodeNotInFlight},
		{"unknown ack status", client.Ack{Message: mine[0], Status: client.AckStatus(42)}, protocol.CodeInvalid},
	}
	for _, tc := range acks {
		t.Run("tcp-ack/"+tc.name, func(t *testing.T) {
			res, err := f.c.AckEach(ctx, tc.ack)
			if err != nil {
				if got := protocol.CodeOf(err); got != tc.want {
					t.Fatalf("ack: %v, want %v", err, tc.want)
				}
			} else if got := protocol.CodeOf(res[0].Err); got != tc.want {
				t.Fatalf("ack: %v (code %v), want %v", res[0].Err, got, tc.want)
			}
			f.othersStillWork(t)
		})
	}
	// The real lease still works after all that.
	if res, err := f.c.AckEach(ctx, client.Ack{Message: mine[0], Status: client.Completed}, client.Ack{Message: mine[1], Status: client.Completed}); err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("the real acks after the forged ones: %+v %v", res, err)
	}
	t.Run("tcp-lease-extend/forged lease", func(t *testing.T) {
		_, err := f.c.Extend(ctx, forgedLease, time.Minute)
		if protocol.CodeOf(err) != protocol.CodeLeaseInvalid {
			t.Fatalf("extend: %v", err)
		}
	})
	t.Run("tcp-transaction/forged lease", func(t *testing.T) {
		m := with(theirs[0], func(m *client.Message) { m.LeaseID = forgedLease })
		res, err := f.c.Transaction().Ack(m, client.Completed).Push(client.Item{Queue: "txn-out", Payload: []byte("x")}).Commit(ctx)
		if err != nil || protocol.CodeOf(res.Err) != protocol.CodeTxnAborted {
			t.Fatalf("txn: %+v %v", res, err)
		}
		if msgs, _ := f.c.Queue("txn-out").AutoAck(true).Pop(ctx); len(msgs) != 0 {
			t.Fatal("an aborted transaction pushed its message")
		}
	})

	// HTTP: bodies that are not JSON, of the wrong shape, empty, huge;
	// parameters out of range.
	huge := `{"items":[{"queue":"q","payload":"` + strings.Repeat("x", abuseMaxBody) + `"}]}`
	https := []struct {
		name, method, path, body string
		hdr                      map[string]string
		status                   int
		says                     string
	}{
		{"push: not JSON", "POST", "/api/v1/push", "this is not JSON", nil, 400, "Invalid JSON"},
		{"push: JSON of the wrong shape", "POST", "/api/v1/push", `{"items":5}`, nil, 400, "items"},
		{"push: truncated JSON", "POST", "/api/v1/push", `{"items":[{"queue":"q","payload":`, nil, 400, "Invalid JSON"},
		{"push: empty body", "POST", "/api/v1/push", "", nil, 400, "Empty request body"},
		{"push: body above MaxBodyBytes", "POST", "/api/v1/push", huge, nil, 413, "limit"},
		{"push: body above MaxBodyBytes, chunked", "POST", "/api/v1/push", huge, map[string]string{"Transfer-Encoding": "chunked"}, 413, "limit"},
		{"push: invalid queue name", "POST", "/api/v1/push", `{"items":[{"queue":"a/b","payload":1}]}`, nil, 201, "failed"},
		{"push: payload above MaxPayloadBytes", "POST", "/api/v1/push", `{"items":[{"queue":"q","payload":"` + strings.Repeat("y", abuseMaxPayload) + `"}]}`, nil, 201, "failed"},
		{"ack: not JSON", "POST", "/api/v1/ack", "{{{", nil, 400, "Invalid JSON"},
		{"ack: forged lease", "POST", "/api/v1/ack", `{"transactionId":"t","partitionId":"00000000-0000-7000-8000-000000000000","leaseId":"00000000-0000-7000-8000-000000000001","status":"completed","consumerGroup":"g"}`, nil, 200, `"success":false`},
		{"ack batch: not JSON", "POST", "/api/v1/ack/batch", "[1,2", nil, 400, "Invalid JSON"},
		{"transaction: not JSON", "POST", "/api/v1/transaction", "\x00\x01\x02", nil, 400, "Invalid JSON"},
		{"configure: not JSON", "POST", "/api/v1/configure", "nope", nil, 400, "Invalid JSON"},
		{"configure: invalid queue name", "POST", "/api/v1/configure", `{"queue":"bad\u0001name"}`, nil, 400, "control"},
		{"pop: batch of a billion", "GET", "/api/v1/pop/queue/popq?batch=1000000000", "", nil, 400, "limit"},
		{"pop: queue name with a control character", "GET", "/api/v1/pop/queue/a%01b", "", nil, 400, "control"},
		// A negative or unparsable batch or timeout is refused, naming it
		// (Queen's server reads it with get_query_param_int and passes it on).
		{"pop: negative batch", "GET", "/api/v1/pop/queue/nothing-here?batch=-5", "", nil, 400, "batch: want a whole number"},
		{"pop: unparsable timeout", "GET", "/api/v1/pop/queue/nothing-here?timeout=soon", "", nil, 400, "timeout: want a whole number"},
		{"lease extend: not JSON", "POST", "/api/v1/lease/00000000-0000-7000-8000-000000000001/extend", "{x", nil, 400, "Invalid JSON"},
		{"unknown route", "GET", "/api/v1/nothing-here", "", nil, 404, "Not Found"},
	}
	for _, tc := range https {
		t.Run("http/"+tc.name, func(t *testing.T) {
			st, body := f.do(t, tc.method, tc.path, tc.body, tc.hdr)
			if st != tc.status || !strings.Contains(body, tc.says) {
				t.Fatalf("%d %.300s; want %d saying %q", st, body, tc.status, tc.says)
			}
			f.othersStillWork(t)
		})
	}
	t.Run("engine/negative timeout", func(t *testing.T) {
		// The binary protocol cannot carry one (its timeout is unsigned).
		_, err := f.e.Pop(ctx, engine.PopRequest{Queue: "popq", Wait: true, Timeout: -time.Second})
		if !errors.Is(err, engine.ErrInvalid) {
			t.Fatalf("pop with a negative timeout: %v", err)
		}
	})
	t.Run("http/headers above MaxHeaderBytes", func(t *testing.T) {
		st, _ := f.do(t, "GET", "/health", "", map[string]string{"X-Big": strings.Repeat("h", 2<<20)})
		if st != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("status %d, want 431", st)
		}
		f.othersStillWork(t)
	})
	t.Run("http/bytes that are not HTTP", func(t *testing.T) {
		nc, err := net.Dial("tcp", f.httpAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.Write([]byte("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 garbage, like a TLS hello\r\n\r\n"))
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, _ := io.ReadAll(nc)
		if !bytes.HasPrefix(b, []byte("HTTP/1.1 400")) {
			t.Fatalf("answer %.100q, want a 400", b)
		}
		f.othersStillWork(t)
	})
}
