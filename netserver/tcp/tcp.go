package tcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/protocol"
	"golang.org/x/sync/semaphore"
)

// Config configures the binary-protocol server. Zero values take the
// documented defaults.
type Config struct {
	// Addr to listen on; default ":6633".
	Addr string
	// MaxFrameBytes is the largest frame accepted, header included; default
	// 16 MiB. A larger frame closes its connection (after an error reply).
	MaxFrameBytes int
	// MaxInFlight is how many requests one connection may have unanswered
	// (parked long polls included); more are answered CodeOverloaded.
	// Default 4096.
	MaxInFlight int
	// MaxOutboundBytes is how many reply bytes may wait for one client to
	// read them; a client that lets more pile up is disconnected. Default
	// 64 MiB.
	MaxOutboundBytes int
	// FrameBudget, when set, bounds the bytes of request frames held at
	// once, from their arrival until they are answered, across
	// connections (a broker shares it with its HTTP door's bodies). A
	// frame of more than frameBudgetFrom bytes takes its size from it
	// when it starts to wait in a read buffer, or the whole budget when it
	// is larger; one that finds no room is answered CodeOverloaded at once
	// and its bytes are dropped as they come (frame_budget.go). Nil: not
	// bounded.
	FrameBudget *semaphore.Weighted
	// FrameBudgetBytes is FrameBudget's size.
	FrameBudgetBytes int64
	// FrameWeight is how many times its size a large frame counts against
	// FrameBudget (at most the whole budget): the copies its request makes
	// on its way that live as long as it does. Default 1; a replicated
	// broker's request is also held compressed in its shard's Raft log and
	// sent to the followers, which hold it until it is journaled.
	FrameWeight int
	// MaxConns caps open connections; more are refused (CodeOverloaded and
	// closed). Default 10000.
	MaxConns int
	// IdleTimeout closes connections with nothing in flight that sent
	// nothing for that long; default 10 minutes, negative disables.
	IdleTimeout time.Duration
	// FrameTimeout closes a connection that has not said Hello that long
	// after connecting, or that has held part of a frame that long without
	// completing any (a client trickling bytes: slow loris); default 60 s,
	// negative disables.
	FrameTimeout time.Duration
	// Loops is the number of gnet event loops; default one per CPU.
	Loops int
	// FixedProcs leaves GOMAXPROCS alone. By default a running server adds
	// one P per event loop (see procs.go), unless the GOMAXPROCS environment
	// variable is set.
	FixedProcs bool
	// JournalStats, when set, adds the journal's figures to Stats replies.
	JournalStats func() netserver.JournalStats
	// Auth turns on JWT authentication (off by default): see tcp_auth.go.
	Auth netserver.AuthConfig
	// Cluster, when set, is the cluster this broker is part of: Metadata
	// requests are answered from it, and configure and delete-queue apply
	// to every broker. Without it the broker runs alone.
	Cluster netserver.Cluster
	// Raft, when set, takes the Raft messages another broker sends this
	// one (the Raft opcode, the link between the replicas of a shard). It
	// runs on the event loop: it must not block. Without it a Raft request
	// is refused.
	Raft func(from uint64, msgs []protocol.RaftMessage) error
	// Plane, when set, serves the data operations (push, pop, ack,
	// transaction, lease extension) in place of the engine given to New: a
	// broker of replicated shards gives the engines of the shards it
	// leads. The engine given to New answers the rest (browsing, queue
	// summaries, streams); without one, Engines does (tcp_across.go).
	Plane netserver.DataPlane
	// Engines, for a broker with no one engine (New's e nil: a broker of
	// replicated shards), are the engines of the shards it leads now: the
	// operator's requests it serves read them (tcp_across.go).
	Engines func() []*engine.Engine
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Addr == "" {
		c.Addr = ":6633"
	}
	if c.MaxFrameBytes <= 0 {
		c.MaxFrameBytes = protocol.DefaultMaxFrame
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 4096
	}
	if c.MaxOutboundBytes <= 0 {
		c.MaxOutboundBytes = 64 << 20
	}
	if c.MaxConns <= 0 {
		c.MaxConns = 10000
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 10 * time.Minute
	}
	if c.FrameTimeout == 0 {
		c.FrameTimeout = time.Minute
	}
	if c.Loops <= 0 {
		c.Loops = runtime.NumCPU()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// PopBytesFor is the engine's pop budget (engine.Config.MaxPopBytes) with
// which every pop reply fits frames of maxFrame bytes, whatever its queue and
// group names: an engine configured so, behind a Server with that
// MaxFrameBytes, accepts no message that a client reading such frames could
// not pop (its MaxPayloadBytes follows from MaxPopBytes).
func PopBytesFor(maxFrame int) int {
	return maxFrame - protocol.PopReplyHeaderBytes(engine.MaxNameBytes, engine.MaxNameBytes)
}

// Server serves the binary protocol on gnet event loops. Each loop reads
// every complete frame of a connection in one go, hands the requests to the
// engine and never blocks: replies that wait (for a group commit or a long
// poll) come back through the connection's reply buffer and a Wake, so one
// write carries every reply ready at that moment.
type Server struct {
	cfg  Config
	e    *engine.Engine
	dp   netserver.DataPlane // Config.Plane, or the engine's
	log  *slog.Logger
	auth *netserver.Authenticator // nil when auth is off
	cli  *gnet.Client             // the event loops
	lane *gnet.Client             // the links' loop (lane.go); nil without Config.Raft, or with fixed Ps
	ln   net.Listener
	addr net.Addr

	acceptDone chan struct{}  // closed when the accept loop returns
	admitting  sync.WaitGroup // admissions waiting for a first frame (lane.go)
	refusing   atomic.Int32   // refusals being answered (accept.go)
	stopOnce   sync.Once
	stopErr    error
	died       chan error  // the door stopped without Shutdown (see Died)
	serving    atomic.Bool // serve ran
	deadErr    atomic.Pointer[error]
	tick       time.Duration // OnTick's period
	conns      sync.Map      // *tcpConn -> struct{}
	nconns     atomic.Int64
	inflight   atomic.Int64
	// framesHeld is the room frames hold in Config.FrameBudget now;
	// frameRefusals counts the frames answered overloaded for want of it.
	framesHeld    atomic.Int64
	frameRefusals atomic.Uint64
	draining      atomic.Bool

	releaseProcs func()

	// afterReply, set only by tests, runs in every job's finish right
	// after the reply reached the connection's buffer: a test holds the
	// answering goroutine there, where a loaded machine may preempt it.
	afterReply func(*tcpConn)
}

// New returns a server for e; Start runs it.
func New(cfg Config, e *engine.Engine) (*Server, error) {
	cfg.setDefaults()
	if cfg.MaxFrameBytes < protocol.MinMaxFrame {
		return nil, fmt.Errorf("netserver: MaxFrameBytes %d is below %d", cfg.MaxFrameBytes, protocol.MinMaxFrame)
	}
	if e == nil && cfg.Plane == nil {
		return nil, errors.New("netserver: a server needs an engine or a data plane (Config.Plane)")
	}
	tick := time.Second
	for _, d := range []time.Duration{cfg.IdleTimeout, cfg.FrameTimeout} {
		if d > 0 {
			tick = min(tick, max(d/4, 10*time.Millisecond))
		}
	}
	s := &Server{cfg: cfg, e: e, dp: cfg.Plane, log: cfg.Logger, acceptDone: make(chan struct{}),
		died: make(chan error, 1), tick: tick}
	if s.dp == nil {
		s.dp = netserver.EnginePlane{E: e}
	}
	if cfg.Auth.Enabled {
		a, err := netserver.NewAuthenticator(cfg.Auth)
		if err != nil {
			return nil, err
		}
		s.auth = a
	}
	return s, nil
}

// Start listens on Config.Addr and serves in the background; it returns
// once the server accepts connections (or failed to start).
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("netserver: listen on %s: %w", s.cfg.Addr, err)
	}
	return s.serve(ln)
}

// serve runs the event loops and the accept loop (accept.go) on ln.
func (s *Server) serve(ln net.Listener) error {
	// The links' lane (lane.go) runs where its P is reserved: without
	// one it waits for the clients' loops' Ps, and costs more than it saves.
	withLane := s.cfg.Raft != nil && !s.cfg.FixedProcs && !procsFixedByEnv()
	if !s.cfg.FixedProcs {
		loops := s.cfg.Loops
		if withLane {
			loops++
		}
		s.releaseProcs = reserveProcs(loops)
	}
	// gnet's client engine: event loops with no listener of their own. The
	// accept loop admits each connection and enrolls it there.
	cli, err := gnet.NewClient(s,
		gnet.WithMulticore(true),
		gnet.WithNumEventLoop(s.cfg.Loops),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithTicker(true),
		gnet.WithLogger(gnetLogger{s.log}),
	)
	if err == nil {
		err = cli.Start()
	}
	var lane *gnet.Client
	if err == nil && withLane {
		// One loop, and no ticker: the clients' engine's OnTick already
		// looks at every connection.
		lane, err = gnet.NewClient(s,
			gnet.WithMulticore(true),
			gnet.WithNumEventLoop(1),
			gnet.WithTCPNoDelay(gnet.TCPNoDelay),
			gnet.WithLogger(gnetLogger{s.log}),
		)
		if err == nil {
			if err = lane.Start(); err != nil {
				lane = nil
			}
		}
		if err != nil {
			_ = cli.Stop()
		}
	}
	if err != nil {
		ln.Close()
		s.release()
		return fmt.Errorf("netserver: starting the event loops: %w", err)
	}
	s.cli, s.lane, s.ln, s.addr = cli, lane, ln, ln.Addr()
	s.serving.Store(true)
	go s.acceptLoop()
	return nil
}

// Died delivers an error if the server stops serving without Shutdown (its
// listener was closed under it). The process should then exit rather than
// limp on with one door. Running out of descriptors is not that: the accept
// loop pauses and tries again (accept.go).
func (s *Server) Died() <-chan error { return s.died }

// Healthy reports why the server does not serve (not started, died), or nil.
func (s *Server) Healthy() error {
	if p := s.deadErr.Load(); p != nil {
		return *p
	}
	if !s.serving.Load() {
		return errors.New("netserver: the TCP door is not serving")
	}
	return nil
}

// Addr is the address the server listens on (with the real port when the
// configured one was 0).
func (s *Server) Addr() net.Addr { return s.addr }

// Shutdown stops taking requests, answers parked long polls (empty), waits
// until every request in flight has been answered (their journal commits
// done and replies written) or ctx ends, then closes every connection.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	if s.ln == nil {
		return nil // never started
	}
	s.ln.Close()
	<-s.acceptDone
	s.admitting.Wait()
	s.conns.Range(func(k, _ any) bool {
		k.(*tcpConn).cancelWaiters()
		return true
	})
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for s.inflight.Load() > 0 {
		select {
		case <-ctx.Done():
			s.stop()
			return ctx.Err()
		case <-tick.C:
		}
	}
	// Let the loops write what the last replies put in the buffers.
	s.conns.Range(func(k, _ any) bool {
		k.(*tcpConn).c.Wake(nil)
		return true
	})
	return s.stop()
}

// stop ends the event loops, which close every connection, once.
func (s *Server) stop() error {
	s.stopOnce.Do(func() {
		s.stopErr = s.cli.Stop()
		if s.lane != nil {
			s.stopErr = errors.Join(s.stopErr, s.lane.Stop())
		}
		s.release()
	})
	return s.stopErr
}

// release gives back the Ps Start reserved.
func (s *Server) release() {
	if s.releaseProcs != nil {
		s.releaseProcs()
	}
}

// OnBoot does nothing: serve has the listener's address.
func (s *Server) OnBoot(gnet.Engine) gnet.Action { return gnet.None }

// OnShutdown does nothing: Shutdown did the work.
func (s *Server) OnShutdown(gnet.Engine) {}

// OnOpen registers a connection the accept loop admitted (its tcpConn is
// the context it was enrolled with), or refuses it once Shutdown began.
func (s *Server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	tc, ok := c.Context().(*tcpConn)
	if !ok || s.draining.Load() {
		return protocol.AppendError(nil, protocol.OpHello, 0, protocol.CodeOverloaded, "server shutting down"), gnet.Close
	}
	tc.c = c
	tc.opened = time.Now().UnixNano()
	tc.lastActive.Store(tc.opened)
	s.conns.Store(tc, struct{}{})
	tc.admitted.Store(true)
	return nil, gnet.None
}

// OnClose forgets the connection and withdraws its parked long polls, so a
// vanished client takes no messages with it.
func (s *Server) OnClose(c gnet.Conn, err error) gnet.Action {
	tc, ok := c.Context().(*tcpConn)
	if !ok || !tc.admitted.Load() {
		return gnet.None // refused by OnOpen: the accept loop gives its place back
	}
	tc.mu.Lock()
	tc.closed = true
	tc.out = nil
	tc.mu.Unlock()
	tc.releaseFrame()
	tc.big, tc.bigSize = nil, 0
	tc.cancelWaiters()
	s.conns.Delete(tc)
	s.nconns.Add(-1)
	return gnet.None
}

// OnTraffic handles every complete frame in the connection's read buffer,
// then writes every reply that is ready in one write.
func (s *Server) OnTraffic(c gnet.Conn) gnet.Action {
	tc := c.Context().(*tcpConn)
	now := time.Now().UnixNano()
	tc.lastActive.Store(now)
	tc.mu.Lock()
	tc.inLoop = true
	tc.mu.Unlock()
	action := gnet.None
	if c.OutboundBuffered() > s.cfg.MaxOutboundBytes {
		tc.overflow()
		return gnet.Close
	}
	if !tc.dropRefused(c) {
		// All that came belongs to a frame refused for want of room.
	} else if !tc.assembled(c) {
		// The large frame being assembled waits for the rest; the
		// slow-loris watch keeps the time it started waiting.
	} else if tc.bigSize > 0 && !tc.handleAssembled() {
		action = gnet.Close
	} else if h, partial := partialFrame(c, s.cfg.MaxFrameBytes); partial {
		// Nothing to handle until the frame has arrived; the slow-loris
		// watch (below) keeps the time it started waiting.
		if tc.partialSince.Load() == 0 {
			tc.partialSince.Store(now)
		}
		switch {
		case h.Size() > frameBudgetFrom && !tc.authorize(h.Op, h.ID):
			// Answered unauthenticated or forbidden from its header:
			// it holds no room while it arrives (see frame_budget.go).
			tc.drop = h.Size()
		case !tc.holdFrame(h):
			tc.refuseFrame(h)
		default:
			tc.big, tc.bigSize = nil, h.Size()
			if tc.held > 0 {
				// Its room is taken: its buffer is made at once
				// (growing it costs copies; see assembled).
				tc.big = make([]byte, 0, h.Size())
			}
			tc.assembled(c)
		}
		if tc.drop > 0 { // refused: dropped as it comes, no slow-loris watch
			tc.dropRefused(c)
			tc.partialSince.Store(0)
		}
	} else if buf, _ := c.Peek(-1); len(buf) > 0 {
		off := 0
		for off < len(buf) {
			f, n, err := protocol.ReadFrame(buf[off:], s.cfg.MaxFrameBytes)
			if errors.Is(err, protocol.ErrShort) {
				break
			}
			if err != nil || f.IsReply() {
				// A frame that cannot be handled closes the connection: an
				// oversized or malformed one cannot be skipped reliably, and
				// an unknown opcode means the client speaks something else.
				if err == nil {
					err = protocol.NewError(protocol.CodeMalformed, "a client sent a reply frame")
				}
				tc.mu.Lock()
				tc.out = protocol.AppendErr(tc.out, f.Op, f.ID, err)
				tc.mu.Unlock()
				action = gnet.Close
				off = len(buf)
				break
			}
			if !tc.handle(f) {
				action = gnet.Close
				off = len(buf)
				break
			}
			off += n
		}
		if off > 0 { // Discard(0) would drop the whole buffer, partial frame included
			c.Discard(off)
		}
		// Slow-loris watch: since when has part of a frame waited without
		// any frame completing?
		switch {
		case off == len(buf):
			tc.partialSince.Store(0)
		case off > 0 || tc.partialSince.Load() == 0:
			tc.partialSince.Store(now)
		}
	}
	tc.mu.Lock()
	out := tc.out
	if len(out) > 0 { // an empty out keeps its capacity where it is
		tc.out, tc.spare = tc.spare[:0], nil
	}
	tc.woke, tc.inLoop = false, false
	tc.mu.Unlock()
	if len(out) > 0 {
		c.Write(out)
		tc.mu.Lock()
		if !tc.closed {
			tc.spare = out[:0]
			if cap(tc.spare) > 1<<20 {
				tc.spare = nil
			}
		}
		tc.mu.Unlock()
	}
	if c.OutboundBuffered() > s.cfg.MaxOutboundBytes {
		tc.overflow()
		return gnet.Close
	}
	return action
}

// peekAllBytes is how much buffered input OnTraffic reads whole (Peek(-1))
// without first checking that it starts with a complete frame.
const peekAllBytes = 64 << 10

// partialFrame reports whether c's input starts with a frame that has not
// fully arrived, when that input is large. gnet's Peek(-1) copies all of a
// connection's buffered input into one slice whenever its ring buffer holds
// some: reading a 1 MiB frame again at every read event while its bytes
// arrive copied it many times over (50 producers of 1 MiB messages spent
// 42% of the server's CPU in Peek). A header that fails its checks is left
// to the frame loop, which answers it.
func partialFrame(c gnet.Conn, maxFrame int) (protocol.Header, bool) {
	buffered := c.InboundBuffered()
	if buffered <= peekAllBytes {
		return protocol.Header{}, false
	}
	hb, err := c.Peek(protocol.HeaderSize)
	if err != nil {
		return protocol.Header{}, false
	}
	h, err := protocol.ParseHeader(hb)
	if (err != nil && !errors.Is(err, protocol.ErrUnknownOp)) || h.CheckSize(maxFrame) != nil {
		return protocol.Header{}, false
	}
	return h, buffered < h.Size()
}

// OnTick closes idle connections, connections that do not say Hello in
// time, and connections that trickle a frame (FrameTimeout).
func (s *Server) OnTick() (time.Duration, gnet.Action) {
	now := time.Now()
	idle, frame := int64(-1), int64(-1)
	if s.cfg.IdleTimeout > 0 {
		idle = now.Add(-s.cfg.IdleTimeout).UnixNano()
	}
	if s.cfg.FrameTimeout > 0 {
		frame = now.Add(-s.cfg.FrameTimeout).UnixNano()
	}
	s.conns.Range(func(k, _ any) bool {
		tc := k.(*tcpConn)
		why := ""
		switch {
		case tc.inflight.Load() == 0 && tc.lastActive.Load() < idle:
			why = "idle"
		case !tc.greeted.Load() && tc.opened < frame:
			why = "no Hello within FrameTimeout"
		case tc.partialSince.Load() != 0 && tc.partialSince.Load() < frame:
			why = "a frame not completed within FrameTimeout"
		}
		if why != "" {
			if why != "idle" {
				s.log.Info("closing a slow connection", "remote", tc.c.RemoteAddr(), "why", why)
			}
			tc.c.Close()
		}
		return true
	})
	return s.tick, gnet.None
}

// gnetLogger routes gnet's logs to slog.
type gnetLogger struct{ l *slog.Logger }

func (g gnetLogger) Debugf(f string, a ...any) { g.l.Debug(fmt.Sprintf(f, a...), "from", "gnet") }
func (g gnetLogger) Infof(f string, a ...any)  { g.l.Debug(fmt.Sprintf(f, a...), "from", "gnet") }
func (g gnetLogger) Warnf(f string, a ...any)  { g.l.Warn(fmt.Sprintf(f, a...), "from", "gnet") }
func (g gnetLogger) Errorf(f string, a ...any) { g.l.Error(fmt.Sprintf(f, a...), "from", "gnet") }
func (g gnetLogger) Fatalf(f string, a ...any) { g.l.Error(fmt.Sprintf(f, a...), "from", "gnet") }

// Connections is the number of open connections.
func (s *Server) Connections() int { return int(s.nconns.Load()) }

// Frames reports the bytes large frames hold in the frame budget now
// (Config.FrameBudget), and how many frames were answered overloaded for
// want of room since the door started.
func (s *Server) Frames() (held int64, refused uint64) {
	return s.framesHeld.Load(), s.frameRefusals.Load()
}

// InFlight is the number of requests received and not yet answered, parked
// long polls included.
func (s *Server) InFlight() int { return int(s.inflight.Load()) }
