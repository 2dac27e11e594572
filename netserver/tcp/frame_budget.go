package tcp

import (
	"fmt"

	"github.com/panjf2000/gnet/v2"

	"github.com/regentmq/regent/protocol"
)

// The frame budget. gnet reads whatever a socket holds into the
// connection's read buffer, and has no way to stop reading one, so a
// frame that waits to arrive in full is held in memory all along: 50
// clients each sending a 15 MB push held 1.1 GB of read buffers in a
// broker whose --memory-limit was 128 MiB (a heap profile put 83% of the
// heap there). So a large frame (more than frameBudgetFrom bytes) takes
// its size from Config.FrameBudget when it starts to wait, and gives it
// back once the request is answered (its decoded copy lives that long, as
// an HTTP body does until its handler returns; 50 such pushes on their
// way through Raft held 1.2 GB when the room went back at decoding); one
// that finds no room is answered CodeOverloaded at once, and what comes
// of it is dropped as it arrives, holding nothing.
// The client sends it again later, as it would after an HTTP 503 for
// want of room for a body (the two doors share the budget). A frame
// larger than the whole budget takes all of it, so it passes when nothing
// else is held. Raft requests are not counted: what a link sends is
// bounded by Raft's own flow control, and refusing it would slow the
// replication the clients' frames wait for. With auth on, a large frame
// the connection may not send (no token yet, an expired one, a role below
// its opcode's) is answered so from its header, and dropped as it
// arrives: a client that never authenticates cannot hold the budget
// until FrameTimeout closes it.

// frameBudgetFrom is the size up to which a frame is not counted: it is
// read in a pass or two of the loop.
const frameBudgetFrom = 64 << 10

// holdFrame takes room for the frame h, which has started to wait in the
// read buffer, unless it holds already or is not counted. False: no room.
func (tc *tcpConn) holdFrame(h protocol.Header) bool {
	b := tc.s.cfg.FrameBudget
	if b == nil || tc.held > 0 || h.Size() <= frameBudgetFrom || h.Op == protocol.OpRaft {
		return true
	}
	n := min(int64(h.Size())*int64(max(tc.s.cfg.FrameWeight, 1)), tc.s.cfg.FrameBudgetBytes)
	if !b.TryAcquire(n) {
		return false
	}
	tc.held = n
	tc.s.framesHeld.Add(n)
	return true
}

// releaseFrame gives back the room the connection's frame held, unless a
// request took it over (job.begin).
func (tc *tcpConn) releaseFrame() {
	if tc.held > 0 {
		tc.s.releaseHeld(tc.held)
		tc.held = 0
	}
}

// releaseHeld gives n bytes back to the frame budget (from any goroutine).
func (s *Server) releaseHeld(n int64) {
	s.cfg.FrameBudget.Release(n)
	s.framesHeld.Add(-n)
}

// refuseFrame answers the frame h CodeOverloaded and has what comes of it
// dropped (dropRefused).
func (tc *tcpConn) refuseFrame(h protocol.Header) {
	tc.mu.Lock()
	tc.out = protocol.AppendError(tc.out, h.Op, h.ID, protocol.CodeOverloaded,
		fmt.Sprintf("no room for a frame of %d bytes now: the frames and HTTP bodies being received hold the broker's budget for them (--max-bodies-in-flight); send it again", h.Size()))
	tc.mu.Unlock()
	tc.drop = h.Size()
	tc.s.frameRefusals.Add(1)
}

// assembled moves what the read buffer holds of the large frame being
// assembled (tc.big, of tc.bigSize bytes) into it, and reports whether the
// frame is complete (or none is assembled). gnet's read buffer is a ring
// that doubles as it fills, returned to a pool shared by every connection,
// and Peek copies what wraps around its end: a 15 MB frame left in it took
// a 32 MiB ring and a 32 MiB copy, twice the room it held in the budget,
// and the ring went on to serve small connections. Taken out as it
// arrives, the frame takes its own size and no more, and the ring stays
// small. A frame that took room in the budget gets a buffer of its size at
// once; one that took none (a Raft frame, or any on a door without a
// budget) gets one that grows with what has come (to four times it, from
// 1 MiB, up to the declared size): its header alone must not make the
// server allocate 16 MiB, and a Raft entry of 15 MB is copied twice on its
// way in, not eight times. Under the storm of 15 MB pushes on three
// replicated brokers, the small pushes' median latency was 1.15 to 1.4 s
// in four runs doubling from 64 KiB, 0.81 to 1.11 s in five with every
// buffer made at once, and 0.80 and 1.04 s in two growing so.
func (tc *tcpConn) assembled(c gnet.Conn) bool {
	if tc.bigSize == 0 {
		return true
	}
	if have := len(tc.big); have < tc.bigSize {
		want := min(tc.bigSize, have+c.InboundBuffered())
		if want > cap(tc.big) {
			grown := make([]byte, have, min(tc.bigSize, max(want, 4*cap(tc.big), growFrom)))
			copy(grown, tc.big)
			tc.big = grown
		}
		n, _ := c.Read(tc.big[have:want])
		tc.big = tc.big[:have+n]
	}
	return len(tc.big) == tc.bigSize
}

// growFrom is the least buffer a frame that took no room starts with.
const growFrom = 1 << 20

// handleAssembled handles the large frame assembled in full, then gives
// back its room and memory; false: the connection is to be closed.
func (tc *tcpConn) handleAssembled() bool {
	defer func() {
		tc.big, tc.bigSize = nil, 0
		tc.releaseFrame()
		tc.partialSince.Store(0)
	}()
	f, _, err := protocol.ReadFrame(tc.big, tc.s.cfg.MaxFrameBytes)
	if err == nil && f.IsReply() {
		err = protocol.NewError(protocol.CodeMalformed, "a client sent a reply frame")
	}
	if err != nil {
		tc.mu.Lock()
		tc.out = protocol.AppendErr(tc.out, f.Op, f.ID, err)
		tc.mu.Unlock()
		return false
	}
	return tc.handle(f)
}

// dropRefused drops what the read buffer holds of a refused frame; it
// reports whether the frame is all dropped (what follows is handled).
func (tc *tcpConn) dropRefused(c gnet.Conn) bool {
	if tc.drop == 0 {
		return true
	}
	if n := min(tc.drop, c.InboundBuffered()); n > 0 { // Discard(0) would drop everything
		c.Discard(n)
		tc.drop -= n
	}
	return tc.drop == 0
}
