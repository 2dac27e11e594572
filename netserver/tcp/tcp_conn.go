package tcp

import (
	"sync"
	"sync/atomic"

	"github.com/panjf2000/gnet/v2"
	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/netserver/internal/testhooks"
	"github.com/regentmq/regent/protocol"
)

// tcpConn is one client connection. Replies are appended to out under mu,
// from the event loop or from any goroutine the engine answers on (the
// journal's committer, timers); the loop writes out in one go.
type tcpConn struct {
	s *Server
	c gnet.Conn

	mu      sync.Mutex
	out     []byte
	spare   []byte
	woke    bool // a Wake is on its way to flush out
	inLoop  bool // OnTraffic is running and will flush out itself
	closed  bool
	waiters map[*popJob]struct{} // parked long polls

	hello      bool        // loop only: the client said Hello
	minor      uint16      // loop only: the protocol minor version the client speaks
	maxReply   int         // loop only: the largest frame the client reads (and the server sends)
	auth       connAuth    // loop only: what the connection's token allows (tcp_auth.go)
	greeted    atomic.Bool // hello, for OnTick
	admitted   atomic.Bool // OnOpen took it: OnClose gives its place back
	opened     int64       // Unix nanoseconds
	inflight   atomic.Int32
	lastActive atomic.Int64
	// partialSince is when part of a frame started waiting in the read
	// buffer with no frame completed since (0: none waits).
	partialSince atomic.Int64
	// held is what the large frame arriving holds of Config.FrameBudget;
	// drop is how many bytes of a refused frame are still to come and be
	// dropped; big is what has come of the large frame arriving,
	// assembled out of gnet's read buffer, and bigSize the frame's size
	// (frame_budget.go). Loop only.
	held    int64
	drop    int
	big     []byte
	bigSize int
}

// replier is a reply waiting to be encoded into a connection's buffer.
type replier interface {
	appendTo(dst []byte) []byte
}

// sizer is a replier that knows, before encoding, the most bytes it takes.
type sizer interface{ size() int }

// send encodes r into the reply buffer and makes sure the loop writes it. A
// client that lets more than MaxOutboundBytes of replies pile up is closed.
func (tc *tcpConn) send(r replier) {
	tc.mu.Lock()
	if tc.closed {
		tc.mu.Unlock()
		return
	}
	if sz, ok := r.(sizer); ok && len(tc.out)+sz.size() > tc.s.cfg.MaxOutboundBytes {
		// Checked before encoding: a large reply is never built for a
		// client that is not reading.
		tc.mu.Unlock()
		tc.overflow()
		tc.c.Close()
		return
	}
	tc.out = r.appendTo(tc.out)
	if len(tc.out) > tc.s.cfg.MaxOutboundBytes {
		tc.mu.Unlock()
		tc.overflow()
		tc.c.Close()
		return
	}
	wake := !tc.woke && !tc.inLoop
	if wake {
		tc.woke = true
	}
	tc.mu.Unlock()
	if wake {
		tc.c.Wake(nil)
	}
}

// overflow drops a client that lets its replies pile up: its buffers go at
// once, and it is logged once.
func (tc *tcpConn) overflow() {
	tc.mu.Lock()
	first := !tc.closed
	tc.closed = true
	tc.out, tc.spare = nil, nil
	tc.mu.Unlock()
	if first {
		tc.s.log.Warn("closing a connection that does not read its replies", "remote", tc.c.RemoteAddr(), "limit_bytes", tc.s.cfg.MaxOutboundBytes)
	}
}

// job is what every request that takes an in-flight slot carries from
// begin to its answer: its connection and its id. Every kind of request
// (push, ack, pop, transaction, the admin requests) embeds one and ends
// through its finish, once, so that how a request gives its slot back is
// written in one place.
type job struct {
	tc *tcpConn
	id uint64
	// decoded is the request's decoded value, whose arena finish poisons
	// under testhooks.PoisonDecodeBuffers; nil for a request without one.
	decoded decodedBody
	// held is the room the request's frame took in the frame budget,
	// given back once it is answered (frame_budget.go).
	held int64
}

// decodedBody is a request's decoded value: its arena can be poisoned
// (tests) and detached (dropped, not kept in a pool).
type decodedBody interface {
	Poison()
	Detach()
}

// detachLarge detaches d, a request refused before it took a slot, when
// it was decoded from the large frame tc is handling: that copy is counted
// in the frame budget until the frame is done, and must not go on in a
// pool where nothing counts it (a request that took a slot is detached by
// finish).
func (tc *tcpConn) detachLarge(d decodedBody) {
	if tc.held > 0 && d != nil {
		d.Detach()
	}
}

// begin counts the request in flight on tc, or refuses it past the limits
// (answering it). After true, the job must end with exactly one finish.
// decoded is the request's value (see job.decoded).
func (j *job) begin(tc *tcpConn, op protocol.Op, id uint64, decoded decodedBody) bool {
	var refused error
	switch {
	case tc.s.draining.Load():
		refused = protocol.NewError(protocol.CodeClosed, "server shutting down")
	case int(tc.inflight.Load()) >= tc.s.cfg.MaxInFlight:
		refused = protocol.NewError(protocol.CodeOverloaded, "too many requests in flight on this connection")
	}
	if refused != nil {
		tc.send(errReply{op, id, refused})
		tc.detachLarge(decoded)
		return false
	}
	tc.inflight.Add(1)
	tc.s.inflight.Add(1)
	j.tc, j.id, j.decoded = tc, id, decoded
	j.held, tc.held = tc.held, 0 // the large frame's, if this is it: kept until answered
	return true
}

// finish answers the request with r (usually the job itself) and gives its
// in-flight slot back. The order is the point:
//
//  1. the connection's slot is freed first, and the room its large frame
//     held in the frame budget with it. Once r is in the reply buffer
//     the loop may write it, and a client that keeps MaxInFlight requests
//     in flight sends its next one the moment it reads r: that request must
//     find the room the client was promised, however long this goroutine
//     is preempted after send.
//  2. r goes into the buffer (send).
//  3. the server-wide count goes down last: Shutdown waits for it to reach
//     zero to know that every reply is in a buffer for the loops to write.
//
// On a closed connection the answer goes nowhere; the counts go down all
// the same. Once r is encoded, nothing of the request is used any more: the
// engine is done with it and the reply is in the buffer, so this is where
// testhooks.PoisonDecodeBuffers poisons it.
func (j *job) finish(r replier) {
	tc := j.tc
	tc.inflight.Add(-1)
	held := j.held
	if held > 0 {
		// The frame's room goes back with the slot, before the answer:
		// the client's next large frame must find it.
		j.held = 0
		tc.s.releaseHeld(held)
	}
	tc.send(r)
	if j.decoded != nil && testhooks.PoisonDecodeBuffers.Load() {
		j.decoded.Poison()
	}
	if held > 0 && j.decoded != nil {
		// A large frame's decoded copy goes with it, not into a pool
		// where the budget no longer counts it.
		j.decoded.Detach()
	}
	if h := tc.s.afterReply; h != nil {
		h(tc)
	}
	tc.s.inflight.Add(-1)
}

// cancelWaiters withdraws the connection's parked long polls. While the
// server drains they are answered (empty); on a closed connection nobody is
// left to answer.
func (tc *tcpConn) cancelWaiters() {
	tc.mu.Lock()
	jobs := make([]*popJob, 0, len(tc.waiters))
	for j := range tc.waiters {
		jobs = append(jobs, j)
	}
	tc.mu.Unlock()
	for _, j := range jobs {
		if j.waiter.Cancel() {
			tc.mu.Lock()
			delete(tc.waiters, j)
			tc.mu.Unlock()
			j.finish(j) // empty answer (dropped when the connection is closed)
		}
	}
}

// errReply is an error answer to one request.
type errReply struct {
	op  protocol.Op
	id  uint64
	err error
}

func (r errReply) appendTo(dst []byte) []byte {
	if pe, ok := r.err.(*protocol.Error); ok {
		return protocol.AppendError(dst, r.op, r.id, pe.Code, pe.Msg)
	}
	return protocol.AppendError(dst, r.op, r.id, netserver.CodeOf(r.err), netserver.MessageOf(r.err))
}

// bodyReply is a whole reply body.
type bodyReply struct {
	id   uint64
	body protocol.Body
}

func (r bodyReply) appendTo(dst []byte) []byte { return protocol.AppendFrame(dst, r.id, r.body) }

// handle serves one request frame; it returns false when the connection must
// be closed. It runs on the event loop and never blocks.
func (tc *tcpConn) handle(f protocol.Frame) bool {
	op, id := f.Op, f.ID
	if op != protocol.OpHello && !tc.hello {
		tc.send(errReply{op, id, protocol.NewError(protocol.CodeVersionMismatch, "send Hello first")})
		return false
	}
	if !tc.authorize(op, id) {
		return true
	}
	switch op {
	case protocol.OpHello:
		var req protocol.HelloRequest
		if err := req.Decode(f.Body); err != nil {
			tc.send(errReply{op, id, err})
			return false
		}
		if err := protocol.CheckVersion(req.Major, req.Minor); err != nil {
			tc.send(errReply{op, id, err})
			return false
		}
		tc.hello = true
		tc.minor = req.Minor
		tc.maxReply = tc.s.cfg.MaxFrameBytes
		if mf := int(req.MaxFrame); mf > 0 && mf < tc.maxReply {
			tc.maxReply = max(mf, protocol.MinMaxFrame)
		} else if mf == 0 {
			tc.maxReply = min(tc.maxReply, protocol.DefaultMaxFrame) // a 1.0 client reads that much
		}
		tc.greeted.Store(true)
		tc.send(bodyReply{id, &protocol.HelloReply{
			Major: protocol.VersionMajor, Minor: protocol.VersionMinor, ServerName: "regent",
			MaxFrame: uint32(tc.s.cfg.MaxFrameBytes), MaxInFlight: uint32(tc.s.cfg.MaxInFlight),
		}})
	case protocol.OpPing:
		tc.send(bodyReply{id, &protocol.PingReply{}})
	case protocol.OpMetadata:
		var req protocol.MetadataRequest
		if err := req.Decode(f.Body); err != nil {
			tc.send(errReply{op, id, err})
			return false
		}
		r := &protocol.MetadataReply{}
		if cl := tc.s.cfg.Cluster; cl != nil {
			r = cl.Metadata()
		}
		tc.send(bodyReply{id, r})
	case protocol.OpRaft:
		if tc.s.cfg.Raft == nil {
			tc.send(errReply{op, id, protocol.NewError(protocol.CodeInvalid, "this broker keeps no shard replicas")})
			return true
		}
		var req protocol.RaftRequest
		if err := req.Decode(f.Body); err != nil {
			tc.send(errReply{op, id, err})
			return false
		}
		if err := tc.s.cfg.Raft(req.From, req.Msgs); err != nil {
			tc.send(errReply{op, id, protocol.NewError(protocol.CodeInvalid, err.Error())})
			return true
		}
		// A batch taken is not answered (1.9): the link reads no answer,
		// and one per batch cost each broker a write here and a read
		// there for every batch of Raft messages it received.
	case protocol.OpAuth:
		return tc.authenticate(id, f.Body)
	case protocol.OpPush:
		return tc.push(id, f.Body)
	case protocol.OpPop:
		return tc.pop(id, f.Body)
	case protocol.OpAck:
		return tc.ack(id, f.Body)
	case protocol.OpTransaction:
		return tc.txn(id, f.Body)
	case protocol.OpLeaseExtend:
		return tc.extend(id, f.Body)
	default:
		return tc.admin(op, id, f.Body)
	}
	return true
}
