package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/regentmq/regent/protocol"
)

var (
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("regent client: closed")
	// ErrConnLost: the connection carrying a call broke before its reply
	// came. The call may or may not have taken effect: a push may be
	// retried safely with a transactionId (the broker deduplicates it).
	ErrConnLost = errors.New("regent client: connection lost")
	// ErrTooLarge: a request above the server's frame limit.
	ErrTooLarge = errors.New("regent client: request too large")
)

// Option configures Dial.
type Option func(*options)

type options struct {
	conns       int
	dialTimeout time.Duration
	maxInFlight int
	name        string
	backoffMin  time.Duration
	backoffMax  time.Duration
	tls         *tls.Config // nil: plain TCP
	token       TokenSource // nil: no token
	renew       bool        // renew the token before it expires
}

// WithConns sets how many connections the client keeps (default 2); calls
// are spread over them.
func WithConns(n int) Option { return func(o *options) { o.conns = n } }

// WithDialTimeout bounds each connection attempt (default 5 s).
func WithDialTimeout(d time.Duration) Option { return func(o *options) { o.dialTimeout = d } }

// WithMaxInFlight caps unanswered requests per connection (default 4096,
// and never above what the server allows).
func WithMaxInFlight(n int) Option { return func(o *options) { o.maxInFlight = n } }

// WithName is the client name the server sees in the handshake.
func WithName(name string) Option { return func(o *options) { o.name = name } }

// WithTLS speaks TLS on every connection, with cfg (its ServerName
// defaults to the host of the address). The broker's binary protocol has no
// TLS of its own: this is for a broker behind a TLS terminator (a sidecar
// such as stunnel or HAProxy forwarding to the broker's TCP port), as the
// README's Security section describes.
func WithTLS(cfg *tls.Config) Option { return func(o *options) { o.tls = cfg } }

// WithReconnectBackoff sets the wait between reconnection attempts: it
// starts at min and doubles up to max (defaults 50 ms and 5 s).
func WithReconnectBackoff(min, max time.Duration) Option {
	return func(o *options) { o.backoffMin, o.backoffMax = min, max }
}

// Client talks to a Regent broker over the binary protocol. It is safe for
// concurrent use; one Client per process is the intended use.
type Client struct {
	addr string
	opt  options

	mu      sync.Mutex
	slots   []*conn // nil while a slot reconnects
	changed chan struct{}
	closed  bool
	stop    chan struct{}
	wg      sync.WaitGroup
	next    atomic.Uint64
}

// Dial connects to the broker at addr ("host:port"). The first connection
// must succeed within ctx; later ones are made, and remade after failures,
// in the background.
func Dial(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	o := options{conns: 2, dialTimeout: 5 * time.Second, maxInFlight: 4096, name: "regent-go", backoffMin: 50 * time.Millisecond, backoffMax: 5 * time.Second}
	for _, f := range opts {
		f(&o)
	}
	if o.conns <= 0 {
		o.conns = 1
	}
	if o.maxInFlight <= 0 {
		o.maxInFlight = 1
	}
	first, err := dialConn(ctx, addr, &o)
	if err != nil {
		return nil, fmt.Errorf("regent client: dial %s: %w", addr, err)
	}
	c := &Client{addr: addr, opt: o, slots: make([]*conn, o.conns), changed: make(chan struct{}), stop: make(chan struct{})}
	c.slots[0] = first
	c.wg.Add(o.conns)
	go c.keep(0, first)
	for i := 1; i < o.conns; i++ {
		go c.keep(i, nil)
	}
	return c, nil
}

// keep holds slot i connected: it waits for the connection to break, then
// reconnects with backoff.
func (c *Client) keep(i int, cn *conn) {
	defer c.wg.Done()
	backoff := c.opt.backoffMin
	for {
		if cn == nil {
			ctx, cancel := context.WithTimeout(context.Background(), c.opt.dialTimeout)
			var err error
			cn, err = dialConn(ctx, c.addr, &c.opt)
			cancel()
			if err != nil {
				cn = nil
				select {
				case <-c.stop:
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, c.opt.backoffMax)
				continue
			}
			backoff = c.opt.backoffMin
			if !c.set(i, cn) {
				cn.close()
				return
			}
		}
		select {
		case <-cn.closed:
			c.set(i, nil)
			cn = nil
		case <-c.stop:
			cn.close()
			return
		}
	}
}

// set puts cn in slot i and wakes callers waiting for a connection; it
// reports false when the client is closed.
func (c *Client) set(i int, cn *conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.slots[i] = cn
	close(c.changed)
	c.changed = make(chan struct{})
	return true
}

// conn picks a working connection, round robin, waiting for one (within
// ctx) while every slot reconnects.
func (c *Client) conn(ctx context.Context) (*conn, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		n := len(c.slots)
		start := int(c.next.Add(1) % uint64(n))
		for k := 0; k < n; k++ {
			if cn := c.slots[(start+k)%n]; cn != nil && cn.broken() == nil {
				c.mu.Unlock()
				return cn, nil
			}
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("regent client: no connection to %s: %w", c.addr, ctx.Err())
		}
	}
}

// do runs one request on some connection. An "overloaded" answer (the
// broker's journal is behind, or too many requests are in flight) is sent
// again after a back-off, until ctx ends: the broker kept nothing of it.
func (c *Client) do(ctx context.Context, op protocol.Op, encode func([]byte, uint64) []byte, reply protocol.Body) error {
	backoff := time.Millisecond
	reauthed := false
	for {
		cn, err := c.conn(ctx)
		if err != nil {
			return err
		}
		err = cn.do(ctx, op, encode, reply)
		if protocol.CodeOf(err) == protocol.CodeUnauthenticated && c.opt.renew && !reauthed {
			// The token expired on this connection before its renewal
			// (a refused request leaves no trace): a fresh one, once.
			reauthed = true
			if _, rerr := cn.reauth(ctx, c.opt.token); rerr == nil {
				continue
			}
		}
		if protocol.CodeOf(err) != protocol.CodeOverloaded {
			return err
		}
		select {
		case <-time.After(backoff + rand.N(backoff)):
		case <-ctx.Done():
			return err
		}
		backoff = min(2*backoff, maxOverloadBackoff)
	}
}

// doMinor is do for a request whose encoding depends on the protocol minor
// version of the server it goes to (fields a later minor version added are
// sent only to servers that said they have them).
func (c *Client) doMinor(ctx context.Context, op protocol.Op, encode func(dst []byte, id uint64, minor uint16) []byte, reply protocol.Body) error {
	backoff := time.Millisecond
	for {
		cn, err := c.conn(ctx)
		if err != nil {
			return err
		}
		err = cn.do(ctx, op, func(dst []byte, id uint64) []byte { return encode(dst, id, cn.minor) }, reply)
		if protocol.CodeOf(err) != protocol.CodeOverloaded {
			return err
		}
		select {
		case <-time.After(backoff + rand.N(backoff)):
		case <-ctx.Done():
			return err
		}
		backoff = min(2*backoff, maxOverloadBackoff)
	}
}

// maxOverloadBackoff caps the wait between two sendings of a request the
// broker answered "overloaded".
const maxOverloadBackoff = 100 * time.Millisecond

// Close closes every connection; calls in flight fail with ErrConnLost.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.stop)
	slots := append([]*conn(nil), c.slots...)
	c.mu.Unlock()
	for _, cn := range slots {
		if cn != nil {
			cn.close()
		}
	}
	c.wg.Wait()
	return nil
}
