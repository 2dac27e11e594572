package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/regentmq/regent/protocol"
)

// call is one request on a connection, waiting for its reply.
type call struct {
	id    uint64
	op    protocol.Op
	frame []byte        // the encoded request
	reply protocol.Body // where the reply is decoded
	err   error
	done  chan struct{}
}

// conn is one pipelined connection: one writer goroutine that flushes once
// per burst of requests, one reader goroutine that routes replies to their
// calls by request id, and a window that keeps at most the server's
// MaxInFlight requests unanswered.
type conn struct {
	nc       net.Conn
	maxFrame int
	minor    uint16 // the protocol minor version the server said in its Hello reply
	window   chan struct{}
	sendq    chan *call
	closed   chan struct{}

	mu      sync.Mutex
	pending map[uint64]*call
	err     error // why the connection broke; nil while it works
	nextID  atomic.Uint64
}

// dialConn connects and says Hello.
func dialConn(ctx context.Context, addr string, o *options) (*conn, error) {
	d := net.Dialer{Timeout: o.dialTimeout, KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	if o.tls != nil {
		// A TLS terminator in front of the broker (see WithTLS).
		cfg := o.tls.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("tls: %w", err)
		}
		nc = tc
	}
	// Hello, synchronously, before the pipeline starts.
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	} else {
		nc.SetDeadline(time.Now().Add(o.dialTimeout))
	}
	hello := protocol.AppendHelloRequest(nil, 0, &protocol.HelloRequest{Major: protocol.VersionMajor, Minor: protocol.VersionMinor, ClientName: o.name})
	// MaxFrame stays unsaid: the readers below read protocol.DefaultMaxFrame,
	// what a server assumes of a client that says nothing (and a 1.0
	// server refuses a Hello that says it).
	if _, err := nc.Write(hello); err != nil {
		nc.Close()
		return nil, err
	}
	rd := protocol.NewReader(nc, protocol.DefaultMaxFrame)
	f, err := rd.Next()
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("hello: %w", err)
	}
	if f.IsError() {
		var er protocol.ErrorReply
		er.Decode(f.Body)
		nc.Close()
		return nil, er.Err()
	}
	var hr protocol.HelloReply
	if err := hr.Decode(f.Body); err != nil {
		nc.Close()
		return nil, fmt.Errorf("hello: %w", err)
	}
	ar, err := helloAuth(ctx, nc, rd, o, hr.Minor)
	if err != nil {
		nc.Close()
		return nil, err
	}
	nc.SetDeadline(time.Time{})
	window := int(hr.MaxInFlight)
	if window <= 0 || window > o.maxInFlight {
		window = o.maxInFlight
	}
	c := &conn{
		nc:       nc,
		maxFrame: int(hr.MaxFrame),
		minor:    hr.Minor,
		window:   make(chan struct{}, window),
		sendq:    make(chan *call, window),
		closed:   make(chan struct{}),
		pending:  make(map[uint64]*call),
	}
	go c.writer()
	// Buffered: one read system call brings many replies, not two per reply.
	go c.reader(protocol.NewReader(bufio.NewReaderSize(nc, 64<<10), protocol.DefaultMaxFrame))
	if ar != nil && o.renew && ar.Expires != 0 {
		go c.renewLoop(o.token, ar.Expires)
	}
	return c, nil
}

// broken reports why the connection no longer works (nil while it does).
func (c *conn) broken() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// do sends a request and waits for its reply (or ctx, or the connection's
// end). encode appends the whole request frame for the given id.
func (c *conn) do(ctx context.Context, op protocol.Op, encode func(dst []byte, id uint64) []byte, reply protocol.Body) error {
	cl, err := c.start(ctx, op, encode, reply)
	if err != nil {
		return err
	}
	return cl.wait(ctx)
}

// start queues a request for the writer without waiting for its reply:
// requests started one after another on a connection reach the broker in
// that order.
func (c *conn) start(ctx context.Context, op protocol.Op, encode func(dst []byte, id uint64) []byte, reply protocol.Body) (*call, error) {
	select {
	case c.window <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closed:
		return nil, c.broken()
	}
	cl := &call{id: c.nextID.Add(1), op: op, reply: reply, done: make(chan struct{})}
	cl.frame = encode(getBuf(), cl.id)
	if c.maxFrame > 0 && len(cl.frame) > c.maxFrame {
		<-c.window
		putBuf(cl.frame)
		return nil, fmt.Errorf("%w: request of %d bytes is above the server's frame limit of %d", ErrTooLarge, len(cl.frame), c.maxFrame)
	}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		<-c.window
		putBuf(cl.frame)
		return nil, err
	}
	c.pending[cl.id] = cl
	c.mu.Unlock()
	c.sendq <- cl
	return cl, nil
}

// wait waits for the call's reply (or ctx: the reply may still come, and
// the reader drops it and frees the slot).
func (cl *call) wait(ctx context.Context) error {
	select {
	case <-cl.done:
		return cl.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *conn) writer() {
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	for {
		var cl *call
		select {
		case cl = <-c.sendq:
		case <-c.closed:
			return
		}
		for {
			_, err := bw.Write(cl.frame)
			putBuf(cl.frame)
			cl.frame = nil
			if err != nil {
				c.fail(err)
				return
			}
			select {
			case cl = <-c.sendq:
				continue
			default:
			}
			break
		}
		if err := bw.Flush(); err != nil {
			c.fail(err)
			return
		}
	}
}

func (c *conn) reader(rd *protocol.Reader) {
	for {
		f, err := rd.Next()
		if err != nil && !errors.Is(err, protocol.ErrUnknownOp) {
			c.fail(err)
			return
		}
		c.mu.Lock()
		cl := c.pending[f.ID]
		delete(c.pending, f.ID)
		c.mu.Unlock()
		if cl == nil {
			if f.ID == 0 && f.IsError() { // the server's parting words
				var er protocol.ErrorReply
				if er.Decode(f.Body) == nil {
					c.fail(er.Err())
					return
				}
			}
			continue // a reply to a call whose caller gave up
		}
		switch {
		case err != nil:
			cl.err = err
		case f.IsError():
			var er protocol.ErrorReply
			if derr := er.Decode(f.Body); derr != nil {
				cl.err = derr
			} else {
				cl.err = er.Err()
			}
		case f.Op != cl.op:
			cl.err = fmt.Errorf("%w: reply of op %s to a %s request", protocol.ErrMalformed, f.Op, cl.op)
		case cl.reply != nil:
			cl.err = cl.reply.Decode(f.Body)
		}
		close(cl.done)
		<-c.window
	}
}

// fail breaks the connection: every pending call fails with a clear error.
func (c *conn) fail(cause error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = fmt.Errorf("%w: %w", ErrConnLost, cause)
	pending := c.pending
	c.pending = map[uint64]*call{}
	c.mu.Unlock()
	close(c.closed)
	c.nc.Close()
	for _, cl := range pending {
		cl.err = c.err
		close(cl.done)
	}
}

func (c *conn) close() {
	c.fail(ErrClosed)
}

// bufs pools request buffers (as pointers: a slice in an interface would
// allocate on every Put).
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func getBuf() []byte { return (*bufs.Get().(*[]byte))[:0] }

func putBuf(b []byte) {
	if cap(b) <= 1<<20 {
		b = b[:0]
		bufs.Put(&b)
	}
}
