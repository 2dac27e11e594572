package replica

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/regentmq/regent/engine"
	rlog "github.com/regentmq/regent/log"
	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/netserver/tcp"
	"github.com/regentmq/regent/protocol"
)

// linkBroker is one broker of a link test: a TCP door (whose Raft hook is
// the Node), a Link, and the Node on its own loop.
type linkBroker struct {
	node *Node
	link *Link
	door *tcp.Server
	stop context.CancelFunc
	done chan struct{}
}

func (b *linkBroker) kill() {
	b.stop()
	<-b.done
	b.link.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = b.door.Shutdown(ctx)
}

// Three brokers whose Raft messages travel on the binary protocol through
// their TCP doors: a leader is elected, pushes are committed, the leader's
// process dies, and the next leader holds every push answered.
func TestLinkCarriesRaftBetweenDoors(t *testing.T) {
	clock := engine.NewFakeClock(time.Unix(1_800_000_000, 0))
	var amu sync.Mutex
	addrs := map[uint64]string{}
	addrOf := func(id uint64) string { amu.Lock(); defer amu.Unlock(); return addrs[id] }
	brokers := map[uint64]*linkBroker{}
	for _, id := range voters3 {
		j, err := rlog.Open(rlog.Config{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		doorEngine, err := engine.New(engine.Config{SnapshotEveryBytes: -1, Logger: slog.New(slog.DiscardHandler)}, j)
		if err != nil {
			t.Fatal(err)
		}
		link := NewLink(id, addrOf, nil)
		n, err := NewNode(Config{ID: id, Transport: link, NewEngine: shardEngines(clock)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.AddShard(testShard, newMemLog(t, voters3)); err != nil {
			t.Fatal(err)
		}
		door, err := tcp.New(tcp.Config{Addr: "127.0.0.1:0", Raft: n.ReceiveWire, Logger: slog.New(slog.DiscardHandler)}, doorEngine)
		if err == nil {
			err = door.Start()
		}
		if err != nil {
			t.Fatal(err)
		}
		amu.Lock()
		addrs[id] = door.Addr().String()
		amu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		b := &linkBroker{node: n, link: link, door: door, stop: cancel, done: make(chan struct{})}
		go func() {
			defer close(b.done)
			_ = n.Run(ctx, 10*time.Millisecond)
		}()
		brokers[id] = b
		t.Cleanup(func() {
			select {
			case <-b.done:
			default:
				b.kill()
			}
			n.Close()
			doorEngine.Close()
			j.Close()
		})
	}

	lead := func(except uint64) (uint64, *engine.Engine) {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			for _, id := range voters3 {
				if id == except {
					continue
				}
				if e, _, _ := brokers[id].node.Shard(testShard).Engine(); e != nil {
					return id, e
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatal("no broker took the shard over in 10 s")
		return 0, nil
	}
	first, e := lead(0)
	for i := range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := e.Push(ctx, []engine.PushItem{{Queue: "q", Partition: "p", TransactionID: fmt.Sprint("m", i), Payload: []byte{byte(i)}}})
		cancel()
		if err != nil || res[0].Status != engine.Queued {
			t.Fatalf("push %d through the link: %v %+v", i, err, res)
		}
	}
	killed := time.Now()
	brokers[first].kill()
	next, e2 := lead(first)
	t.Logf("broker %d led; after its kill broker %d took over in %s", first, next, time.Since(killed).Round(time.Millisecond))
	var ms []engine.Message
	var err error
	for range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ms, err = e2.Pop(ctx, engine.PopRequest{Queue: "q", Partition: "p", Group: "g", Batch: 1000})
		cancel()
		if err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil || len(ms) != 100 {
		t.Fatalf("the next leader holds %d of 100 answered pushes (%v)", len(ms), err)
	}
}

// A Raft request to a broker that keeps no replicas is refused, and a
// message that does not decode refuses its request.
func TestRaftRequestRefusals(t *testing.T) {
	de := doorEngine(t)
	door, err := tcp.New(tcp.Config{Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)}, de)
	if err == nil {
		err = door.Start()
	}
	if err != nil {
		t.Fatal(err)
	}
	defer door.Shutdown(context.Background())
	p := &peerLink{l: NewLink(2, func(uint64) string { return door.Addr().String() }, nil), id: 1}
	c, _, _, err := p.dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(protocol.AppendRaftRequest(nil, 9, &protocol.RaftRequest{From: 2, Msgs: []protocol.RaftMessage{{Shard: 1, Data: []byte{1}}}})); err != nil {
		t.Fatal(err)
	}
	f, err := protocol.NewReader(c, protocol.DefaultMaxFrame).Next()
	if err != nil {
		t.Fatal(err)
	}
	var er protocol.ErrorReply
	if !f.IsError() || er.Decode(f.Body) != nil || er.Code != protocol.CodeInvalid {
		t.Fatalf("a Raft request to a door without replicas: error %v, code %v", f.IsError(), er.Code)
	}

	n, err := NewNode(Config{ID: 1, Transport: NewLink(1, func(uint64) string { return "" }, nil),
		NewEngine: func(uint32, engine.Journal) (*engine.Engine, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.ReceiveWire(2, []protocol.RaftMessage{{Shard: 1, Data: []byte{0xff, 0xff}}}); err == nil {
		t.Fatal("a message that does not decode was taken")
	}
}

// The heartbeats of many shards travel as one message and come back as
// the messages they were; everything else passes untouched; a malformed
// heartbeat message is refused.
func TestHeartbeatsCoalesce(t *testing.T) {
	var msgs []Envelope
	for shard := range uint32(64) {
		msgs = append(msgs,
			Envelope{Shard: shard, Msg: &pb.Message{Type: pb.MsgHeartbeat.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(shard + 3)), Commit: new(uint64(shard * 7))}},
			Envelope{Shard: shard, Msg: &pb.Message{Type: pb.MsgHeartbeatResp.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(shard + 5))}})
	}
	app := Envelope{Shard: 3, Msg: &pb.Message{Type: pb.MsgApp.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(9))}}
	readIndex := Envelope{Shard: 4, Msg: &pb.Message{Type: pb.MsgHeartbeat.Enum(), From: new(uint64(1)), To: new(uint64(2)), Context: []byte("ctx")}}
	msgs = append(msgs, app, readIndex)

	body, rest := coalesce(nil, msgs)
	if len(rest) != 2 || rest[0].Msg != app.Msg || rest[1].Msg != readIndex.Msg {
		t.Fatalf("left %d messages uncoalesced, want the append and the heartbeat with a context", len(rest))
	}
	if len(body) > 64*2*6 {
		t.Fatalf("128 heartbeats take %d bytes", len(body))
	}
	back, err := uncoalesce(1, 2, body)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 128 {
		t.Fatalf("%d heartbeats back, want 128", len(back))
	}
	for i, env := range back {
		want := msgs[i]
		if env.Shard != want.Shard || env.Msg.GetType() != want.Msg.GetType() || env.Msg.GetTerm() != want.Msg.GetTerm() ||
			env.Msg.GetCommit() != want.Msg.GetCommit() || env.Msg.GetFrom() != 1 || env.Msg.GetTo() != 2 {
			t.Fatalf("heartbeat %d came back as %v, want %v", i, env.Msg, want.Msg)
		}
	}
	for _, bad := range [][]byte{nil, {5}, body[:len(body)-1], append(append([]byte(nil), body...), 0), {1, 0, 2, 1, 1}} {
		if _, err := uncoalesce(1, 2, bad); err == nil {
			t.Errorf("malformed heartbeats %x were taken", bad)
		}
	}
	if b, rest := coalesce(nil, []Envelope{app}); b != nil || len(rest) != 1 {
		t.Fatal("a batch without heartbeats was changed")
	}
}

// A Link never sends a frame larger than its peer takes (the peer's Hello
// reply says how large): a large entry among many small ones goes in a
// request of its own rather than past the frame, and every message arrives.
func TestLinkKeepsFramesWithinThePeersLimit(t *testing.T) {
	const maxFrame = 12 << 20
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int, 64) // messages per request; -1: a frame refused
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := protocol.NewReader(c, maxFrame)
		for {
			f, err := r.Next()
			if err != nil {
				got <- -1
				return
			}
			if f.Op == protocol.OpHello {
				c.Write(protocol.AppendHelloReply(nil, f.ID, &protocol.HelloReply{Major: protocol.VersionMajor, Minor: protocol.VersionMinor, MaxFrame: maxFrame}))
				continue
			}
			var req protocol.RaftRequest
			if err := req.Decode(f.Body); err != nil {
				got <- -1
				return
			}
			got <- len(req.Msgs)
			c.Write(protocol.AppendRaftReply(nil, f.ID))
		}
	}()
	l := NewLink(1, func(uint64) string { return ln.Addr().String() }, nil)
	defer l.Close()
	var msgs []Envelope
	for i := range 3 { // 3 MiB of appends (under a request's 4 MiB), then a 10 MiB one, then more
		msgs = append(msgs, Envelope{Shard: 1, Msg: &pb.Message{Type: pb.MsgApp.Enum(), From: new(uint64(1)), To: new(uint64(2)),
			Entries: []*pb.Entry{{Index: new(uint64(i + 1)), Data: make([]byte, 1<<20)}}}})
	}
	msgs = append(msgs, Envelope{Shard: 1, Msg: &pb.Message{Type: pb.MsgApp.Enum(), From: new(uint64(1)), To: new(uint64(2)),
		Entries: []*pb.Entry{{Index: new(uint64(9)), Data: make([]byte, 10<<20)}}}})
	msgs = append(msgs, msgs[:3]...)
	l.Send(2, msgs)
	total := 0
	for total < len(msgs) {
		select {
		case n := <-got:
			if n < 0 {
				t.Fatal("the link sent a frame past the peer's limit")
			}
			total += n
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d messages arrived", total, len(msgs))
		}
	}
}

// TestLinkCloseWithAPeerThatStoppedReading: a peer that answers Hello and
// then never reads (a broker whose doors stop while its socket stays open)
// fills the link's connection; Close still returns, once the write's
// deadline passes, rather than wait for ever.
func TestLinkCloseWithAPeerThatStoppedReading(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if _, err := protocol.NewReader(c, protocol.DefaultMaxFrame).Next(); err != nil {
			c.Close()
			return
		}
		c.Write(protocol.AppendHelloReply(nil, 0, &protocol.HelloReply{Major: protocol.VersionMajor, Minor: protocol.VersionMinor,
			ServerName: "regent", MaxFrame: protocol.DefaultMaxFrame}))
		held <- c // and read nothing more
	}()
	l := NewLink(1, func(uint64) string { return ln.Addr().String() }, nil)
	big := make([]byte, 1<<20)
	for range 64 { // 64 MiB of appends: far past what the sockets buffer
		l.Send(2, []Envelope{{Shard: 1, Msg: &pb.Message{Type: pb.MsgApp.Enum(), From: new(uint64(1)), To: new(uint64(2)),
			Entries: []*pb.Entry{{Data: big}}}}})
		time.Sleep(time.Millisecond)
	}
	var c net.Conn
	select {
	case c = <-held:
		defer c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the link never dialled")
	}
	time.Sleep(100 * time.Millisecond) // the link's write is blocked now
	closed := make(chan struct{})
	start := time.Now()
	go func() { l.Close(); close(closed) }()
	select {
	case <-closed:
		t.Logf("Close returned after %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(linkWriteTimeout + 5*time.Second):
		t.Fatal("Close waited for a peer that reads nothing")
	}
}

// TestLinkRenewsItsToken: against a door that checks tokens, the link
// presents one after Hello, and makes its connection again before the
// token expires: a door refuses requests once the token of their
// connection expired, so without that the link went silent after the
// token's life (here two seconds).
func TestLinkRenewsItsToken(t *testing.T) {
	secret := []byte("a-secret-for-the-link-test-0123456789")
	de := doorEngine(t)
	var arrived atomic.Int64 // Unix nanoseconds of the last Raft request taken
	door, err := tcp.New(tcp.Config{Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler),
		Auth: netserver.AuthConfig{Enabled: true, Secret: secret, ClockSkew: time.Millisecond},
		Raft: func(uint64, []protocol.RaftMessage) error { arrived.Store(time.Now().UnixNano()); return nil }}, de)
	if err == nil {
		err = door.Start()
	}
	if err != nil {
		t.Fatal(err)
	}
	defer door.Shutdown(context.Background())
	l := NewLink(2, func(uint64) string { return door.Addr().String() }, nil)
	defer l.Close()
	minted := atomic.Int64{}
	l.WithToken(func(context.Context) (string, error) {
		minted.Add(1)
		return jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
			"sub": "link", "role": "admin", "exp": time.Now().Add(2 * time.Second).Unix(),
		}).SignedString(secret)
	})
	start := time.Now()
	for time.Since(start) < 4500*time.Millisecond {
		l.Send(1, []Envelope{{Shard: 1, Msg: &pb.Message{Type: pb.MsgApp.Enum(), From: new(uint64(2)), To: new(uint64(1)), Term: new(uint64(1))}}})
		time.Sleep(20 * time.Millisecond)
	}
	if last := time.Unix(0, arrived.Load()); last.Sub(start) < 4*time.Second {
		t.Fatalf("the door took the link's last request %v after the start (tokens minted: %d)", last.Sub(start).Round(time.Millisecond), minted.Load())
	}
	if minted.Load() < 2 {
		t.Fatalf("%d tokens minted in 4.5 s of tokens that live 2 s", minted.Load())
	}
}

// doorEngine is an engine over a journal in a temporary directory, for a
// door that serves no shard; both close with the test.
func doorEngine(t *testing.T) *engine.Engine {
	t.Helper()
	j, err := rlog.Open(rlog.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	de, err := engine.New(engine.Config{SnapshotEveryBytes: -1, Logger: slog.New(slog.DiscardHandler)}, j)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { de.Close() })
	return de
}
