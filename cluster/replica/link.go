package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/regentmq/regent/protocol"
)

// Link is the Transport between brokers: one connection per peer in the
// binary protocol, carrying the Raft messages of every shard in Raft
// requests (protocol 1.7), as many as are queued in one request, with the
// heartbeats (and their responses) of every shard coalesced into one
// message of a few bytes per shard. The
// receiving broker's TCP door hands them to its Node (ReceiveWire).
//
// Send never blocks: it queues, up to a bound past which it drops (Raft
// sends again what matters). A peer's goroutine dials, says Hello, writes
// the queued messages and reads the replies, which it only counts; a
// connection that fails is dropped with what was queued for it, and dialled
// again after a pause.
type Link struct {
	self   uint64
	addr   func(peer uint64) string
	logger *slog.Logger

	mu     sync.Mutex
	peers  map[uint64]*peerLink
	closed bool
	wg     sync.WaitGroup
	down   atomic.Pointer[func(peer uint64)] // OnPeerDown's
	token  atomic.Pointer[TokenSource]       // WithToken's
}

// OnPeerDown has f called when a peer closes a connection of the link (its
// process died, or the network failed): Node.PeerDown.
func (l *Link) OnPeerDown(f func(peer uint64)) { l.down.Store(&f) }

// TokenSource gives the token a link connection presents to a peer's door
// (an Auth frame after Hello) when the doors check tokens.
type TokenSource func(ctx context.Context) (string, error)

// WithToken has every connection of the link present a token from src
// after Hello; a connection whose token the peer says expires is made again
// at four fifths of its life. Call it before the first Send.
func (l *Link) WithToken(src TokenSource) { l.token.Store(&src) }

// Bounds of a Link.
const (
	linkQueueMsgs   = 4096        // queued for one peer, past which Send drops
	linkFrameBytes  = 4 << 20     // Raft messages per request, then the next request
	linkDialTimeout = time.Second // dial and Hello
	// linkWriteTimeout bounds one request's write: a peer that stopped
	// reading without closing (its doors shutting down) must not hold the
	// link, nor Close, for ever. What was in the request is dropped (Raft
	// sends again).
	linkWriteTimeout = 5 * time.Second
	linkRedial       = 50 * time.Millisecond
	linkMaxRedial    = time.Second

	// linkFrameOverhead bounds a Raft request frame's bytes besides its
	// messages (header, sender, count); linkMessageOverhead a message's
	// (shard, length).
	linkFrameOverhead   = 64
	linkMessageOverhead = 16
)

// NewLink returns a Link of broker self; addr names where a peer's binary
// protocol listens ("" when it is not known yet).
func NewLink(self uint64, addr func(peer uint64) string, logger *slog.Logger) *Link {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Link{self: self, addr: addr, logger: logger, peers: make(map[uint64]*peerLink)}
}

type peerLink struct {
	l    *Link
	id   uint64
	mu   sync.Mutex
	q    []Envelope
	wake chan struct{}
	stop chan struct{}
}

// Send queues msgs for broker to.
func (l *Link) Send(to uint64, msgs []Envelope) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	p := l.peers[to]
	if p == nil {
		p = &peerLink{l: l, id: to, wake: make(chan struct{}, 1), stop: make(chan struct{})}
		l.peers[to] = p
		l.wg.Add(1)
		go p.run()
	}
	l.mu.Unlock()
	p.mu.Lock()
	if len(p.q)+len(msgs) > linkQueueMsgs {
		p.mu.Unlock()
		return // the peer is slow or gone: Raft sends again
	}
	p.q = append(p.q, msgs...)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Close stops every peer's goroutine and closes its connection.
func (l *Link) Close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	for _, p := range l.peers {
		close(p.stop)
	}
	l.mu.Unlock()
	l.wg.Wait()
}

func (p *peerLink) take() []Envelope {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.q
	p.q = nil
	return q
}

func (p *peerLink) run() {
	defer p.l.wg.Done()
	var c net.Conn
	var maxFrame int // the largest frame the peer takes (its Hello reply)
	var readerDone chan struct{}
	var closedHere *atomic.Bool // this side closed c (not the peer)
	closeConn := func() {
		if c != nil {
			closedHere.Store(true)
			c.Close()
			<-readerDone
			c = nil
		}
	}
	defer closeConn()
	pause := linkRedial
	var renew time.Time // when c must be made again for a fresh token
	var buf, enc []byte
	var req protocol.RaftRequest
	for {
		select {
		case <-p.stop:
			return
		case <-p.wake:
		}
		msgs := p.take()
		if len(msgs) == 0 {
			continue
		}
		if c != nil {
			select {
			case <-readerDone: // the peer closed it
				closeConn()
			default:
				if !renew.IsZero() && time.Now().After(renew) {
					closeConn() // its token expires soon
				}
			}
		}
		if c == nil {
			var err error
			if c, maxFrame, renew, err = p.dial(); err != nil {
				p.l.logger.Debug("raft link: dial", "peer", p.id, "err", err)
				select { // what was queued is dropped; Raft sends again
				case <-p.stop:
					return
				case <-time.After(pause):
				}
				pause = min(2*pause, linkMaxRedial)
				p.kick()
				continue
			}
			pause = linkRedial
			readerDone, closedHere = make(chan struct{}), new(atomic.Bool)
			go func(c net.Conn, done chan struct{}, here *atomic.Bool) {
				if byPeer := discardReplies(c, done, here); byPeer {
					if f := p.l.down.Load(); f != nil {
						(*f)(p.id)
					}
				}
			}(c, readerDone, closedHere)
		}
		// The heartbeats of every shard go as one message.
		var beats []byte
		beats, msgs = coalesce(beats, msgs)
		for len(msgs) > 0 || beats != nil {
			req.From, req.Msgs = p.l.self, req.Msgs[:0]
			size := 0
			if beats != nil {
				req.Msgs = append(req.Msgs, protocol.RaftMessage{Shard: heartbeatShard, Data: beats})
				size, beats = len(beats), nil
			}
			// Up to linkFrameBytes per request, and never past the peer's
			// frame (linkFrameOverhead: the frame's and the request's own
			// bytes): a message that would pass it waits for the next
			// request (encoded again then); one that no frame holds is
			// dropped (Append keeps records within MaxEntryBytes, which a
			// frame holds). The messages are encoded one after another
			// into enc, which the request then copies.
			enc = enc[:0]
			for len(msgs) > 0 && size < linkFrameBytes {
				at := len(enc)
				var err error
				if enc, err = (proto.MarshalOptions{}).MarshalAppend(enc, msgs[0].Msg); err != nil {
					enc, msgs = enc[:at], msgs[1:]
					continue
				}
				data := enc[at:len(enc):len(enc)]
				room := maxFrame - linkFrameOverhead - size
				if len(data)+linkMessageOverhead > room {
					enc = enc[:at]
					if size == 0 {
						p.l.logger.Warn("raft link: a message larger than the peer's frame dropped", "peer", p.id, "bytes", len(data), "max_frame", maxFrame)
						msgs = msgs[1:]
						continue
					}
					break
				}
				req.Msgs = append(req.Msgs, protocol.RaftMessage{Shard: msgs[0].Shard, Data: data})
				size += len(data) + linkMessageOverhead
				msgs = msgs[1:]
			}
			buf = protocol.AppendRaftRequest(buf[:0], 0, &req)
			clear(req.Msgs) // their data is in enc, copied into buf
			_ = c.SetWriteDeadline(time.Now().Add(linkWriteTimeout))
			_, err := c.Write(buf)
			if cap(buf) > 2*linkFrameBytes {
				// A request that carried a large entry: its buffers go
				// back to the heap rather than stay with the link.
				buf, enc = nil, nil
			}
			if err != nil {
				p.l.logger.Debug("raft link: write", "peer", p.id, "err", err)
				closeConn()
				break
			}
		}
	}
}

func (p *peerLink) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// dial connects to the peer, says Hello and presents the link's token (if
// it has one); it returns the largest frame the peer takes, and when the
// connection must be made again for a fresh token (zero: never).
func (p *peerLink) dial() (net.Conn, int, time.Time, error) {
	addr := p.l.addr(p.id)
	if addr == "" {
		return nil, 0, time.Time{}, fmt.Errorf("no address for broker %d", p.id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), linkDialTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, 0, time.Time{}, err
	}
	c.SetDeadline(time.Now().Add(linkDialTimeout))
	// The name has the peer's door serve this connection on a loop apart
	// from its clients' (netserver/tcp's lane), so that heartbeats never
	// wait behind their pushes.
	hello := protocol.AppendHelloRequest(nil, 0, &protocol.HelloRequest{Major: protocol.VersionMajor, Minor: protocol.VersionMinor, ClientName: protocol.LinkClientName})
	if _, err := c.Write(hello); err != nil {
		c.Close()
		return nil, 0, time.Time{}, err
	}
	rd := protocol.NewReader(c, protocol.DefaultMaxFrame)
	f, err := rd.Next()
	var hr protocol.HelloReply
	if err == nil && f.IsError() {
		var er protocol.ErrorReply
		_ = er.Decode(f.Body)
		err = er.Err()
	} else if err == nil {
		err = hr.Decode(f.Body)
	}
	if err != nil {
		c.Close()
		return nil, 0, time.Time{}, fmt.Errorf("hello: %w", err)
	}
	var renew time.Time
	if src := p.l.token.Load(); src != nil {
		if renew, err = p.auth(ctx, c, rd, *src); err != nil {
			c.Close()
			return nil, 0, time.Time{}, fmt.Errorf("auth: %w", err)
		}
	}
	c.SetDeadline(time.Time{})
	maxFrame := int(hr.MaxFrame)
	if maxFrame <= 0 {
		maxFrame = protocol.DefaultMaxFrame
	}
	return c, maxFrame, renew, nil
}

// auth presents a token from src on c and returns when to make the
// connection again for a fresh one (zero: the token does not expire, or
// the peer does not check tokens).
func (p *peerLink) auth(ctx context.Context, c net.Conn, rd *protocol.Reader, src TokenSource) (time.Time, error) {
	tok, err := src(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if _, err := c.Write(protocol.AppendAuthRequest(nil, 0, &protocol.AuthRequest{Token: tok})); err != nil {
		return time.Time{}, err
	}
	f, err := rd.Next()
	if err != nil {
		return time.Time{}, err
	}
	if f.IsError() {
		var er protocol.ErrorReply
		if err := er.Decode(f.Body); err != nil {
			return time.Time{}, err
		}
		return time.Time{}, er.Err()
	}
	var ar protocol.AuthReply
	if err := ar.Decode(f.Body); err != nil {
		return time.Time{}, err
	}
	if !ar.Enforced || ar.Expires == 0 {
		return time.Time{}, nil
	}
	now := time.Now()
	return now.Add(time.Unix(0, ar.Expires).Sub(now) * 4 / 5), nil
}

// discardReplies reads a link connection's replies until it closes: a
// peer answers only the requests it refuses (protocol 1.9; an older one
// answers every request, empty), and an error reply is logged by nobody:
// Raft sends again.
//
// It reports whether the peer ended the connection: here was not set by
// this side's close when the read failed (read before done is closed, so
// that a close that follows done cannot hide the peer's).
func discardReplies(c net.Conn, done chan struct{}, here *atomic.Bool) (byPeer bool) {
	defer close(done)
	r := protocol.NewReader(c, protocol.DefaultMaxFrame)
	for {
		if _, err := r.Next(); err != nil {
			byPeer = !here.Load()
			c.Close()
			return byPeer
		}
	}
}

// heartbeatShard is the shard number of a Raft request's message that
// holds the heartbeats of many shards (no cluster has that many shards).
const heartbeatShard = 1<<32 - 1

// coalesce takes the plain heartbeats and heartbeat responses out of msgs
// and encodes them into one message body, appended to dst (nil when there
// are none): a broker's groups send one each per peer and tick, and they
// carry only a term and a commit index.
//
//	n uv × (shard uv | response u8 | term uv | commit uv)
func coalesce(dst []byte, msgs []Envelope) ([]byte, []Envelope) {
	rest := msgs[:0:0]
	n := 0
	var body []byte
	for _, env := range msgs {
		m := env.Msg
		t := m.GetType()
		if (t != pb.MsgHeartbeat && t != pb.MsgHeartbeatResp) || len(m.GetContext()) > 0 {
			rest = append(rest, env)
			continue
		}
		body = binary.AppendUvarint(body, uint64(env.Shard))
		if t == pb.MsgHeartbeatResp {
			body = append(body, 1)
		} else {
			body = append(body, 0)
		}
		body = binary.AppendUvarint(body, m.GetTerm())
		body = binary.AppendUvarint(body, m.GetCommit())
		n++
	}
	if n == 0 {
		return nil, msgs
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	return append(dst, body...), rest
}

// uncoalesce turns a coalesced heartbeat message from broker from to
// broker to back into one Raft message per shard.
func uncoalesce(from, to uint64, data []byte) ([]Envelope, error) {
	bad := fmt.Errorf("replica: a malformed heartbeat message from broker %d", from)
	n, k := binary.Uvarint(data)
	if k <= 0 || n > uint64(len(data)) {
		return nil, bad
	}
	data = data[k:]
	envs := make([]Envelope, 0, n)
	for range n {
		shard, k := binary.Uvarint(data)
		if k <= 0 || shard >= heartbeatShard || len(data) <= k {
			return nil, bad
		}
		resp := data[k]
		data = data[k+1:]
		term, k := binary.Uvarint(data)
		if k <= 0 {
			return nil, bad
		}
		data = data[k:]
		commit, k := binary.Uvarint(data)
		if k <= 0 || resp > 1 {
			return nil, bad
		}
		data = data[k:]
		t := pb.MsgHeartbeat
		if resp == 1 {
			t = pb.MsgHeartbeatResp
		}
		m := &pb.Message{Type: t.Enum(), From: new(from), To: new(to), Term: new(term)}
		if commit != 0 || t == pb.MsgHeartbeat {
			m.Commit = new(commit)
		}
		envs = append(envs, Envelope{Shard: uint32(shard), Msg: m})
	}
	if len(data) != 0 {
		return nil, bad
	}
	return envs, nil
}

// ReceiveWire steps Raft messages that broker from sent in a Raft request
// (the TCP door's Config.Raft). A message that does not decode refuses the
// whole request.
func (n *Node) ReceiveWire(from uint64, msgs []protocol.RaftMessage) error {
	envs := make([]Envelope, 0, len(msgs))
	for i := range msgs {
		if msgs[i].Shard == heartbeatShard {
			beats, err := uncoalesce(from, n.cfg.ID, msgs[i].Data)
			if err != nil {
				return err
			}
			envs = append(envs, beats...)
			continue
		}
		m := &pb.Message{}
		if err := proto.Unmarshal(msgs[i].Data, m); err != nil {
			return fmt.Errorf("replica: a raft message from broker %d: %w", from, err)
		}
		if m.GetFrom() != from {
			return errors.New("replica: a raft message whose sender is not the link's broker")
		}
		envs = append(envs, Envelope{Shard: msgs[i].Shard, Msg: m})
	}
	n.Receive(envs)
	return nil
}
