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
	// ErrLeadMoved: in a replicated cluster, the call waited at a shard's
	// leader while the map came to name another broker for the shard (a
	// leader that stopped without closing its connections: SIGSTOP, a
	// frozen machine, a network cut that resets nothing), and the call gave
	// it up. As with ErrConnLost (which it wraps), the call may or may not
	// have taken effect; a pop is sent to the new leader instead.
	ErrLeadMoved = fmt.Errorf("%w: the shard's lead moved while the call waited at its old leader", ErrConnLost)
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
	alone       bool        // WithoutCluster: no Metadata, the broker dialled only
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

// WithoutCluster makes the client talk to the broker dialled only: Dial
// does not ask for the cluster's shard map, and every call goes to that
// broker, which serves it or refuses it (not_owner, unavailable) as its
// engine decides. It is what a broker uses to reach another (the HTTP
// bridge forwards a request to its partition's owner, which must serve it
// there, not route it again). Like a cluster's client with each broker, a
// call made while no connection is up and the last attempt to make one
// failed fails at once with unavailable, rather than wait for the next
// attempt.
func WithoutCluster() Option { return func(o *options) { o.alone = true } }

// Client talks to a Regent broker over the binary protocol. It is safe for
// concurrent use; one Client per process is the intended use.
//
// Dialled to a broker of a cluster, the client follows the cluster's shard
// map (cluster.go): each push, pop and ack goes to the broker that owns its
// partition, and the rest to the broker dialled.
type Client struct {
	*pool // the broker dialled
	opt   options
	cl    *router // nil: the broker runs alone

	closeOnce sync.Once
}

// pool holds the connections to one broker.
type pool struct {
	addr string
	opt  *options
	// failFast: while no connection is up and the last attempt failed, a
	// call fails at once with unavailable instead of waiting for the next
	// attempt (a cluster's broker that is down: its partitions wait for
	// it, the client's other calls go on).
	failFast bool

	mu      sync.Mutex
	slots   []*conn // nil while a slot reconnects
	changed chan struct{}
	closed  bool
	stop    chan struct{}
	wg      sync.WaitGroup
	next    atomic.Uint64
	dialErr error // the last connection attempt's failure, nil once one succeeds
}

// Dial connects to the broker at addr ("host:port"). The first connection
// must succeed within ctx; later ones are made, and remade after failures,
// in the background. A broker of a cluster answers with its shard map, and
// the client then reaches the other brokers as it needs them.
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
	c := &Client{opt: o}
	c.pool = newPool(addr, &c.opt, first)
	if o.alone {
		return c, nil
	}
	if first.minor >= clusterMinor {
		var md protocol.MetadataReply
		err := c.pool.do(ctx, protocol.OpMetadata, func(dst []byte, id uint64) []byte { return protocol.AppendMetadataRequest(dst, id) }, &md)
		switch code := protocol.CodeOf(err); {
		case code == protocol.CodeUnauthenticated || code == protocol.CodeForbidden:
			// No token (or one too weak) for the map: every other call
			// would be refused too, and says so; the client stays as it is.
			md.Cluster = ""
		case err != nil:
			c.Close()
			return nil, fmt.Errorf("regent client: metadata from %s: %w", addr, err)
		}
		if md.Cluster != "" {
			if err := md.Check(); err != nil {
				c.Close()
				return nil, fmt.Errorf("regent client: metadata from %s: %w", addr, err)
			}
			md.Detach()
			c.cl = newRouter(c, &md)
		}
	}
	return c, nil
}

// newPool keeps o.conns connections to addr, first among them if not nil.
func newPool(addr string, o *options, first *conn) *pool {
	p := &pool{addr: addr, opt: o, slots: make([]*conn, o.conns), changed: make(chan struct{}), stop: make(chan struct{}),
		failFast: o.alone}
	p.slots[0] = first
	p.wg.Add(o.conns)
	go p.keep(0, first)
	for i := 1; i < o.conns; i++ {
		go p.keep(i, nil)
	}
	return p
}

// keep holds slot i connected: it waits for the connection to break, then
// reconnects with backoff.
func (c *pool) keep(i int, cn *conn) {
	defer c.wg.Done()
	backoff := c.opt.backoffMin
	for {
		if cn == nil {
			ctx, cancel := context.WithTimeout(context.Background(), c.opt.dialTimeout)
			var err error
			cn, err = dialConn(ctx, c.addr, c.opt)
			cancel()
			if err != nil {
				cn = nil
				c.failed(err)
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
			// A broker that closed the connection is going away, or gone:
			// a failFast pool answers unavailable until a new one is up,
			// rather than wait on a dial that may hang on a broker halfway
			// through its stop.
			c.failed(errConnClosed)
			cn = nil
		case <-c.stop:
			cn.close()
			return
		}
	}
}

// set puts cn in slot i and wakes callers waiting for a connection; it
// reports false when the client is closed.
func (c *pool) set(i int, cn *conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.slots[i] = cn
	if cn != nil {
		c.dialErr = nil
	}
	close(c.changed)
	c.changed = make(chan struct{})
	return true
}

// errConnClosed is why a pool has no connection after one closed, until the
// next attempt says more.
var errConnClosed = errors.New("the connection closed; reconnecting")

// failed records a failed connection attempt and wakes callers waiting for
// a connection (a failFast pool answers them).
func (c *pool) failed(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dialErr = err
	if c.failFast && !c.closed {
		close(c.changed)
		c.changed = make(chan struct{})
	}
}

// conn picks a working connection, round robin, waiting for one (within
// ctx) while every slot reconnects.
func (c *pool) conn(ctx context.Context) (*conn, error) {
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
		if c.failFast && c.dialErr != nil {
			err := c.dialErr
			c.mu.Unlock()
			return nil, protocol.NewError(protocol.CodeUnavailable, "broker "+c.addr+" cannot be reached: "+err.Error())
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

// close closes every connection of the pool; calls in flight fail with
// ErrConnLost.
func (c *pool) close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
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
}

// do runs one request on some connection. An "overloaded" answer (the
// broker's journal is behind, or too many requests are in flight) is sent
// again after a back-off, until ctx ends: the broker kept nothing of it.
func (c *pool) do(ctx context.Context, op protocol.Op, encode func([]byte, uint64) []byte, reply protocol.Body) error {
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
func (c *pool) doMinor(ctx context.Context, op protocol.Op, encode func(dst []byte, id uint64, minor uint16) []byte, reply protocol.Body) error {
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
// Closing again does nothing.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		if c.cl != nil {
			c.cl.close()
		}
		c.pool.close()
	})
	return nil
}
