package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/cluster/meta"
	"github.com/regentmq/regent/protocol"
)

// A link is this broker's connection to another broker of its cluster, in
// the binary protocol (CLUSTER.md's "link"): the HTTP bridge forwards a
// request there when that broker owns the partitions it names (forward.go).
// It is a Go client dialled WithoutCluster, so that the other broker serves
// the request itself instead of routing it again. Links are dialled when
// first needed, at the address the current map gives, dialled again when
// that address changes, and closed with the cluster part.
//
// A broker the map says is down, or that cannot be reached, answers
// unavailable at once (a dial takes at most linkDialTimeout): its
// partitions wait for it, the others go on. A failed dial is not tried
// again for linkRetry, a link whose connections broke answers unavailable
// until one is made again (the client's fail-fast pool, reconnecting in
// the background), and the link of a broker the cluster sees go is closed
// (prune), which ends the calls in flight there.

// Link timings: how long a dial may take, how long a failed dial is
// remembered before the next attempt, and the link's reconnection backoff.
const (
	linkDialTimeout = time.Second
	linkRetry       = 250 * time.Millisecond
	linkBackoffMin  = 20 * time.Millisecond
	linkBackoffMax  = time.Second
)

// links holds the links of one broker, by the other broker's node id.
type links struct {
	node  string                                // this broker's id (the links' client name)
	token func(context.Context) (string, error) // the token its clients present; nil: none

	mu     sync.Mutex
	peers  map[string]*link
	closed bool
	stop   chan struct{} // closed by close: ends the dials in progress
	wg     sync.WaitGroup
}

// link is one broker's link, or the attempt to make it.
type link struct {
	addr  string
	ready chan struct{} // closed when the dial ended; c and err are set before
	c     *client.Client
	err   error     // the dial's failure, when c is nil
	at    time.Time // when the dial ended
}

func newLinks(node string, token func(context.Context) (string, error)) *links {
	return &links{node: node, token: token, peers: map[string]*link{}, stop: make(chan struct{})}
}

// client is the link to broker id as v knows it, dialled if need be
// (within linkDialTimeout, or ctx). It answers a *protocol.Error with
// CodeUnavailable when v says the broker is down or gives it no address,
// when it cannot be reached, and once the links are closed.
func (l *links) client(ctx context.Context, v *meta.View, id string) (*client.Client, error) {
	if !v.Alive(id) {
		return nil, protocol.NewError(protocol.CodeUnavailable, "broker "+id+" is down: its partitions wait for it")
	}
	b := v.Map.Broker(id)
	if b == nil || b.TCP == "" {
		return nil, protocol.NewError(protocol.CodeUnavailable, "broker "+id+" has no address in the shard map yet")
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, errLinksClosed
	}
	k := l.peers[id]
	var stale *client.Client
	if k != nil && k.addr != b.TCP {
		// The broker moved: the old link goes (a dial in progress to the
		// old address closes what it makes when it finds itself replaced).
		if done(k.ready) {
			stale = k.c
		}
		k = nil
	}
	if k == nil || (done(k.ready) && k.c == nil && time.Since(k.at) >= linkRetry) {
		k = &link{addr: b.TCP, ready: make(chan struct{})}
		l.peers[id] = k
		l.wg.Add(1)
		go l.dial(id, k)
	}
	l.mu.Unlock()
	if stale != nil {
		stale.Close()
	}
	select {
	case <-k.ready:
	case <-ctx.Done():
		return nil, protocol.NewError(protocol.CodeUnavailable, "broker "+id+" at "+k.addr+": no link yet: "+ctx.Err().Error())
	}
	if k.c == nil {
		return nil, k.err
	}
	return k.c, nil
}

// done reports whether ch is closed.
func done(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// dial makes k's client and publishes it, unless the links closed or k
// was replaced meanwhile.
func (l *links) dial(id string, k *link) {
	defer l.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), linkDialTimeout)
	defer cancel()
	go func() {
		select {
		case <-l.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	opts := []client.Option{client.WithoutCluster(), client.WithName("regent-link/" + l.node),
		client.WithDialTimeout(linkDialTimeout), client.WithReconnectBackoff(linkBackoffMin, linkBackoffMax)}
	if l.token != nil {
		opts = append(opts, client.WithTokenSource(l.token))
	}
	c, err := client.Dial(ctx, k.addr, opts...)
	l.mu.Lock()
	keep := !l.closed && l.peers[id] == k
	if err != nil {
		k.err = protocol.NewError(protocol.CodeUnavailable, "broker "+id+" at "+k.addr+" cannot be reached: "+err.Error())
	} else if keep {
		k.c = c
	} else if l.closed {
		k.err = errLinksClosed
	} else {
		k.err = protocol.NewError(protocol.CodeUnavailable, "broker "+id+" went down or moved while its link was being made")
	}
	k.at = time.Now()
	close(k.ready)
	l.mu.Unlock()
	if err == nil && !keep {
		c.Close()
	}
}

// prune closes the links of brokers v says are down or have moved, so
// that calls in flight to a broker that stopped answering without closing
// its connections (a machine that froze) end once the cluster sees it
// gone, not when they time out.
func (l *links) prune(v *meta.View) {
	var stale []*client.Client
	l.mu.Lock()
	for id, k := range l.peers {
		if b := v.Map.Broker(id); v.Alive(id) && b != nil && b.TCP == k.addr {
			continue
		}
		if done(k.ready) && k.c != nil {
			stale = append(stale, k.c)
		}
		delete(l.peers, id) // a dial in progress closes what it makes
	}
	l.mu.Unlock()
	for _, c := range stale {
		c.Close()
	}
}

// errLinksClosed answers what is forwarded while the broker stops.
var errLinksClosed = protocol.NewError(protocol.CodeUnavailable, "this broker is stopping: it forwards nothing more")

// close ends the dials in progress and closes every link: calls in flight
// over them fail at once.
func (l *links) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	close(l.stop)
	l.mu.Unlock()
	l.wg.Wait()
	var cs []*client.Client
	l.mu.Lock()
	for _, k := range l.peers {
		if k.c != nil {
			cs = append(cs, k.c)
		}
	}
	l.peers = nil
	l.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
}

// linkErr is the error of a call over the link to broker id as the
// bridge's caller sees it. The broker's own answer stays as it is, but
// not_owner (its map is newer than this broker's: a shard is moving),
// which the caller can only retry, like everything that is not an answer:
// unavailable, naming the broker. A call that failed without an answer
// after it may have been sent (the connection lost, the call's context
// ended) may have taken effect there: its error is a *lostError.
func linkErr(id string, err error) error {
	if err == nil {
		return nil
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		// The broker's answer, or the client's refusal before sending (a
		// link that cannot reach its broker): nothing was done.
		switch pe.Code {
		case protocol.CodeNotLeader:
			return failover(err)
		case protocol.CodeNotOwner:
		default:
			return err
		}
		return protocol.NewError(protocol.CodeUnavailable, "broker "+id+" does not own the shard any more (the map is moving): "+pe.Msg)
	}
	return &lostError{protocol.NewError(protocol.CodeUnavailable, "forwarding to broker "+id+": "+err.Error()+
		" (the request may or may not have taken effect there; sent again, pushes with a transactionId are deduplicated)")}
}

// failover is the bridge's answer for a replicated shard's not_leader
// (its lead moved while the request was on its way, or was held: the next
// leader may commit what the deposed one had taken). Queen's clients know
// no not_leader, and the bridge does not know whether it took effect: it
// is a *lostError, unavailable.
func failover(err error) error {
	if err == nil || lost(err) || protocol.CodeOf(err) != protocol.CodeNotLeader {
		return err
	}
	return &lostError{protocol.NewError(protocol.CodeUnavailable, "the shard's lead is moving: "+err.Error()+
		" (the request may or may not have taken effect; sent again, pushes with a transactionId are deduplicated)")}
}

// lostError is the error of a forwarded call that may have taken effect
// (linkErr): the items of such a part cannot be answered failed, so the
// whole request fails with it, as a request to one broker would. It
// unwraps to a *protocol.Error with CodeUnavailable.
type lostError struct{ err *protocol.Error }

func (e *lostError) Error() string { return e.err.Error() }
func (e *lostError) Unwrap() error { return e.err }

// lost reports whether err is a lostError.
func lost(err error) bool {
	var le *lostError
	return errors.As(err, &le)
}

// linkToken is where a cluster's broker gets the token it presents to the
// others' doors when authentication is on (nil when it is off, or alone):
// ClusterOptions.LinkToken, or one it mints from Auth's HS256 secret
// (netserver.AuthConfig.BrokerToken) for each connection.
func linkToken(o Options) (func(context.Context) (string, error), error) {
	if o.Cluster == nil || !o.Auth.Enabled {
		return nil, nil
	}
	if tok := o.Cluster.LinkToken; tok != "" {
		return func(context.Context) (string, error) { return tok, nil }, nil
	}
	src, err := o.Auth.BrokerToken("regent-broker/" + o.Cluster.Node)
	if err != nil {
		return nil, fmt.Errorf("broker: %w (ClusterOptions.LinkToken)", err)
	}
	return src, nil
}
