package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/regentmq/regent/protocol"
)

// Link is the Transport between brokers: one connection per peer in the
// binary protocol, carrying the Raft messages of every shard in Raft
// requests (protocol 1.7), as many as are queued in one request. The
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
}

// Bounds of a Link.
const (
	linkQueueMsgs   = 4096        // queued for one peer, past which Send drops
	linkFrameBytes  = 4 << 20     // Raft messages per request, at most (one always goes)
	linkDialTimeout = time.Second // dial and Hello
	linkRedial      = 50 * time.Millisecond
	linkMaxRedial   = time.Second
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
	var readerDone chan struct{}
	closeConn := func() {
		if c != nil {
			c.Close()
			<-readerDone
			c = nil
		}
	}
	defer closeConn()
	pause := linkRedial
	var buf []byte
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
			}
		}
		if c == nil {
			var err error
			if c, err = p.dial(); err != nil {
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
			readerDone = make(chan struct{})
			go discardReplies(c, readerDone)
		}
		for len(msgs) > 0 {
			req.From, req.Msgs = p.l.self, req.Msgs[:0]
			size := 0
			for len(msgs) > 0 && (size == 0 || size < linkFrameBytes) {
				env := msgs[0]
				msgs = msgs[1:]
				data, err := proto.Marshal(env.Msg)
				if err != nil {
					continue
				}
				req.Msgs = append(req.Msgs, protocol.RaftMessage{Shard: env.Shard, Data: data})
				size += len(data)
			}
			buf = protocol.AppendRaftRequest(buf[:0], 0, &req)
			if _, err := c.Write(buf); err != nil {
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

// dial connects to the peer and says Hello.
func (p *peerLink) dial() (net.Conn, error) {
	addr := p.l.addr(p.id)
	if addr == "" {
		return nil, fmt.Errorf("no address for broker %d", p.id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), linkDialTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(linkDialTimeout))
	hello := protocol.AppendHelloRequest(nil, 0, &protocol.HelloRequest{Major: protocol.VersionMajor, Minor: protocol.VersionMinor, ClientName: "regent-link"})
	if _, err := c.Write(hello); err != nil {
		c.Close()
		return nil, err
	}
	f, err := protocol.NewReader(c, protocol.DefaultMaxFrame).Next()
	if err == nil && f.IsError() {
		var er protocol.ErrorReply
		_ = er.Decode(f.Body)
		err = er.Err()
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("hello: %w", err)
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// discardReplies reads a link connection's replies until it closes: they
// carry nothing (an error reply is logged by nobody: Raft sends again).
func discardReplies(c net.Conn, done chan struct{}) {
	defer close(done)
	r := protocol.NewReader(c, protocol.DefaultMaxFrame)
	for {
		if _, err := r.Next(); err != nil {
			c.Close()
			return
		}
	}
}

// ReceiveWire steps Raft messages that broker from sent in a Raft request
// (the TCP door's Config.Raft). A message that does not decode refuses the
// whole request.
func (n *Node) ReceiveWire(from uint64, msgs []protocol.RaftMessage) error {
	envs := make([]Envelope, len(msgs))
	for i := range msgs {
		m := &pb.Message{}
		if err := proto.Unmarshal(msgs[i].Data, m); err != nil {
			return fmt.Errorf("replica: a raft message from broker %d: %w", from, err)
		}
		if m.GetFrom() != from {
			return errors.New("replica: a raft message whose sender is not the link's broker")
		}
		envs[i] = Envelope{Shard: msgs[i].Shard, Msg: m}
	}
	n.Receive(envs)
	return nil
}
