package tcp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/regentmq/regent/protocol"
)

// The accept loop. gnet's own listener ends its whole engine on an accept
// error it does not retry, and running out of descriptors (EMFILE) is one:
// under a flood of connections its reactor accepted faster than the loops
// refused, the process ran out, and the door was gone for good. So the
// server accepts on its own listener, as net/http does: an accept error
// pauses the loop (5 ms, doubling to 1 s) and it tries again; a connection
// past MaxConns is answered and closed here, before it costs the event
// loops anything; an admitted one is enrolled on an event loop (gnet's
// client engine, whose loops have no listener).

// maxRefusing bounds the refusals answered at once: each holds its
// descriptor until the client has read the answer (at most a second).
// Past that a refused connection is just closed.
const maxRefusing = 64

// acceptLoop accepts until the listener is closed.
func (s *Server) acceptLoop() {
	defer close(s.acceptDone)
	var pause time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.draining.Load() {
				return
			}
			if errors.Is(err, net.ErrClosed) {
				s.log.Error("the TCP door stopped", "addr", s.addr, "err", err)
				derr := fmt.Errorf("netserver: the TCP door on %s stopped: %w", s.addr, err)
				s.deadErr.Store(&derr)
				s.died <- derr
				return
			}
			if pause == 0 {
				pause = 5 * time.Millisecond
				s.log.Warn("accepting a TCP connection failed; pausing", "addr", s.addr, "err", err)
			} else {
				pause = min(2*pause, time.Second)
			}
			time.Sleep(pause)
			continue
		}
		pause = 0
		s.admit(nc)
	}
}

// admit enrolls nc on an event loop, or refuses it past MaxConns.
func (s *Server) admit(nc net.Conn) {
	if s.nconns.Add(1) > int64(s.cfg.MaxConns) {
		s.nconns.Add(-1)
		s.refuse(nc, fmt.Sprintf("too many connections (limit %d)", s.cfg.MaxConns))
		return
	}
	if s.lane == nil {
		s.enroll(s.cli, nc)
		return
	}
	// Which loop takes it depends on its first frame (lane.go): waited
	// for off the accept loop.
	s.admitting.Add(1)
	go func() {
		defer s.admitting.Done()
		if peekLink(nc) {
			s.enroll(s.lane, nc)
		} else {
			s.enroll(s.cli, nc)
		}
	}()
}

// enroll hands nc, admitted, to one of cli's loops.
func (s *Server) enroll(cli *gnet.Client, nc net.Conn) {
	// EnrollContext duplicates the descriptor onto a loop, closes nc, and
	// returns once OnOpen ran (or the loop could not take it).
	tc := &tcpConn{s: s}
	if _, err := cli.EnrollContext(nc, tc); err != nil {
		s.log.Debug("enrolling a TCP connection failed", "err", err)
		nc.Close()
	}
	if !tc.admitted.Load() {
		s.nconns.Add(-1)
	}
}

// refuse answers nc with an overloaded error and closes it. The answer is
// written in the background, which then reads until the client closes (or
// a second passes), so that the close does not reset the answer away.
func (s *Server) refuse(nc net.Conn, msg string) {
	if s.refusing.Add(1) > maxRefusing {
		s.refusing.Add(-1)
		nc.Close()
		return
	}
	go func() {
		defer s.refusing.Add(-1)
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(time.Second))
		if _, err := nc.Write(protocol.AppendError(nil, protocol.OpHello, 0, protocol.CodeOverloaded, msg)); err != nil {
			return
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		io.Copy(io.Discard, nc)
	}()
}
