package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/protocol"
)

// A broker of replicated shards (cluster stage 2) has one engine per shard
// it leads, each over that shard's Raft log, built when it takes the lead
// and closed when it loses it. shardPlane is its data plane
// (netserver.DataPlane), for both doors:
//
//   - a push is split by its items' shards, an ack by the shards their
//     partition ids name (engine.PartitionShard). The call is refused whole,
//     before anything is taken, when a shard it touches is not served here
//     (not_leader, naming the leader when one is known: the client goes
//     there and sends the whole call again, as it follows not_owner). The
//     parts go to their engines at once and their results come back in the
//     items' order. A part that fails whole (its engine lost the lead in
//     the meantime, or its journal refused every record) fails the call
//     with its error, as one engine's failed journal does: what other parts
//     stored stays, and a resend with transactionIds is deduplicated;
//   - a transaction's items must all be in one shard (it is one record of
//     one Raft log);
//   - a pop of a named partition is its shard's engine's. A pop of any
//     partition (or by namespace and task) asks every engine served here
//     without waiting, from a different one each time, and answers the
//     first messages found; when none has any and the pop may wait, it
//     parks at all of them and answers the first that answers with
//     messages. What another hands over after that goes back: a leased
//     pop's messages by an ack with status retry at their engine (which
//     spends no retry), an autoAck pop's (whose cursor moved) are held for
//     the next autoAck pop of any partition of their queue by their group
//     (heldMsgs);
//   - a lease extension asks the engines in turn (a lease id names no
//     shard).
type shardPlane struct {
	shards  int
	shardOf func(queue, partition string) int
	// engine is shard s's engine while this broker serves it; otherwise
	// the error that says so (not_leader, naming the leader if known).
	engine func(s int) (*engine.Engine, error)
	// served appends the engines of every shard served here to dst.
	served func(dst []*engine.Engine) []*engine.Engine
	log    *slog.Logger
	turn   atomic.Uint64 // rotates where a pop of any partition starts
	held   heldMsgs
}

var _ netserver.DataPlane = (*shardPlane)(nil)

// errNoShards answers a pop of any partition at a broker that serves no
// shard now (its shards' leaders are elsewhere, or being elected).
var errNoShards = protocol.NewError(protocol.CodeUnavailable, "this broker leads no shard now: ask Metadata for the shards' leaders")

// shardOfName is the shard of partition of queue ("" is
// engine.DefaultPartition).
func (p *shardPlane) shardOfName(queue, partition string) int {
	if partition == "" {
		partition = engine.DefaultPartition
	}
	return p.shardOf(queue, partition)
}

// shardOfID is the shard a partition id names; -1 for an id that names
// none (the engine that gets it refuses it).
func (p *shardPlane) shardOfID(id engine.UUID) int {
	if s, ok := engine.PartitionShard(id, p.shards); ok {
		return s
	}
	return -1
}

// split calls call with items and res cut by shard (shardAt gives an
// item's; -1: any shard of the call; same says two items are of one
// partition, whose shard is then asked once), every part at once, and done
// once with the first part's error when every part has answered. A shard
// not served here refuses the whole call before any part goes. A call whose
// items are all of one shard (what a client routing by leader sends) goes
// whole, without a copy.
func split[I, R any](p *shardPlane, items []I, res []R, shardAt func(*I) int, same func(a, b *I) bool,
	call func(e *engine.Engine, items []I, res []R, done func(error)), done func(error)) {
	if len(items) == 0 || len(res) < len(items) {
		done(fmt.Errorf("%w: %d items, %d results", engine.ErrInvalid, len(items), len(res)))
		return
	}
	shardOf := func(i, prev int) int {
		if i > 0 && same(&items[i-1], &items[i]) {
			return prev
		}
		return shardAt(&items[i])
	}
	first, mixed := -1, false
	for i, cur := 0, -1; i < len(items) && !mixed; i++ {
		if cur = shardOf(i, cur); cur >= 0 {
			if first < 0 {
				first = cur
			}
			mixed = cur != first
		}
	}
	first = max(first, 0) // no item names a shard: any engine refuses them
	if !mixed {
		e, err := p.engine(first)
		if err != nil {
			done(err)
			return
		}
		call(e, items, res, done)
		return
	}
	shard := make([]int, len(items))
	var parts []int // the shards, in the order of their first items
	for i, cur := 0, -1; i < len(items); i++ {
		cur = shardOf(i, cur)
		if shard[i] = cur; shard[i] < 0 {
			shard[i] = first
		}
		if !slices.Contains(parts, shard[i]) {
			parts = append(parts, shard[i])
		}
	}
	engs := make([]*engine.Engine, len(parts))
	for k, s := range parts {
		e, err := p.engine(s)
		if err != nil {
			done(err)
			return
		}
		engs[k] = e
	}
	j := &joined{left: len(parts), done: done}
	for k, s := range parts {
		var sub []I
		var idx []int
		for i := range items {
			if shard[i] == s {
				sub = append(sub, items[i])
				idx = append(idx, i)
			}
		}
		subRes := make([]R, len(sub))
		call(engs[k], sub, subRes, func(err error) {
			if err == nil {
				for n, i := range idx {
					res[i] = subRes[n]
				}
			}
			j.one(err)
		})
	}
}

// joined answers a split call once all its parts have.
type joined struct {
	mu   sync.Mutex
	left int
	err  error
	done func(error)
}

func (j *joined) one(err error) {
	j.mu.Lock()
	if err != nil && j.err == nil {
		j.err = err
	}
	j.left--
	last, err := j.left == 0, j.err
	j.mu.Unlock()
	if last {
		j.done(err)
	}
}

// PushAsync is netserver.DataPlane's.
func (p *shardPlane) PushAsync(_ context.Context, items []engine.PushItem, res []engine.PushResult, done func(error)) {
	if len(items) == 0 {
		done(nil)
		return
	}
	split(p, items, res, func(it *engine.PushItem) int { return p.shardOfName(it.Queue, it.Partition) },
		func(a, b *engine.PushItem) bool { return a.Queue == b.Queue && a.Partition == b.Partition },
		(*engine.Engine).PushAsync, done)
}

// AckAsync is netserver.DataPlane's.
func (p *shardPlane) AckAsync(_ context.Context, items []engine.AckItem, res []engine.AckResult, done func(error)) {
	if len(items) == 0 {
		done(nil)
		return
	}
	split(p, items, res, func(it *engine.AckItem) int { return p.shardOfID(it.PartitionID) },
		func(a, b *engine.AckItem) bool { return a.PartitionID == b.PartitionID },
		(*engine.Engine).AckAsync, done)
}

// TransactionAsync is netserver.DataPlane's.
func (p *shardPlane) TransactionAsync(_ context.Context, acks []engine.AckItem, pushes []engine.PushItem, done func(engine.TxnResult, error)) {
	shard := -1
	for i := range pushes {
		if s := p.shardOfName(pushes[i].Queue, pushes[i].Partition); shard < 0 {
			shard = s
		} else if s != shard {
			done(engine.TxnResult{}, fmt.Errorf("%w: a transaction's items are in shards %d and %d: in a replicated cluster it must stay in one shard", engine.ErrInvalid, shard, s))
			return
		}
	}
	for i := range acks {
		if s := p.shardOfID(acks[i].PartitionID); s < 0 {
			continue // its engine refuses it
		} else if shard < 0 {
			shard = s
		} else if s != shard {
			done(engine.TxnResult{}, fmt.Errorf("%w: a transaction's items are in shards %d and %d: in a replicated cluster it must stay in one shard", engine.ErrInvalid, shard, s))
			return
		}
	}
	e, err := p.engine(max(shard, 0))
	if err != nil {
		done(engine.TxnResult{}, err)
		return
	}
	e.TransactionAsync(acks, pushes, done)
}

// ExtendLeaseAsync is netserver.DataPlane's: each engine in turn, until one
// holds the lease.
func (p *shardPlane) ExtendLeaseAsync(_ context.Context, id engine.UUID, d time.Duration, done func(time.Time, error)) {
	engs := p.served(nil)
	var try func(k int, last error)
	try = func(k int, last error) {
		if k == len(engs) {
			if last == nil {
				last = fmt.Errorf("%w: lease %s not found", engine.ErrLeaseInvalid, id)
			}
			done(time.Time{}, last)
			return
		}
		engs[k].ExtendLeaseAsync(id, d, func(exp time.Time, err error) {
			switch {
			case err != nil && errors.Is(err, engine.ErrLeaseInvalid):
				try(k+1, err)
			case err != nil && gone(err):
				// Its shard's lead moved: the next leader holds the lease
				// (leases are journaled); the answer must say lease_invalid
				// (ask elsewhere), not this engine's not_leader.
				try(k+1, last)
			default:
				done(exp, err)
			}
		})
	}
	try(0, nil)
}

// LiveLease is netserver.DataPlane's.
func (p *shardPlane) LiveLease(partitionID engine.UUID, group string) (engine.UUID, bool) {
	s := p.shardOfID(partitionID)
	if s < 0 {
		return engine.UUID{}, false
	}
	e, err := p.engine(s)
	if err != nil {
		return engine.UUID{}, false
	}
	return e.LiveLease(partitionID, group)
}

// gone says whether err is an engine's that no longer serves its shard
// (closed, or deposed): a pop of any partition or an extension passes it
// over for the others.
func gone(err error) bool {
	return errors.Is(err, engine.ErrClosed) || protocol.CodeOf(err) == protocol.CodeNotLeader
}

// PopAsync is netserver.DataPlane's.
func (p *shardPlane) PopAsync(req engine.PopRequest, done func([]engine.Message, bool, error)) netserver.PopWaiter {
	if req.Queue != "" && req.Partition != "" {
		e, err := p.engine(p.shardOfName(req.Queue, req.Partition))
		if err != nil {
			done(nil, false, err)
			return nil
		}
		return netserver.EnginePlane{E: e}.PopAsync(req, done)
	}
	if req.AutoAck {
		if msgs := p.held.take(req); len(msgs) > 0 {
			done(msgs, false, nil)
			return nil
		}
	}
	engs := p.served(nil)
	switch len(engs) {
	case 0:
		done(nil, false, errNoShards)
		return nil
	case 1:
		return netserver.EnginePlane{E: engs[0]}.PopAsync(req, done)
	}
	turn := int(p.turn.Add(1) % uint64(len(engs)))
	engs = append(engs[turn:], engs[:turn]...)
	req.Buf = nil // the answer may come from any engine, after PopAsync returned
	a := &anyPop{p: p, req: req, done: done, engs: engs}
	a.ask(0, nil)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.answered {
		return nil
	}
	return a
}

// anyPop is a pop of any partition over several engines: first a pass
// without waiting (ask), then, for a pop that may wait, a long poll parked
// at every engine (park).
type anyPop struct {
	p    *shardPlane
	req  engine.PopRequest
	done func([]engine.Message, bool, error)
	engs []*engine.Engine

	mu        sync.Mutex
	answered  bool // done ran or runs
	cancelled bool // Cancel withdrew the pop: done never runs
	waiters   []*engine.PopWaiter
	parked    int   // long polls not answered yet
	firstErr  error // the first error an engine answered that is not gone
}

// ask pops at engs[k] without waiting, and at the next ones while they
// have nothing; then parks (or answers nothing).
func (a *anyPop) ask(k int, firstErr error) {
	if k == len(a.engs) {
		if firstErr != nil || !a.req.Wait {
			a.finish(nil, false, firstErr)
			return
		}
		a.park()
		return
	}
	a.mu.Lock()
	stop := a.cancelled
	a.mu.Unlock()
	if stop {
		return
	}
	e := a.engs[k]
	quick := a.req
	quick.Wait = false
	e.PopAsync(quick, func(msgs []engine.Message, cut bool, err error) {
		switch {
		case len(msgs) > 0:
			a.deliver(e, msgs, cut, nil)
		case err != nil && !gone(err):
			if firstErr == nil {
				firstErr = err
			}
			a.ask(k+1, firstErr)
		default:
			a.ask(k+1, firstErr)
		}
	})
}

// park long-polls every engine at once.
func (a *anyPop) park() {
	a.mu.Lock()
	if a.cancelled || a.answered {
		a.mu.Unlock()
		return
	}
	a.parked = len(a.engs)
	a.mu.Unlock()
	for _, e := range a.engs {
		a.mu.Lock()
		over := a.answered || a.cancelled
		a.mu.Unlock()
		if over {
			a.mu.Lock()
			a.parked--
			a.mu.Unlock()
			continue
		}
		w := e.PopAsync(a.req, func(msgs []engine.Message, cut bool, err error) { a.polled(e, msgs, cut, err) })
		if w == nil {
			continue
		}
		a.mu.Lock()
		over = a.answered || a.cancelled
		if !over {
			a.waiters = append(a.waiters, w)
		}
		a.mu.Unlock()
		if over && w.Cancel() {
			a.mu.Lock()
			a.parked--
			a.mu.Unlock()
		}
	}
}

// polled takes one long poll's answer.
func (a *anyPop) polled(e *engine.Engine, msgs []engine.Message, cut bool, err error) {
	a.mu.Lock()
	a.parked--
	if len(msgs) == 0 {
		if err != nil && !gone(err) && a.firstErr == nil {
			a.firstErr = err
		}
		last := a.parked == 0 && !a.answered && !a.cancelled
		if last {
			a.answered = true
		}
		firstErr := a.firstErr
		a.mu.Unlock()
		if last {
			a.done(nil, false, firstErr)
		}
		return
	}
	a.mu.Unlock()
	a.deliver(e, msgs, cut, nil)
}

// deliver answers the pop with what engine e took, unless it was answered
// or withdrawn already: then what e took goes back. The other polls are
// withdrawn; what they take before they learn it goes back too. It runs
// inside an engine's answer: it must not block.
func (a *anyPop) deliver(e *engine.Engine, msgs []engine.Message, cut bool, err error) {
	a.mu.Lock()
	if a.answered || a.cancelled {
		a.mu.Unlock()
		a.p.giveBack(e, a.req, msgs)
		return
	}
	a.answered = true
	ws := a.waiters
	a.waiters = nil
	a.mu.Unlock()
	if len(ws) > 0 {
		// Not here: this runs inside an engine's answer, under its
		// waiter's lock, which Cancel takes (the answering one's, and
		// another engine's answering at once would wait for this one's).
		go func() {
			for _, w := range ws {
				w.Cancel()
			}
		}()
	}
	a.done(msgs, cut, err)
}

// finish answers the pop with nothing or an error, unless it was withdrawn.
func (a *anyPop) finish(msgs []engine.Message, cut bool, err error) {
	a.mu.Lock()
	if a.answered || a.cancelled {
		a.mu.Unlock()
		return
	}
	a.answered = true
	a.mu.Unlock()
	a.done(msgs, cut, err)
}

// Cancel is netserver.PopWaiter's: until the pop answered, it withdraws it,
// and what its engines take after goes back.
func (a *anyPop) Cancel() bool {
	a.mu.Lock()
	if a.answered {
		a.mu.Unlock()
		return false
	}
	a.cancelled = true
	ws := a.waiters
	a.waiters = nil
	a.mu.Unlock()
	for _, w := range ws {
		w.Cancel()
	}
	return true
}

// giveBack returns what engine e handed to a pop that nobody answers with
// it: a leased pop's by an ack with status retry (no retry spent), an
// autoAck pop's to the held messages.
func (p *shardPlane) giveBack(e *engine.Engine, req engine.PopRequest, msgs []engine.Message) {
	if len(msgs) == 0 {
		return
	}
	if msgs[0].LeaseID.IsZero() {
		if !p.held.hold(req, msgs) {
			p.log.Warn("replica: an autoAck pop's late answer is dropped: its messages are delivered to nobody",
				"queue", req.Queue, "group", req.Group, "messages", len(msgs))
		}
		return
	}
	acks := retryAcks(msgs)
	res := make([]engine.AckResult, len(acks))
	e.AckAsync(acks, res, func(err error) {
		for i := range res {
			err = cmpErr(err, res[i].Err)
		}
		if err != nil {
			p.log.Warn("replica: messages a pop took for nobody were not given back: their lease expires", "queue", req.Queue, "group", req.Group, "err", err)
		}
	})
}

// retryAcks are the acks with status retry that give msgs back: one per
// lease and partition (a retry releases the whole lease).
func retryAcks(msgs []engine.Message) []engine.AckItem {
	var acks []engine.AckItem
	for i := range msgs {
		m := &msgs[i]
		if i > 0 && msgs[i-1].PartitionID == m.PartitionID && msgs[i-1].LeaseID == m.LeaseID {
			continue
		}
		acks = append(acks, engine.AckItem{PartitionID: m.PartitionID, HasOffset: true, Offset: m.Offset,
			LeaseID: m.LeaseID, Group: m.Group, Status: engine.Retry})
	}
	return acks
}

// heldMsgs are autoAck messages a pop took for nobody (its caller had
// gone, or another answered first), kept for the next autoAck pop of any
// partition of their queue by their group: up to maxHeld messages.
type heldMsgs struct {
	mu     sync.Mutex
	closed bool
	n      int
	m      map[heldKey][]engine.Message
}

// hold keeps msgs for req's queue and group; false when they cannot be
// kept (the broker stops, or maxHeld would be passed).
func (h *heldMsgs) hold(req engine.PopRequest, msgs []engine.Message) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.n+len(msgs) > maxHeld {
		return false
	}
	if h.m == nil {
		h.m = map[heldKey][]engine.Message{}
	}
	k := heldKey{req.Queue, req.Group}
	h.m[k] = append(h.m[k], msgs...)
	h.n += len(msgs)
	return true
}

// take returns up to a batch of the messages held for req.
func (h *heldMsgs) take(req engine.PopRequest) []engine.Message {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := heldKey{req.Queue, req.Group}
	msgs := h.m[k]
	if len(msgs) == 0 {
		return nil
	}
	n := min(len(msgs), max(req.Batch, 1))
	out := msgs[:n:n]
	if n == len(msgs) {
		delete(h.m, k)
	} else {
		h.m[k] = msgs[n:]
	}
	h.n -= n
	return out
}

// close drops what is held: nobody will pop it from this broker.
func (h *heldMsgs) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	h.m, h.n = nil, 0
}
