package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/regentmq/regent/cluster"
	"github.com/regentmq/regent/internal/pagemerge"
	"github.com/regentmq/regent/protocol"
)

// A cluster's brokers each own some of its shards (cluster.Shard of a
// queue's partition). The router keeps the last shard map a broker gave
// (Metadata) and one pool of connections per broker it has sent to:
//
//   - a push is split by owner, the parts sent at once, the results put
//     back in the items' order;
//   - a pop of a named partition goes to its owner; a pop of any partition
//     asks each broker in turn without waiting, then, if it may wait,
//     long-polls them all and takes the first answer with messages (the
//     others' later answers are released: see popAny);
//   - an ack goes, per message, to the owner of the message's partition;
//   - a broker that answers not_owner (its map is newer than ours) makes
//     the router ask for the map again and send again, a few times; a
//     broker that cannot be reached answers unavailable at once, for its
//     partitions only;
//   - everything else (queue configuration, listings, statistics) goes to
//     the broker dialled, which serves it for the whole cluster.

// clusterMinor is the protocol minor version from which a server answers
// Metadata.
const clusterMinor = 6

// A request its broker answers not_owner or not_leader is sent again
// after a fresh map: the first routeAttempts sendings at once (the map
// moved), the next after growing pauses, for up to misroutedWait in all or
// until its ctx ends. A shard between two leaders is answered so for an
// election, and so is one whose new leader is still building its engine
// (not_leader "ask again"; a leader that got the lead back by transfer
// answers so for a rebuild, p99 about 1 s in the kill -9 checker): a
// request waits that out, as a Kafka producer retries NOT_LEADER, rather
// than fail after four sendings in as many milliseconds.
const (
	routeAttempts = 4
	misroutedWait = 10 * time.Second
)

// reroute is one request's budget of sendings after misrouted answers.
type reroute struct {
	start time.Time
	n     int // sendings again so far
	pause time.Duration
}

func newReroute() reroute { return reroute{start: time.Now()} }

// more says whether a request answered misrouted may be sent again.
func (rr *reroute) more() bool {
	return rr.n+1 < routeAttempts || time.Since(rr.start) < misroutedWait
}

// wait is the pause before the next sending (none for the first
// routeAttempts): 25 ms, doubling up to 400 ms. It returns ctx's error if
// ctx ends first.
func (rr *reroute) wait(ctx context.Context) error {
	rr.n++
	if rr.n < routeAttempts {
		return ctx.Err()
	}
	rr.pause = min(max(2*rr.pause, 25*time.Millisecond), 400*time.Millisecond)
	t := time.NewTimer(rr.pause)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

type router struct {
	c *Client

	mu      sync.Mutex
	md      *protocol.MetadataReply
	pools   map[string]*pool // by TCP address
	leases  map[ID]*pool     // the broker each lease came from (Extend)
	held    map[heldKey][]Message
	closed  bool
	refresh chan struct{} // closed when the refresh in progress ends; nil when none is
	stop    chan struct{} // closed by close: ends the periodic refresh
	done    chan struct{} // closed when the periodic refresh ended
	watches map[*watch]struct{}
}

// refreshEvery is how often the router asks for the map without being
// told to: how soon it sees a broker come back, or go.
const refreshEvery = time.Second

func newRouter(c *Client, md *protocol.MetadataReply) *router {
	c.pool.failFast = true
	r := &router{c: c, md: md, pools: map[string]*pool{c.addr: c.pool}, leases: map[ID]*pool{},
		stop: make(chan struct{}), done: make(chan struct{})}
	for i := range md.Brokers {
		if b := &md.Brokers[i]; b.ID == md.Node && b.TCP != "" && b.TCP != c.addr {
			r.pools[b.TCP] = c.pool // the dialled broker under its advertised address
		}
	}
	go r.refreshLoop()
	return r
}

// refreshLoop asks for the map every refreshEvery: a broker's liveness
// changes without any request being refused for it.
func (r *router) refreshLoop() {
	defer close(r.done)
	t := time.NewTicker(refreshEvery)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		go func() {
			select {
			case <-r.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		_ = r.update(ctx) // a failure leaves the map as it was, until the next
		cancel()
		r.checkWatches()
	}
}

// stuckAfter is how long a request must have waited at a broker before the
// router gives it up because the map names another broker for its shard
// (watchFor): a leader answers in milliseconds, and one deposed meanwhile
// answers not_leader at once; a request still unanswered after that waits
// at a leader that stopped without closing its connections.
const stuckAfter = 500 * time.Millisecond

// watch is a request in flight to the broker the map named for its n keys.
type watch struct {
	p      *pool
	since  time.Time
	n      int
	key    func(i int) (queue, partition string)
	done   <-chan struct{} // closed once the request is answered (nil: end says so)
	cancel context.CancelCauseFunc
}

// watchFor returns the ctx of a request to p, the broker the map names for
// the n keys: it ends with ErrLeadMoved once the map (asked for every
// refreshEvery) names another broker for one of them and the request has
// waited stuckAfter. A replicated shard's leader that stopped (SIGSTOP, a
// frozen machine, a network cut that resets nothing) is replaced by an
// election within a second or two, and a request it holds would otherwise
// wait for it to come back, or for ctx. end ends the watch, and so does
// done's closing (the answer, when nobody may be waiting for it).
func (r *router) watchFor(ctx context.Context, p *pool, n int, key func(i int) (queue, partition string), done <-chan struct{}) (wctx context.Context, end func()) {
	wctx, cancel := context.WithCancelCause(ctx)
	w := &watch{p: p, since: time.Now(), n: n, key: key, done: done, cancel: cancel}
	r.mu.Lock()
	if r.watches == nil {
		r.watches = map[*watch]struct{}{}
	}
	r.watches[w] = struct{}{}
	r.mu.Unlock()
	return wctx, func() {
		r.mu.Lock()
		delete(r.watches, w)
		r.mu.Unlock()
		cancel(nil)
	}
}

// checkWatches gives up the requests that have waited stuckAfter at a
// broker the map no longer names for one of their keys (a map that names
// no owner yet gives up nothing: the election is not over).
func (r *router) checkWatches() {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for w := range r.watches {
		if w.done != nil {
			select {
			case <-w.done:
				w.cancel(nil)
				delete(r.watches, w)
				continue
			default:
			}
		}
		if now.Sub(w.since) < stuckAfter {
			continue
		}
		for i := range w.n {
			q, part := w.key(i)
			if q == "" {
				continue // no names (an ack of a message built by hand): the broker dialled
			}
			if b, err := owner(r.md, q, part); err == nil && r.pools[b.TCP] != w.p {
				w.cancel(ErrLeadMoved)
				delete(r.watches, w)
				break
			}
		}
	}
}

// waitWatched waits for cl's answer under ctx, and gives it up with
// ErrLeadMoved when its watch (watchFor on a ctx of its own) does.
func waitWatched(ctx context.Context, cl *call, w context.Context) error {
	select {
	case <-cl.done:
		return cl.err
	case <-ctx.Done():
		return ctx.Err()
	case <-w.Done():
		if errors.Is(context.Cause(w), ErrLeadMoved) {
			return ErrLeadMoved
		}
		return cl.wait(ctx)
	}
}

// movedOr is ErrLeadMoved when watchFor gave the call of ctx up, else err.
func movedOr(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), ErrLeadMoved) {
		return ErrLeadMoved
	}
	return err
}

func (r *router) close() {
	close(r.stop)
	<-r.done
	r.mu.Lock()
	r.closed = true
	pools := make([]*pool, 0, len(r.pools))
	for _, p := range r.pools {
		if p != r.c.pool {
			pools = append(pools, p)
		}
	}
	r.mu.Unlock()
	for _, p := range pools {
		p.close()
	}
}

// table is the current map.
func (r *router) table() *protocol.MetadataReply {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.md
}

// noOwnerWait bounds how long a request waits for a shard the map names no
// owner of (an election under way, or the broker asked not yet knowing the
// new leader) before it is answered unavailable.
const noOwnerWait = 5 * time.Second

// ownedTable is the map, asked for again with growing pauses while it
// names no owner of a shard one of the n keys fall in (or one with no
// address yet: see owned), for up to noOwnerWait or until ctx ends: a
// shard between two leaders is served again within an election, and a
// request then waits for it rather than failing at once. A map that still lacks an owner is returned as it is
// (owner answers unavailable).
func (r *router) ownedTable(ctx context.Context, n int, key func(i int) (queue, partition string)) *protocol.MetadataReply {
	md := r.table()
	if owned(md, n, key) {
		return md
	}
	deadline := time.Now().Add(noOwnerWait)
	for pause := 25 * time.Millisecond; ; pause = min(2*pause, 400*time.Millisecond) {
		_ = r.update(ctx)
		if md = r.table(); owned(md, n, key) || ctx.Err() != nil || time.Now().After(deadline) {
			return md
		}
		select {
		case <-ctx.Done():
			return md
		case <-time.After(pause):
		}
	}
}

// owned says whether md names an owner of the shard of every key that can
// be sent to: not one the map lists live but with no address yet (a
// broker whose session is up before the map that carries its record is
// written; a new map follows).
func owned(md *protocol.MetadataReply, n int, key func(i int) (queue, partition string)) bool {
	if !slices.Contains(md.Owners, -1) && !slices.ContainsFunc(md.Brokers, unaddressed) {
		return true
	}
	for i := range n {
		if q, part := key(i); q != "" {
			if part == "" {
				part = defaultPartition
			}
			o := md.Owners[cluster.Shard(md.Seed, q, part, int(md.Shards))]
			if o < 0 || unaddressed(md.Brokers[o]) {
				return false
			}
		}
	}
	return true
}

// unaddressed says whether b is live with no address yet.
func unaddressed(b protocol.MetadataBroker) bool { return b.Live && b.TCP == "" }

// unowned is how many shards md names no owner of.
func unowned(md *protocol.MetadataReply) int {
	n := 0
	for _, o := range md.Owners {
		if o < 0 {
			n++
		}
	}
	return n
}

// owner is the broker owning partition of queue under md ("" stands for the
// default partition, as the broker has it).
func owner(md *protocol.MetadataReply, queue, partition string) (*protocol.MetadataBroker, error) {
	if partition == "" {
		partition = defaultPartition
	}
	s := cluster.Shard(md.Seed, queue, partition, int(md.Shards))
	o := md.Owners[s]
	if o < 0 {
		return nil, protocol.NewError(protocol.CodeUnavailable, fmt.Sprintf("shard %d of cluster %s has no owner yet", s, md.Cluster))
	}
	return &md.Brokers[o], nil
}

// defaultPartition is the partition a push or pop that names none means.
const defaultPartition = "Default"

// poolOf is the pool of broker b: unavailable at once when the map says it
// is down.
func (r *router) poolOf(b *protocol.MetadataBroker) (*pool, error) {
	if !b.Live {
		return nil, protocol.NewError(protocol.CodeUnavailable, "broker "+b.ID+" is down: its shards wait for it")
	}
	if b.TCP == "" {
		return nil, protocol.NewError(protocol.CodeUnavailable, "broker "+b.ID+" has no address yet")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	p := r.pools[b.TCP]
	if p == nil {
		p = newPool(b.TCP, &r.c.opt, nil)
		p.failFast = true
		r.pools[b.TCP] = p
	}
	return p, nil
}

// livePools are the pools of every live broker with an address, starting
// at a different one each call (so that pops of any partition share the
// brokers).
func (r *router) livePools(md *protocol.MetadataReply) []*pool {
	var out []*pool
	for i := range md.Brokers {
		if p, err := r.poolOf(&md.Brokers[i]); err == nil {
			out = append(out, p)
		}
	}
	if n := len(out); n > 1 {
		k := int(r.c.next.Add(1) % uint64(n))
		out = append(out[k:], out[:k]...)
	}
	return out
}

// metadataTimeout bounds the map's request to one broker in update.
const metadataTimeout = time.Second

// suspect takes a request's failure that is not a broker's answer (a
// timeout, a connection lost): its broker may have stopped, and the map
// the next request routes by may name it still (a replicated shard's
// leader changes without a new map). The map is asked for again in the
// background; the call's own error stands.
func (r *router) suspect(err error) {
	if err == nil || refused(err) {
		return
	}
	r.mu.Lock()
	busy := r.refresh != nil || r.closed // a refresh under way serves this one too
	r.mu.Unlock()
	if busy {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*metadataTimeout)
		defer cancel()
		_ = r.update(ctx)
	}()
}

// update asks for the map again (one request at a time: callers that come
// while one is out wait for it) and keeps the newer of the two.
func (r *router) update(ctx context.Context) error {
	r.mu.Lock()
	if ch := r.refresh; ch != nil {
		r.mu.Unlock()
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ch := make(chan struct{})
	r.refresh = ch
	md := r.md
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.refresh = nil
		r.mu.Unlock()
		close(ch)
	}()
	// The dialled broker first, then the others that are up.
	cands := []*pool{r.c.pool}
	for _, p := range r.livePools(md) {
		if p != r.c.pool && !slices.Contains(cands, p) {
			cands = append(cands, p)
		}
	}
	var err error
	var best *protocol.MetadataReply
	for _, p := range cands {
		var fresh protocol.MetadataReply
		// Each broker gets a short while: one that hangs (stopped, not
		// dead: its connections stay open) must not keep the map from
		// the others.
		pctx, cancel := context.WithTimeout(ctx, metadataTimeout)
		err = p.do(pctx, protocol.OpMetadata, func(dst []byte, id uint64) []byte { return protocol.AppendMetadataRequest(dst, id) }, &fresh)
		cancel()
		if err == nil {
			err = fresh.Check()
		}
		if err != nil {
			continue
		}
		fresh.Detach()
		// A replicated cluster's brokers each name the leaders they
		// know: one that has just started may know none yet, while the
		// others do. While the map lacks owners, the next broker is
		// asked too, and the map knowing the most is kept.
		if best == nil || fresh.Epoch > best.Epoch || (fresh.Epoch == best.Epoch && unowned(&fresh) < unowned(best)) {
			best = &fresh
		}
		if unowned(best) == 0 {
			break
		}
	}
	if best == nil {
		return err
	}
	r.mu.Lock()
	if best.Epoch >= r.md.Epoch {
		r.md = best
	}
	r.mu.Unlock()
	return nil
}

// retryable says whether a request answered err should go again after a
// fresh map: the broker does not own the shard (the map moved), or is
// known to be down only by a map that may be old.
func (r *router) retryable(ctx context.Context, rr *reroute, err error) bool {
	if !misrouted(err) || !rr.more() || rr.wait(ctx) != nil {
		return false
	}
	return r.update(ctx) == nil
}

// misrouted says whether err sends a request to another broker: not_owner
// (the map moved), or not_leader (a replicated shard's lead moved: the
// fresh map names the leader its broker knows). A not_leader from a
// leader deposed while it held the request may come after the request was
// stored by the next leader: sent again, pushes with transactionIds are
// deduplicated.
func misrouted(err error) bool {
	c := protocol.CodeOf(err)
	return c == protocol.CodeNotOwner || c == protocol.CodeNotLeader
}

// push sends items to their owners, all parts at once, and puts the
// results back in order. A part its owner refused whole (down, not
// reachable, or another refusal) answers each of its items PushFailed with
// the reason; when every part was refused with one error, Push returns it.
func (r *router) push(ctx context.Context, items []Item) (PushResults, error) {
	out := make(PushResults, len(items))
	todo := make([]int, len(items))
	for i := range todo {
		todo[i] = i
	}
	var firstErr, ambiguous error
	failedAll := true
	// maybe marks the items of a part answered not_leader: the deposed
	// leader may have proposed them and the next commit them, so no later
	// refusal of theirs (no owner yet, or a broker's refusal of the resent
	// part) says they were not stored. Answered failed, such an item was
	// stored all the same once in a checker's 50 kill -9 cycles.
	var maybe []bool // made at the first such part
	rr := newReroute()
	for len(todo) > 0 {
		md := r.ownedTable(ctx, len(todo), func(k int) (string, string) { return items[todo[k]].Queue, items[todo[k]].Partition })
		parts := map[*pool][]int{}
		var (
			prev *Item // the last item routed: the next one of its partition goes where it went
			p    *pool
			err  error
		)
		for _, i := range todo {
			if prev == nil || items[i].Queue != prev.Queue || items[i].Partition != prev.Partition {
				prev = &items[i]
				var b *protocol.MetadataBroker
				if b, err = owner(md, items[i].Queue, items[i].Partition); err == nil {
					p, err = r.poolOf(b)
				}
			}
			if err != nil {
				if maybe != nil && maybe[i] {
					ambiguous = cmp(ambiguous, err)
					continue
				}
				out[i] = PushResult{Status: PushFailed, TransactionID: items[i].TransactionID, Err: err}
				firstErr = cmp(firstErr, err)
				continue
			}
			parts[p] = append(parts[p], i)
		}
		type answer struct {
			idx []int
			err error
		}
		// send pushes the items idx names on p. Its results go straight
		// into out, at their places: the parts' places are disjoint, and
		// out is read once every answer is in.
		send := func(p *pool, idx []int) answer {
			wctx, end := r.watchFor(ctx, p, len(idx), func(k int) (string, string) { return items[idx[k]].Queue, items[idx[k]].Partition }, nil)
			err := pushOn(wctx, p, items, idx, out)
			err = movedOr(wctx, err)
			end()
			return answer{idx, err}
		}
		answers := make(chan answer, len(parts))
		n := 0
		for p, idx := range parts {
			if n++; n == len(parts) {
				// The last part (the only one, for a batch of one
				// partition, the usual case) is sent from here: one
				// goroutine fewer.
				answers <- send(p, idx)
				break
			}
			go func() { answers <- send(p, idx) }()
		}
		todo = todo[:0]
		again := false
		var last error // a misrouted answer of a part sent again
		for range parts {
			a := <-answers
			switch {
			case a.err == nil:
				failedAll = false
			case misrouted(a.err) && rr.more():
				if maybe == nil {
					maybe = make([]bool, len(items))
				}
				for _, i := range a.idx {
					maybe[i] = true
				}
				todo, again = append(todo, a.idx...), true
				last = a.err
			case !refused(a.err) || anyOf(maybe, a.idx):
				// The part may have been stored (a connection lost after it
				// was sent): its items cannot be answered failed. The call
				// fails as a push to one broker would; sent again, pushes
				// with a transactionId are deduplicated.
				ambiguous = cmp(ambiguous, a.err)
			default:
				firstErr = cmp(firstErr, a.err)
				for _, i := range a.idx {
					out[i] = PushResult{Status: PushFailed, TransactionID: items[i].TransactionID, Err: a.err}
				}
			}
		}
		if ambiguous != nil {
			r.suspect(ambiguous)
			return nil, ambiguous
		}
		if again {
			if rr.wait(ctx) != nil {
				// The parts to send again were answered not_leader: maybe
				// stored (see refused). The call fails as a lost
				// connection's would, with the broker's answer.
				return nil, last
			}
			if err := r.update(ctx); err != nil {
				return nil, err
			}
		}
	}
	if failedAll && firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// anyOf reports whether marks holds any of the indexes idx (nil marks
// none).
func anyOf(marks []bool, idx []int) bool {
	if marks == nil {
		return false
	}
	for _, i := range idx {
		if marks[i] {
			return true
		}
	}
	return false
}

// refused says whether a request that failed with err surely changed
// nothing: a broker's answer (the engine refuses a request whole), or the
// client's own refusal before sending it (a broker down). A lost
// connection or a deadline leaves it unknown, and so does not_leader: a
// leader deposed while it held the request answers it so, and the next
// leader may commit what it had proposed (a leadership transfer makes
// that the rule: the lead moves only to a replica holding the whole log).
// Sent again, pushes with transactionIds are deduplicated.
func refused(err error) bool {
	var pe *protocol.Error
	return errors.As(err, &pe) && pe.Code != protocol.CodeNotLeader
}

func cmp(first, err error) error {
	if first == nil {
		return err
	}
	return first
}

// pushOn pushes the items idx names on one broker's pool, and puts their
// results in out at the same places.
func pushOn(ctx context.Context, p *pool, items []Item, idx []int, out PushResults) error {
	reply := pushReplies.Get().(*protocol.PushReply)
	if err := p.do(ctx, protocol.OpPush, pushFrame(items, idx), reply); err != nil {
		return err // reply not pooled: see Client.Push
	}
	if len(reply.Items) != len(idx) {
		return fmt.Errorf("client: push of %d items answered with %d results", len(idx), len(reply.Items))
	}
	for k, i := range idx {
		out[i] = pushResult(&reply.Items[k], &items[i])
	}
	clear(reply.Items)
	pushReplies.Put(reply)
	return nil
}

// pop serves Pop in a cluster.
func (r *router) pop(ctx context.Context, req PopRequest) ([]Message, error) {
	if req.Partition != "" || req.Queue == "" {
		return r.popOwner(ctx, req)
	}
	return r.popAny(ctx, req)
}

// popOwner sends a pop of a named partition to its owner (and a pop by
// namespace or task, which names no queue, to the broker dialled).
func (r *router) popOwner(ctx context.Context, req PopRequest) ([]Message, error) {
	rr := newReroute()
	for {
		p := r.c.pool
		if req.Queue != "" {
			md := r.ownedTable(ctx, 1, func(int) (string, string) { return req.Queue, req.Partition })
			b, err := owner(md, req.Queue, req.Partition)
			if err != nil {
				return nil, err
			}
			if p, err = r.poolOf(b); err != nil {
				return nil, err
			}
		}
		var msgs []Message
		var err error
		if req.Queue != "" {
			wctx, end := r.watchFor(ctx, p, 1, func(int) (string, string) { return req.Queue, req.Partition }, nil)
			msgs, err = r.popOn(wctx, p, req)
			err = movedOr(wctx, err)
			end()
		} else {
			msgs, err = r.popOn(ctx, p, req)
		}
		if errors.Is(err, ErrLeadMoved) && rr.more() && rr.wait(ctx) == nil {
			// A pop the stopped leader holds completes nothing there (a
			// deposed leader's grant is never committed): ask the new one.
			continue
		}
		if err != nil && r.retryable(ctx, &rr, err) {
			continue
		}
		return msgs, err
	}
}

// popOn pops on one broker's pool and remembers where the lease lives.
func (r *router) popOn(ctx context.Context, p *pool, req PopRequest) ([]Message, error) {
	reply := new(protocol.PopReply)
	if err := p.doMinor(ctx, protocol.OpPop, req.frame(reply), reply); err != nil {
		return nil, err
	}
	out := appendMessages(make([]Message, 0, len(reply.Messages)), reply)
	reply.Detach()
	if len(out) > 0 && !out[0].LeaseID.IsZero() {
		r.mu.Lock()
		if len(r.leases) >= maxLeaseMemo {
			clear(r.leases) // Extend then asks every broker
		}
		for i := range out {
			r.leases[out[i].LeaseID] = p
		}
		r.mu.Unlock()
	}
	return out, nil
}

// maxLeaseMemo bounds the leases whose broker the router remembers.
const maxLeaseMemo = 1 << 16

// popAny serves a pop of any partition of a queue spread over the
// brokers. It asks each live broker in turn without waiting and returns
// the first messages it gets. When none has any and the pop may wait, it
// long-polls them all at once, in rounds of at most pollSlice (a poll
// parked at a broker cannot be called back, and one that outlives its
// caller takes messages nobody asked for), and returns the first answer
// with messages. The other polls of the round go on in the background
// until they end: what they take is given back (an ack Retry, which spends
// no retry) for leased pops, and for autoAck pops, which cannot be given
// back, kept for this client's next pop of that queue and group.
func (r *router) popAny(ctx context.Context, req PopRequest) ([]Message, error) {
	if msgs := r.takeHeld(req); len(msgs) > 0 {
		return msgs, nil
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	deadline := time.Now().Add(timeout)
	for {
		md := r.table()
		pools := r.livePools(md)
		if len(pools) == 0 {
			return nil, protocol.NewError(protocol.CodeUnavailable, "no broker of cluster "+md.Cluster+" is up")
		}
		quick := req
		quick.Wait = false
		var firstErr error
		for _, p := range pools {
			msgs, err := r.popOn(ctx, p, quick)
			if err != nil {
				firstErr = cmp(firstErr, err)
				continue
			}
			if len(msgs) > 0 {
				return msgs, nil
			}
		}
		if firstErr != nil && protocol.CodeOf(firstErr) != protocol.CodeUnavailable {
			return nil, firstErr
		}
		left := time.Until(deadline)
		if !req.Wait || left <= 0 {
			return nil, nil
		}
		round := req
		round.Timeout = min(left, pollSlice)
		msgs, err := r.pollAll(ctx, pools, round)
		if err != nil || len(msgs) > 0 {
			return msgs, err
		}
	}
}

// pollSlice bounds one round of popAny's long polls.
const pollSlice = 500 * time.Millisecond

// pollAll long-polls every pool at once and returns the first answer with
// messages; the others are given back when they come.
func (r *router) pollAll(ctx context.Context, pools []*pool, req PopRequest) ([]Message, error) {
	answers := make(chan answerMsgs, len(pools))
	taken := make(chan struct{})
	var once sync.Once
	take := func() { once.Do(func() { close(taken) }) }
	bg, cancel := context.WithTimeout(context.Background(), req.Timeout+10*time.Second)
	var wg sync.WaitGroup
	for _, p := range pools {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msgs, err := r.popOn(bg, p, req)
			select {
			case <-taken:
				r.giveBack(req, msgs)
			default:
				answers <- answerMsgs{msgs, err}
			}
		}()
	}
	go func() { wg.Wait(); cancel() }()
	var firstErr error
	for range pools {
		select {
		case a := <-answers:
			if len(a.msgs) > 0 {
				take()
				r.drain(req, answers)
				return a.msgs, nil
			}
			if a.err != nil && protocol.CodeOf(a.err) != protocol.CodeUnavailable {
				firstErr = cmp(firstErr, a.err)
			}
		case <-ctx.Done():
			take()
			r.drain(req, answers)
			return nil, ctx.Err()
		}
	}
	take()
	return nil, firstErr
}

type answerMsgs struct {
	msgs []Message
	err  error
}

// drain gives back what answers already holds (answers that came before
// the one taken, or in the same instant).
func (r *router) drain(req PopRequest, answers chan answerMsgs) {
	for {
		select {
		case a := <-answers:
			r.giveBack(req, a.msgs)
		default:
			return
		}
	}
}

// giveBack returns messages a pop took that its caller will not get:
// leased ones are released at their broker, autoAck ones held for the
// next pop.
func (r *router) giveBack(req PopRequest, msgs []Message) {
	if len(msgs) == 0 {
		return
	}
	if req.AutoAck || msgs[0].LeaseID.IsZero() {
		r.mu.Lock()
		k := heldKey{req.Queue, req.Group}
		if r.held == nil {
			r.held = map[heldKey][]Message{}
		}
		r.held[k] = append(r.held[k], msgs...)
		r.mu.Unlock()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.c.Ack(ctx, msgs, Retry, AckOptions{}) // a failure leaves them to their lease's expiry
}

// heldKey names the autoAck messages held for the next pop of a queue by
// a group.
type heldKey struct{ queue, group string }

// takeHeld returns up to a batch of the messages held for req.
func (r *router) takeHeld(req PopRequest) []Message {
	if !req.AutoAck {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := heldKey{req.Queue, req.Group}
	h := r.held[k]
	if len(h) == 0 {
		return nil
	}
	n := min(len(h), max(req.Batch, 1))
	out := h[:n:n]
	if n == len(h) {
		delete(r.held, k)
	} else {
		r.held[k] = h[n:]
	}
	return out
}

// ackPart is the part of an ack that goes to one broker.
type ackPart struct {
	p     *pool
	idx   []int // the items' places in the whole ack
	cl    *call
	reply *protocol.AckReply
	err   error // refused before it was sent
	// wctx is the part's ctx while it is on its way (watchFor), end
	// ends its watch.
	wctx context.Context
	end  func()
}

// clusterAck is an ack split by owner, on its way.
type clusterAck struct {
	r *router
	n int
	// maybe marks the items of a part answered not_leader: maybe applied,
	// so no later refusal of theirs is sure (see push).
	maybe []bool
	item  func(dst []byte, i int) []byte
	key   func(i int) (queue, partition string)
	parts []ackPart
}

// startAck sends the items idx of an ack to their owners, one request per
// owner.
func (r *router) startAck(ctx context.Context, ca *clusterAck, idx []int) {
	md := r.ownedTable(ctx, len(idx), func(k int) (string, string) { return ca.key(idx[k]) })
	byPool := map[*pool]int{}
	for _, i := range idx {
		q, part := ca.key(i)
		var p *pool
		var err error
		if q == "" {
			p = r.c.pool // a message built by hand, with no names: the broker dialled
		} else if b, oerr := owner(md, q, part); oerr != nil {
			err = oerr
		} else {
			p, err = r.poolOf(b)
		}
		if err != nil {
			ca.parts = append(ca.parts, ackPart{idx: []int{i}, err: err})
			continue
		}
		k, ok := byPool[p]
		if !ok {
			k = len(ca.parts)
			byPool[p] = k
			ca.parts = append(ca.parts, ackPart{p: p})
		}
		ca.parts[k].idx = append(ca.parts[k].idx, i)
	}
	for k := range ca.parts {
		part := &ca.parts[k]
		if part.p == nil {
			continue
		}
		cn, err := part.p.conn(ctx)
		if err != nil {
			part.err = err
			continue
		}
		part.reply = new(protocol.AckReply)
		sub := part.idx
		part.cl, part.err = cn.start(ctx, protocol.OpAck, func(dst []byte, id uint64) []byte {
			dst, start := protocol.AppendAckRequestStart(dst, id, len(sub))
			for _, i := range sub {
				dst = ca.item(dst, i)
			}
			protocol.PatchLength(dst, start)
			return dst
		}, part.reply)
		if part.err == nil {
			// The watch outlives ctx (finish waits under its own: SendAck
			// and WaitAck take one each), and ends with the answer when
			// nobody waits for it.
			part.wctx, part.end = r.watchFor(context.Background(), part.p, len(sub), func(k int) (string, string) { return ca.key(sub[k]) }, part.cl.done)
		}
	}
}

// finish waits for every part, sends again the parts answered not_owner
// (after a fresh map), and appends the results in the items' order. When
// every part failed, the first failure is the error; otherwise a failed
// part's items carry it as their result.
func (ca *clusterAck) finish(ctx context.Context, out []AckResult) ([]AckResult, error) {
	defer func() { // the parts not waited for (a call that failed early)
		for k := range ca.parts {
			if end := ca.parts[k].end; end != nil {
				end()
			}
		}
	}()
	res := make([]AckResult, ca.n)
	var firstErr error
	anyOK := false
	rr := newReroute()
	for {
		var again []int
		var last error // a misrouted answer of a part sent again
		for k := range ca.parts {
			part := &ca.parts[k]
			err := part.err
			if err == nil {
				err = waitWatched(ctx, part.cl, part.wctx)
			}
			if part.end != nil {
				part.end()
			}
			if err == nil && len(part.reply.Items) != len(part.idx) {
				err = fmt.Errorf("client: ack of %d items answered with %d results", len(part.idx), len(part.reply.Items))
			}
			switch {
			case err == nil:
				anyOK = true
				rs := appendAckResults(nil, part.reply.Items)
				for j, i := range part.idx {
					res[i] = rs[j]
				}
			case misrouted(err) && rr.more():
				for _, i := range part.idx {
					ca.maybe[i] = true
				}
				again = append(again, part.idx...)
				last = err
			case !refused(err) || anyOf(ca.maybe, part.idx):
				// Maybe applied (see push): the call fails as an ack to one
				// broker would.
				ca.r.suspect(err)
				return nil, err
			default:
				firstErr = cmp(firstErr, err)
				for _, i := range part.idx {
					res[i] = AckResult{Err: err}
				}
			}
		}
		if len(again) == 0 {
			break
		}
		// Answered not_leader: maybe applied (see refused); a call that
		// cannot send them again fails.
		if rr.wait(ctx) != nil {
			return nil, last
		}
		if err := ca.r.update(ctx); err != nil {
			return nil, err
		}
		ca.parts = nil
		ca.r.startAck(ctx, ca, again)
	}
	if !anyOK && firstErr != nil {
		return nil, firstErr
	}
	return append(out, res...), nil
}

// extend finds the broker holding lease: the one that granted it, as far
// as this client remembers, else each live broker until one knows it.
func (r *router) extend(ctx context.Context, lease ID, req *protocol.LeaseExtendRequest) (protocol.LeaseExtendReply, error) {
	var reply protocol.LeaseExtendReply
	encode := func(dst []byte, id uint64) []byte { return protocol.AppendLeaseExtendRequest(dst, id, req) }
	r.mu.Lock()
	known := r.leases[lease]
	r.mu.Unlock()
	if known != nil {
		err := known.do(ctx, protocol.OpLeaseExtend, encode, &reply)
		if err == nil || !errors.Is(err, errLeaseUnknown) {
			return reply, err
		}
	}
	var firstErr error
	for _, p := range r.livePools(r.table()) {
		if p == known {
			continue
		}
		err := p.do(ctx, protocol.OpLeaseExtend, encode, &reply)
		if err == nil {
			r.mu.Lock()
			r.leases[lease] = p
			r.mu.Unlock()
			return reply, nil
		}
		if !errors.Is(err, errLeaseUnknown) {
			firstErr = cmp(firstErr, err)
		}
	}
	if firstErr == nil {
		firstErr = protocol.NewError(protocol.CodeLeaseInvalid, "no broker of the cluster holds lease "+lease.String())
	}
	return reply, firstErr
}

// errLeaseUnknown matches a broker's answer to a lease it does not hold.
var errLeaseUnknown = protocol.NewError(protocol.CodeLeaseInvalid, "")

// errAcrossShards: a transaction's items fall in several shards.
var errAcrossShards = errors.New("client: a transaction across shards")

// txnPool is the broker a transaction goes to: the owner of its items'
// shard (errAcrossShards when they fall in several: txnAcross).
func (r *router) txnPool(ctx context.Context, acks []Ack, pushes []Item) (*pool, error) {
	md := r.ownedTable(ctx, len(acks)+len(pushes), txnKey(acks, pushes))
	shard := -1
	var first *protocol.MetadataBroker
	see := func(q, part string) error {
		if part == "" {
			part = defaultPartition
		}
		s := cluster.Shard(md.Seed, q, part, int(md.Shards))
		if shard >= 0 && s != shard {
			return errAcrossShards
		}
		if shard < 0 {
			shard = s
			b, err := owner(md, q, part)
			if err != nil {
				return err
			}
			first = b
		}
		return nil
	}
	for i := range acks {
		if err := see(acks[i].Message.Queue, acks[i].Message.Partition); err != nil {
			return nil, err
		}
	}
	for i := range pushes {
		if err := see(pushes[i].Queue, pushes[i].Partition); err != nil {
			return nil, err
		}
	}
	if first == nil {
		return r.c.pool, nil
	}
	return r.poolOf(first)
}

// txnKey gives the queue and partition of a transaction's item i: its
// pushes, then its acks.
func txnKey(acks []Ack, pushes []Item) func(i int) (string, string) {
	return func(i int) (string, string) {
		if i < len(pushes) {
			return pushes[i].Queue, pushes[i].Partition
		}
		return acks[i-len(pushes)].Message.Queue, acks[i-len(pushes)].Message.Partition
	}
}

// txnAcross runs a transaction whose items fall in several shards, which no
// broker can apply as one step: its pushes first, then its acks. Each push
// without a transactionId gets one derived from the first acked message
// (its id and the push's place), so that a transaction sent again after a
// crash between the two steps pushes nothing twice: the broker's dedup
// window drops the repeat ("effectively once within the dedup window").
// When a push is refused nothing is acked and Err says why; when an ack is
// refused the pushes stay (they are answered in Pushes) and Err says why.
func (r *router) txnAcross(ctx context.Context, acks []Ack, pushes []Item) (TxnResult, error) {
	items := append([]Item(nil), pushes...)
	if len(acks) > 0 {
		for i := range items {
			if items[i].TransactionID == "" {
				items[i].TransactionID = fmt.Sprintf("%s-txn-%d", acks[0].Message.ID, i)
			}
		}
	}
	var out TxnResult
	if len(items) > 0 {
		res, err := r.push(ctx, items)
		if err != nil {
			return TxnResult{}, err
		}
		out.Pushes = res
		if err := res.FirstErr(); err != nil {
			out.Err = protocol.NewError(protocol.CodeTxnAborted, "a push was refused, nothing was acked: "+err.Error())
			return out, nil
		}
	}
	if len(acks) > 0 {
		res, err := r.c.AckEach(ctx, acks...)
		if err != nil {
			return out, err
		}
		out.Acks = res
		for _, a := range res {
			if a.Err != nil {
				out.Err = protocol.NewError(protocol.CodeTxnAborted, "an ack was refused after the pushes were stored: "+a.Err.Error())
				break
			}
		}
	}
	return out, nil
}

// dlq lists the dead letters of every broker as one list: each broker's
// entries merged by queue, time of failure and id (the order a broker
// lists its own in), a page of each broker at a time, whatever the offset
// (pagemerge), then the page f asks for. With a broker down the listing
// fails with unavailable: its entries would be missing.
func (r *router) dlq(ctx context.Context, f DLQFilter) ([]DLQEntry, int, error) {
	offset, limit := max(f.Offset, 0), f.Limit
	if limit <= 0 {
		limit = defaultDLQPage
	}
	md := r.table()
	srcs := make([]pagemerge.Source[DLQEntry], len(md.Brokers))
	for i := range md.Brokers {
		p, err := r.poolOf(&md.Brokers[i])
		if err != nil {
			return nil, 0, err
		}
		srcs[i] = func(ctx context.Context, from, n int) ([]DLQEntry, int, error) {
			g := f
			g.Offset, g.Limit = from, n
			return dlqOn(ctx, p, g)
		}
	}
	less := func(a, b *DLQEntry) bool {
		if c := strings.Compare(a.Message.Queue, b.Message.Queue); c != 0 {
			return c < 0
		}
		if c := a.FailedAt.Compare(b.FailedAt); c != 0 {
			return c < 0
		}
		return bytes.Compare(a.ID[:], b.ID[:]) < 0
	}
	return pagemerge.Merge(ctx, srcs, offset, limit, min(offset+limit, maxDLQPage), less, nil, 0)
}

// defaultDLQPage and maxDLQPage are a broker's page sizes for dead-letter
// listings (the engine's DefaultDLQPage and MaxDLQPage).
const (
	defaultDLQPage = 100
	maxDLQPage     = 10_000
)

// ClusterMap is a cluster's shard map as one of its brokers knows it
// (Client.Cluster).
type ClusterMap struct {
	Name       string // "" when the broker runs alone
	Node       string // the broker that answered
	Epoch      int64  // orders maps: the etcd revision the map was written at
	Shards     int
	Controller string // the elected controller's id ("" when none is known)
	Brokers    []ClusterBroker
	// Owners holds each shard's owner's id ("" while it has none); in a
	// replicated cluster, its leader as the answering broker knows it.
	Owners []string
	// Seed is the cluster's hash seed (ShardOf).
	Seed uint64
}

// ShardOf is the shard of partition of queue ("" is the default
// partition), as the brokers place it.
func (m ClusterMap) ShardOf(queue, partition string) int {
	if partition == "" {
		partition = defaultPartition
	}
	return cluster.Shard(m.Seed, queue, partition, m.Shards)
}

// ClusterBroker is one broker of a cluster.
type ClusterBroker struct {
	ID, TCP, HTTP string
	Live          bool // registered now: its shards are served
	Shards        int  // how many shards it owns
}

// Cluster asks the broker dialled for its cluster's shard map.
func (c *Client) Cluster(ctx context.Context) (ClusterMap, error) {
	var md protocol.MetadataReply
	if err := c.pool.do(ctx, protocol.OpMetadata, func(dst []byte, id uint64) []byte { return protocol.AppendMetadataRequest(dst, id) }, &md); err != nil {
		return ClusterMap{}, err
	}
	if err := md.Check(); err != nil {
		return ClusterMap{}, err
	}
	out := ClusterMap{Name: md.Cluster, Node: md.Node, Epoch: md.Epoch, Shards: int(md.Shards), Controller: md.Controller,
		Owners: make([]string, len(md.Owners)), Seed: md.Seed}
	for _, b := range md.Brokers {
		out.Brokers = append(out.Brokers, ClusterBroker{ID: b.ID, TCP: b.TCP, HTTP: b.HTTP, Live: b.Live})
	}
	for s, o := range md.Owners {
		if o >= 0 {
			out.Owners[s] = md.Brokers[o].ID
			out.Brokers[o].Shards++
		}
	}
	return out, nil
}
