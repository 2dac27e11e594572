package broker

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/cluster"
	"github.com/regentmq/regent/cluster/meta"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/protocol"
)

// The HTTP bridge of a cluster's broker serves Queen's data plane for the
// whole cluster (CLUSTER.md, Routing): Queen's clients talk to one URL, so
// whatever broker a request reaches, the forwarder below (its
// netserver.DataPlane) serves what this broker's engine owns and forwards
// the rest to the owners over the links (link.go), in the binary protocol:
//
//   - a push is split by the owner of each item's partition; the parts go
//     out at once and the results come back in the items' order. A part
//     refused whole (its owner down, unreachable, or refusing) answers its
//     items failed with the reason; when every part is refused, so is the
//     push. A part lost in flight (the link broke after sending it) may
//     have been stored: the push fails, unavailable, as a push to one
//     broker would, and a resend with transactionIds is deduplicated. Acks
//     are split and answered the same way;
//   - a pop of a named partition is served by its owner;
//   - a pop of any partition of a queue asks this broker, then each other
//     live broker owning shards, without waiting, and answers the first
//     messages found (an autoAck pop of several partitions, Queen's
//     partitions=N, goes on asking for what its batch and partition count
//     leave, and answers what it gathered; a leased one keeps the one lease
//     of the first answer: gather). When none has any and the pop may wait, it
//     long-polls all of them at once and answers the first messages that
//     come; what the others hand over after that is given back (below);
//   - an ack is split by the shard its partition id names
//     (engine.PartitionShard), so an ack carrying only that id (Queen's)
//     reaches the owner without a look-up;
//   - a lease extension is tried here, then at every other live broker at
//     once (a lease id does not name its broker);
//   - a transaction goes whole to the broker owning all its items' shards
//     (atomic there, as one journal record); one whose items belong to
//     several brokers (or, replicated, to several shards) is applied as its
//     pushes, then its acks, as the Go client does (txnAcross).
//
// A pop by namespace and task (no queue named) is served by this broker's
// queues only, for now: it would need the fan-out of a pop of any
// partition over every queue carrying the labels.
//
// Messages a forwarded pop took that its caller will not get (the HTTP
// client went away, or another broker answered first) go back: a leased
// pop's by an ack with status retry at their broker, which spends no
// retry; an autoAck pop's cannot go back (their cursor moved), so they are
// held for this broker's next autoAck pop of any partition of that queue
// by that group (up to maxHeld messages; past it, or if no such pop comes
// before the broker stops, they are delivered to nobody, which autoAck's
// at-most-once allows). Rounds of at most pollSlice for an autoAck pop's
// long polls at other brokers keep such late answers rare.
//
// What the binary protocol does not carry is lost on the way: a forwarded
// push's producerSub (the HTTP caller's token subject), a forwarded pop's
// producerSub, and an ack result's queue and partition names (Queen's
// queueName and partitionName are then null). A forwarded pop's lease does
// not keep its messages' names (engine.PopRequest.AcksByName), so Queen's
// acks by transactionId read them back at their broker. With
// authentication on, the links present the broker's own token (linkToken).
//
// In a replicated cluster (stage 2) the owner of a shard is its leader as
// this broker knows it (replicaPart.leaderOf), this broker's part goes to
// the engines of the shards it leads (shardPlane), and a not_leader from
// either (the lead moved meanwhile: the next leader may commit what the
// deposed one took) is answered as a part lost on the way (failover):
// unavailable, and the request fails whole; Queen's clients retry, and a
// resend with transactionIds is deduplicated. A part whose shard has no
// leader that serves it yet (an election, or a new leader building its
// engine) waits for one, up to electionWait, before it is refused.

// Forwarding timings.
const (
	// pollSlice bounds one round of an autoAck pop's long polls at other
	// brokers (a poll parked there cannot be called back, and its late
	// answer cannot be given back).
	pollSlice = 500 * time.Millisecond
	// pollMargin is how long past its own timeout a forwarded pop is
	// waited for before the call is given up.
	pollMargin = 10 * time.Second
	// callTimeout bounds a forwarded push, ack, transaction or lease
	// extension (a broker that stopped answering without closing its
	// connection, until the cluster sees it down).
	callTimeout = 30 * time.Second
	// defaultPopTimeout is a long poll's timeout when its request says
	// none (the engine's and Queen's default).
	defaultPopTimeout = 30 * time.Second
	// maxHeld bounds the autoAck messages held for a next pop.
	maxHeld = 10_000
)

// forwarder is a cluster's broker's netserver.DataPlane (doors.go gives it
// to the HTTP door).
type forwarder struct {
	// local serves what this broker owns: its engine (stage 1), or the
	// engines of the shards it leads (stage 2: shardPlane, through
	// failoverPlane).
	local netserver.DataPlane
	// popBytes bounds what a pop gathered from several brokers or engines
	// answers (gather), as one engine's MaxPopBytes bounds its own.
	popBytes int
	c        *clusterPart
	links    *links
	log      *slog.Logger
	turn     atomic.Uint64 // rotates the order in which other brokers are asked

	mu     sync.Mutex
	closed bool
	stop   chan struct{} // closed by close
	wg     sync.WaitGroup
	held   heldMsgs
}

// heldKey names the autoAck messages held for a next pop of a queue by a
// group.
type heldKey struct{ queue, group string }

func newForwarder(local netserver.DataPlane, c *clusterPart) *forwarder {
	return &forwarder{local: local, c: c, links: c.links, log: c.log, stop: make(chan struct{})}
}

// spawn runs fn on a goroutine that close waits for; it reports false,
// and runs nothing, once the forwarder is closed.
func (f *forwarder) spawn(fn func()) bool {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return false
	}
	f.wg.Add(1)
	f.mu.Unlock()
	go func() {
		defer f.wg.Done()
		fn()
	}()
	return true
}

// close ends the pops in progress and waits for every goroutine the
// forwarder started. The links are closed first, so that calls over them
// end at once.
func (f *forwarder) close() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	close(f.stop)
	f.mu.Unlock()
	f.held.close()
	f.wg.Wait()
}

// ownerOf says who serves shard s under v: this broker (local), or the
// broker id; unavailable while the shard has no owner.
func (f *forwarder) ownerOf(v *meta.View, s int) (id string, local bool, err error) {
	if f.c.rp != nil && s >= 0 && s < len(v.Map.Owners) {
		return f.c.rp.leaderOf(s)
	}
	if s < 0 || s >= len(v.Map.Owners) {
		return "", false, protocol.NewError(protocol.CodeInternal, "shard "+strconv.Itoa(s)+" is outside the map")
	}
	switch o := v.Map.Owners[s]; o {
	case f.c.o.Node:
		return o, true, nil
	case "":
		return "", false, protocol.NewError(protocol.CodeUnavailable, fmt.Sprintf("shard %d has no owner yet (map epoch %d)", s, v.Map.Epoch))
	default:
		return o, false, nil
	}
}

// shardOf is the shard of partition of queue ("" stands for the default
// partition).
func shardOf(m *cluster.Map, queue, partition string) int {
	if partition == "" {
		partition = engine.DefaultPartition
	}
	return cluster.Shard(m.Seed, queue, partition, m.Shards)
}

// peers are the other live brokers that own shards, starting at a
// different one each call (pops of any partition share them out).
func (f *forwarder) peers(v *meta.View) []string {
	var out []string
	for _, b := range v.Map.Brokers {
		// A replicated shard may be led by any broker of its set.
		if b.ID != f.c.o.Node && v.Alive(b.ID) && (f.c.rp != nil || slices.Contains(v.Map.Owners, b.ID)) {
			out = append(out, b.ID)
		}
	}
	if n := len(out); n > 1 {
		k := int(f.turn.Add(1) % uint64(n))
		out = append(out[k:], out[:k]...)
	}
	return out
}

// part is the part of a request served by one broker.
type part struct {
	id    string // the broker's
	local bool   // this broker
	idx   []int  // the items' places in the request, ascending
	err   error  // why the part was refused whole
	shard int    // the shard of its items, when err is an election's (electing)
	// shards are its items' shards (a replicated cluster's leader may
	// lead several): watchLead follows their leads.
	shards []int
}

// placer groups a request's items by the broker serving them.
type placer struct {
	f    *forwarder
	v    *meta.View
	by   map[string]*part
	list []*part // in the order of their first items
}

// place puts item i, of shard s, in its owner's part. Items of a shard
// without an owner get a part of their own, refused.
func (p *placer) place(i, s int) {
	id, local, err := p.f.ownerOf(p.v, s)
	key := id
	if err != nil {
		key = "\x00" + err.Error()
	}
	p.add(i, key, part{id: id, local: local, err: err, shard: s})
	if pt := p.by[key]; !slices.Contains(pt.shards, s) {
		pt.shards = append(pt.shards, s)
	}
}

// add puts item i in the part of key, made as pt when it is the first.
func (p *placer) add(i int, key string, pt part) {
	have := p.by[key]
	if have == nil {
		have = &pt
		if p.by == nil {
			p.by = map[string]*part{}
		}
		p.by[key] = have
		p.list = append(p.list, have)
	}
	have.idx = append(have.idx, i)
}

// placeHere puts item i in this broker's part (an ack whose partition id
// names no shard: the engine refuses it).
func (p *placer) placeHere(i int) {
	id := p.f.c.o.Node
	p.add(i, id, part{id: id, local: true})
}

// run runs every part at once: a refused part is failed at once, this
// broker's is given to local (which calls end once it finished, after
// failing the part if the engine refused it whole), each other one runs
// remote on a goroutine of its own. done runs when every part ended (see
// outcome).
func (f *forwarder) run(list []*part, local func(pt *part, end func()), remote func(pt *part), fail func(pt *part), done func(error)) {
	var left atomic.Int32
	left.Store(int32(len(list)))
	end := func() {
		if left.Add(-1) == 0 {
			done(outcome(list))
		}
	}
	for _, pt := range list {
		switch {
		case electing(pt.err) && f.spawn(func() { f.afterElection(pt, local, remote, fail, end) }):
		case pt.err != nil:
			fail(pt)
			end()
		case pt.local:
			local(pt, end)
		default:
			if !f.spawn(func() { remote(pt); end() }) {
				pt.err = errLinksClosed
				fail(pt)
				end()
			}
		}
	}
}

// electionWait bounds how long a part of a replicated shard that has no
// leader yet waits for one (an election, or a new leader building its
// engine) before it is refused; the Go client waits as long (noOwnerWait).
const electionWait = 5 * time.Second

// awaitLeader waits, with growing pauses, until shard s has a leader that
// serves it, for up to electionWait; it reports whether one came (false
// too once the forwarder closes).
func (f *forwarder) awaitLeader(s int) bool {
	deadline := time.Now().Add(electionWait)
	for pause := 25 * time.Millisecond; ; pause = min(2*pause, 400*time.Millisecond) {
		select {
		case <-f.stop:
			return false
		case <-time.After(min(pause, time.Until(deadline))):
		}
		_, _, err := f.ownerOf(f.c.view.Load(), s)
		if err == nil {
			return true
		}
		if !electing(err) || !time.Now().Before(deadline) {
			return false
		}
	}
}

// afterElection runs a part whose shard was being elected (see run) once
// the shard has a leader, or refuses it after electionWait.
func (f *forwarder) afterElection(pt *part, local func(pt *part, end func()), remote func(pt *part), fail func(pt *part), end func()) {
	if f.awaitLeader(pt.shard) {
		// The lead may move again meanwhile: ownerOf says where it is now.
		id, here, err := f.ownerOf(f.c.view.Load(), pt.shard)
		if err == nil {
			pt.id, pt.local, pt.err = id, here, nil
			if here {
				local(pt, end)
			} else {
				remote(pt)
				end()
			}
			return
		}
		pt.err = err
	}
	fail(pt)
	end()
}

// leadWatchEvery is how often watchLead looks at a remote part's leads.
const leadWatchEvery = 100 * time.Millisecond

// watchLead follows, while a remote part of a replicated cluster's request
// waits at its leader, the leads of the part's shards as this broker knows
// them: once one has moved to another broker, the call is given up (its
// context cancelled with a lostError: the deposed leader may have
// proposed it, and the next may commit it). A leader that stopped without
// closing its connections (SIGSTOP, a hung host) would otherwise hold the
// request until callTimeout, or until it resumes. stop ends the watch.
func (f *forwarder) watchLead(ctx context.Context, pt *part) (context.Context, func()) {
	rp := f.c.rp
	if rp == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	mu.Lock() // t is set before the function reads it
	defer mu.Unlock()
	t = time.AfterFunc(leadWatchEvery, func() {
		for _, s := range pt.shards {
			if id, _, err := rp.leaderOf(s); err == nil && id != pt.id {
				cancel(&lostError{protocol.NewError(protocol.CodeUnavailable, fmt.Sprintf(
					"shard %d's lead moved from %s to %s while the request waited there (it may or may not have taken effect; sent again, pushes with a transactionId are deduplicated)",
					s, pt.id, id))})
				return
			}
		}
		mu.Lock()
		if !stopped {
			t.Reset(leadWatchEvery)
		}
		mu.Unlock()
	})
	return ctx, func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
		cancel(nil)
	}
}

// movedOr is err, or why watchLead gave the call up.
func movedOr(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); lost(cause) {
		return cause
	}
	return err
}

// runLocal gives this broker's part of a push or an ack to the engine
// (async: PushAsync or AckAsync) and puts its results in their places;
// when the engine refuses the part whole, fail answers its items. end
// runs after either.
func runLocal[I, R any](pt *part, items []I, res []R, async func([]I, []R, func(error)), fail func(*part), end func()) {
	sub, subRes := make([]I, len(pt.idx)), make([]R, len(pt.idx))
	for k, i := range pt.idx {
		sub[k] = items[i]
	}
	async(sub, subRes, func(err error) {
		if err != nil {
			pt.err = err
			fail(pt)
		} else {
			for k, i := range pt.idx {
				res[i] = subRes[k]
			}
		}
		end()
	})
}

// outcome is the error of a request whose parts ended: that of the first
// part lost in flight (its items may have taken effect, so they cannot be
// answered failed: the request fails as a request to one broker would,
// and a resend is deduplicated by transactionIds), else, when every part
// was refused, the first refusal; nil otherwise (the refused parts' items
// carry their refusal). Parts are listed in the order of their first
// items.
func outcome(list []*part) error {
	refused := 0
	for _, pt := range list {
		if lost(pt.err) {
			return pt.err
		}
		if pt.err != nil {
			refused++
		}
	}
	if refused == len(list) && refused > 0 {
		return list[0].err
	}
	return nil
}

// PushAsync is netserver.DataPlane's: items go to their partitions'
// owners, all parts at once.
func (f *forwarder) PushAsync(ctx context.Context, items []engine.PushItem, res []engine.PushResult, done func(error)) {
	v := f.c.view.Load()
	if len(res) < len(items) || v.Map.Shards <= 0 || f.pushesHere(v, items) {
		f.local.PushAsync(ctx, items, res, done) // the engine refuses a short res
		return
	}
	p := placer{f: f, v: v}
	s := 0
	for i := range items {
		if i == 0 || items[i].Queue != items[i-1].Queue || items[i].Partition != items[i-1].Partition {
			s = shardOf(&v.Map, items[i].Queue, items[i].Partition)
		}
		p.place(i, s)
	}
	fail := func(pt *part) {
		for _, i := range pt.idx {
			res[i] = engine.PushResult{Status: engine.Failed, TransactionID: items[i].TransactionID, Err: pt.err}
		}
	}
	push := func(items []engine.PushItem, res []engine.PushResult, done func(error)) {
		f.local.PushAsync(ctx, items, res, done)
	}
	local := func(pt *part, end func()) { runLocal(pt, items, res, push, fail, end) }
	remote := func(pt *part) {
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		ctx, stop := f.watchLead(ctx, pt)
		defer stop()
		out, err := f.pushRemote(ctx, v, pt, items)
		if err != nil {
			err = movedOr(ctx, err)
			pt.err = err
			fail(pt)
			return
		}
		for k, i := range pt.idx {
			r := &out[k]
			res[i] = engine.PushResult{Status: engine.PushStatus(r.Status), MessageID: engine.UUID(r.MessageID), TransactionID: r.TransactionID,
				PartitionID: engine.UUID(r.PartitionID), Offset: r.Offset, Err: r.Err}
		}
	}
	f.run(p.list, local, remote, fail, done)
}

// pushesHere reports whether every item's partition is this broker's (the
// engine then takes the push as it is).
func (f *forwarder) pushesHere(v *meta.View, items []engine.PushItem) bool {
	for i := range items {
		if i > 0 && items[i].Queue == items[i-1].Queue && items[i].Partition == items[i-1].Partition {
			continue
		}
		if _, local, err := f.ownerOf(v, shardOf(&v.Map, items[i].Queue, items[i].Partition)); err != nil || !local {
			return false
		}
	}
	return true
}

// pushRemote pushes the items of pt at its broker.
func (f *forwarder) pushRemote(ctx context.Context, v *meta.View, pt *part, items []engine.PushItem) (client.PushResults, error) {
	cl, err := f.links.client(ctx, v, pt.id)
	if err != nil {
		return nil, err
	}
	sub := make([]client.Item, len(pt.idx))
	for k, i := range pt.idx {
		it := &items[i]
		sub[k] = client.Item{Queue: it.Queue, Partition: it.Partition, TransactionID: it.TransactionID, TraceID: it.TraceID, Payload: it.Payload}
	}
	out, err := cl.Push(ctx, sub...)
	if err != nil {
		return nil, linkErr(pt.id, err)
	}
	if len(out) != len(sub) {
		return nil, protocol.NewError(protocol.CodeInternal, fmt.Sprintf("broker %s answered a push of %d items with %d results", pt.id, len(sub), len(out)))
	}
	return out, nil
}

// AckAsync is netserver.DataPlane's: each item goes to the owner of the
// shard its partition id names (an id that names none stays here, and the
// engine refuses it).
func (f *forwarder) AckAsync(ctx context.Context, items []engine.AckItem, res []engine.AckResult, done func(error)) {
	v := f.c.view.Load()
	g := v.Map.Shards
	if len(res) < len(items) || g <= 0 || f.acksHere(v, items) {
		f.local.AckAsync(ctx, items, res, done)
		return
	}
	p := placer{f: f, v: v}
	for i := range items {
		if s, ok := engine.PartitionShard(items[i].PartitionID, g); ok {
			p.place(i, s)
		} else {
			p.placeHere(i)
		}
	}
	fail := func(pt *part) {
		for _, i := range pt.idx {
			res[i] = engine.AckResult{Err: pt.err}
		}
	}
	ack := func(items []engine.AckItem, res []engine.AckResult, done func(error)) {
		f.local.AckAsync(ctx, items, res, done)
	}
	local := func(pt *part, end func()) { runLocal(pt, items, res, ack, fail, end) }
	remote := func(pt *part) {
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		ctx, stop := f.watchLead(ctx, pt)
		defer stop()
		out, err := f.ackRemote(ctx, v, pt, items)
		if err != nil {
			err = movedOr(ctx, err)
			pt.err = err
			fail(pt)
			return
		}
		for k, i := range pt.idx {
			r := &out[k]
			res[i] = engine.AckResult{Err: r.Err, Offset: r.Offset, LeaseReleased: r.LeaseReleased, DeadLettered: r.DeadLettered}
		}
	}
	f.run(p.list, local, remote, fail, done)
}

// acksHere reports whether every item's partition is this broker's, or
// names no shard (the engine refuses those).
func (f *forwarder) acksHere(v *meta.View, items []engine.AckItem) bool {
	for i := range items {
		if i > 0 && items[i].PartitionID == items[i-1].PartitionID {
			continue
		}
		s, ok := engine.PartitionShard(items[i].PartitionID, v.Map.Shards)
		if !ok {
			continue
		}
		if _, local, err := f.ownerOf(v, s); err != nil || !local {
			return false
		}
	}
	return true
}

// ackRemote acks the items of pt at its broker.
func (f *forwarder) ackRemote(ctx context.Context, v *meta.View, pt *part, items []engine.AckItem) ([]client.AckResult, error) {
	cl, err := f.links.client(ctx, v, pt.id)
	if err != nil {
		return nil, err
	}
	acks := make([]client.Ack, len(pt.idx))
	for k, i := range pt.idx {
		acks[k] = clientAck(&items[i])
	}
	out, err := cl.AckEach(ctx, acks...)
	if err != nil {
		return nil, linkErr(pt.id, err)
	}
	return out, nil
}

// clientAck is an engine ack item as the Go client sends it: by offset,
// by transactionId, or by message id, as the item names its message.
func clientAck(it *engine.AckItem) client.Ack {
	a := client.Ack{
		Message: client.Message{PartitionID: client.ID(it.PartitionID), Offset: it.Offset, ID: client.ID(it.MessageID),
			TransactionID: it.TransactionID, LeaseID: client.ID(it.LeaseID), Group: it.Group},
		Status: client.AckStatus(it.Status), Error: it.Error,
	}
	switch {
	case it.HasOffset:
	case it.TransactionID != "":
		a.ByTransactionID = true
	default:
		a.ByMessageID = true
	}
	return a
}

// ExtendLeaseAsync is netserver.DataPlane's: a lease this broker does not
// hold is asked of every other live broker at once; the first that holds
// it answers.
func (f *forwarder) ExtendLeaseAsync(ctx context.Context, id engine.UUID, d time.Duration, done func(time.Time, error)) {
	f.local.ExtendLeaseAsync(ctx, id, d, func(exp time.Time, err error) {
		if err == nil || !errors.Is(err, engine.ErrLeaseInvalid) || !f.spawn(func() { done(f.extendElsewhere(ctx, id, d, err)) }) {
			done(exp, err)
		}
	})
}

// extendElsewhere asks the other live brokers to extend lease id, which
// this one answered err.
func (f *forwarder) extendElsewhere(ctx context.Context, id engine.UUID, d time.Duration, err error) (time.Time, error) {
	v := f.c.view.Load()
	peers := f.peers(v)
	if len(peers) == 0 {
		return time.Time{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	type answer struct {
		exp time.Time
		err error
	}
	answers := make(chan answer, len(peers))
	asked := 0
	for _, p := range peers {
		if f.spawn(func() {
			cl, err := f.links.client(ctx, v, p)
			var exp time.Time
			if err == nil {
				exp, err = cl.Extend(ctx, client.ID(id), d)
				err = linkErr(p, err)
			}
			answers <- answer{exp, err}
		}) {
			asked++
		}
	}
	var firstErr error
	for range asked {
		a := <-answers
		if a.err == nil {
			return a.exp, nil
		}
		if protocol.CodeOf(a.err) != protocol.CodeLeaseInvalid && firstErr == nil {
			firstErr = a.err
		}
	}
	if firstErr != nil {
		return time.Time{}, firstErr
	}
	return time.Time{}, fmt.Errorf("%w: lease %s is held by no broker of the cluster", engine.ErrLeaseInvalid, id)
}

// LiveLease is netserver.DataPlane's: this broker's partitions' leases
// only (the binary protocol has no question for another's; a Queen
// transaction's ack without a leaseId at another broker is then checked
// against its only listed lease, if it lists one).
func (f *forwarder) LiveLease(partitionID engine.UUID, group string) (engine.UUID, bool) {
	return f.local.LiveLease(partitionID, group)
}

// TransactionAsync is netserver.DataPlane's: a transaction whose items'
// shards all belong to one broker is applied there, whole, as one step.
// One whose items belong to several brokers (or, replicated, to several
// shards) cannot be one step: it is applied as its pushes, then its acks
// (txnAcross), as the Go client does. One that touches a replicated shard
// being elected waits for its leader (up to electionWait), once, and is
// placed again.
func (f *forwarder) TransactionAsync(ctx context.Context, acks []engine.AckItem, pushes []engine.PushItem, done func(engine.TxnResult, error)) {
	f.transactionAsync(ctx, acks, pushes, done, false)
}

// transactionAsync is TransactionAsync; waited says that it waited for an
// election once already (it does not wait twice).
func (f *forwarder) transactionAsync(ctx context.Context, acks []engine.AckItem, pushes []engine.PushItem, done func(engine.TxnResult, error), waited bool) {
	v := f.c.view.Load()
	if v.Map.Shards <= 0 {
		f.local.TransactionAsync(ctx, acks, pushes, done)
		return
	}
	var owners []string
	var shards []int
	local := true
	see := func(s int) error {
		id, here, err := f.ownerOf(v, s)
		if err != nil {
			return err
		}
		if !slices.Contains(owners, id) {
			owners = append(owners, id)
		}
		if !slices.Contains(shards, s) {
			shards = append(shards, s)
		}
		local = local && here
		return nil
	}
	refuse := func(s int, err error) {
		// A shard being elected: the whole transaction waits for its
		// leader (up to electionWait), then is placed again.
		if electing(err) && !waited && f.spawn(func() {
			if f.awaitLeader(s) {
				f.transactionAsync(ctx, acks, pushes, done, true)
				return
			}
			done(engine.TxnResult{}, err)
		}) {
			return
		}
		done(engine.TxnResult{}, err)
	}
	for i := range acks {
		if s, ok := engine.PartitionShard(acks[i].PartitionID, v.Map.Shards); ok {
			if err := see(s); err != nil {
				refuse(s, err)
				return
			}
		}
	}
	for i := range pushes {
		if i > 0 && pushes[i].Queue == pushes[i-1].Queue && pushes[i].Partition == pushes[i-1].Partition {
			continue
		}
		s := shardOf(&v.Map, pushes[i].Queue, pushes[i].Partition)
		if err := see(s); err != nil {
			refuse(s, err)
			return
		}
	}
	// A replicated broker's engines hold one shard each: a transaction
	// must stay in one shard to be one record.
	across := len(owners) > 1 || (f.c.rp != nil && len(shards) > 1)
	switch {
	case across:
		if !f.spawn(func() { done(f.txnAcross(ctx, acks, pushes)) }) {
			done(engine.TxnResult{}, errLinksClosed)
		}
	case local: // every item here (or none routable: the engine refuses them)
		f.local.TransactionAsync(ctx, acks, pushes, done)
	default:
		id := owners[0]
		if !f.spawn(func() {
			ctx, cancel := context.WithTimeout(ctx, callTimeout)
			defer cancel()
			ctx, stop := f.watchLead(ctx, &part{id: id, shards: shards})
			defer stop()
			r, err := f.txnRemote(ctx, v, id, acks, pushes)
			if err != nil {
				err = movedOr(ctx, err)
			}
			done(r, err)
		}) {
			done(engine.TxnResult{}, errLinksClosed)
		}
	}
}

// txnAcross runs a transaction whose items fall in shards no one engine
// holds together (several brokers', or several replicated shards), which
// no broker can apply as one step: its pushes first (forwarded as a push
// is), then, if every push was stored, its acks, as the Go client does.
// Each push without a transactionId gets one derived from the first acked
// message and the push's place, so that a transaction sent again after a
// failure between the two steps pushes nothing twice (the dedup window
// drops the repeat). When a push is refused nothing is acked; when an ack
// is refused the pushes stay; either way the result's Err says so
// (txn_aborted) and each operation's result says which.
func (f *forwarder) txnAcross(ctx context.Context, acks []engine.AckItem, pushes []engine.PushItem) (engine.TxnResult, error) {
	items := slices.Clone(pushes)
	if len(acks) > 0 {
		key := txnKey(&acks[0])
		for i := range items {
			if items[i].TransactionID == "" {
				items[i].TransactionID = fmt.Sprintf("%s-txn-%d", key, i)
			}
		}
	}
	wait := func(run func(done func(error))) error {
		ch := make(chan error, 1)
		run(func(err error) { ch <- err })
		return <-ch
	}
	// Every operation has its result (the HTTP bridge answers each).
	out := engine.TxnResult{Pushes: make([]engine.PushResult, len(items)), Acks: make([]engine.AckResult, len(acks))}
	if len(items) > 0 {
		if err := wait(func(done func(error)) { f.PushAsync(ctx, items, out.Pushes, done) }); err != nil {
			return engine.TxnResult{}, err
		}
		for i := range out.Pushes {
			if r := &out.Pushes[i]; r.Status == engine.Failed {
				out.Err = protocol.NewError(protocol.CodeTxnAborted, "a push was refused, nothing was acked (the transaction's items fall in several shards, which no broker applies as one step): "+errText(r.Err))
				for k := range out.Acks {
					out.Acks[k].Err = protocol.NewError(protocol.CodeTxnAborted, "not applied: a push of the transaction was refused")
				}
				return out, nil
			}
		}
	}
	if len(acks) > 0 {
		if err := wait(func(done func(error)) { f.AckAsync(ctx, acks, out.Acks, done) }); err != nil {
			return out, err
		}
		for i := range out.Acks {
			if r := &out.Acks[i]; r.Err != nil {
				out.Err = protocol.NewError(protocol.CodeTxnAborted, "an ack was refused after the pushes were stored (the transaction's items fall in several shards, which no broker applies as one step): "+r.Err.Error())
				break
			}
		}
	}
	return out, nil
}

// txnKey names an acked message for txnAcross's derived transactionIds,
// in at most 36 bytes however long the message's own transactionId is
// (a derived id must stay within engine.MaxNameBytes).
func txnKey(a *engine.AckItem) string {
	if !a.MessageID.IsZero() {
		return a.MessageID.String()
	}
	h := sha256.New()
	h.Write(a.PartitionID[:])
	if a.TransactionID != "" {
		h.Write([]byte(a.TransactionID))
	} else {
		h.Write(binary.BigEndian.AppendUint64(nil, a.Offset))
	}
	return hex.EncodeToString(h.Sum(nil)[:18])
}

func errText(err error) string {
	if err == nil {
		return "refused"
	}
	return err.Error()
}

// txnRemote runs a transaction at broker id.
func (f *forwarder) txnRemote(ctx context.Context, v *meta.View, id string, acks []engine.AckItem, pushes []engine.PushItem) (engine.TxnResult, error) {
	cl, err := f.links.client(ctx, v, id)
	if err != nil {
		return engine.TxnResult{}, err
	}
	t := cl.Transaction()
	for i := range acks {
		t.AddAck(clientAck(&acks[i]))
	}
	for i := range pushes {
		it := &pushes[i]
		t.Push(client.Item{Queue: it.Queue, Partition: it.Partition, TransactionID: it.TransactionID, TraceID: it.TraceID, Payload: it.Payload})
	}
	r, err := t.Commit(ctx)
	if err != nil {
		return engine.TxnResult{}, linkErr(id, err)
	}
	if len(r.Acks) != len(acks) || len(r.Pushes) != len(pushes) {
		return engine.TxnResult{}, protocol.NewError(protocol.CodeInternal, fmt.Sprintf("broker %s answered a transaction of %d acks and %d pushes with %d and %d results",
			id, len(acks), len(pushes), len(r.Acks), len(r.Pushes)))
	}
	out := engine.TxnResult{Acks: make([]engine.AckResult, len(r.Acks)), Pushes: make([]engine.PushResult, len(r.Pushes)), Err: r.Err}
	for i := range r.Acks {
		a := &r.Acks[i]
		out.Acks[i] = engine.AckResult{Err: a.Err, Offset: a.Offset, LeaseReleased: a.LeaseReleased, DeadLettered: a.DeadLettered}
	}
	for i := range r.Pushes {
		p := &r.Pushes[i]
		out.Pushes[i] = engine.PushResult{Status: engine.PushStatus(p.Status), MessageID: engine.UUID(p.MessageID), TransactionID: p.TransactionID,
			PartitionID: engine.UUID(p.PartitionID), Offset: p.Offset, Err: p.Err}
	}
	return out, nil
}

// PopAsync is netserver.DataPlane's: a pop of a named partition is served
// by its owner, a pop of any partition of a queue by every broker owning
// shards (fwdPop.runAny), a pop by namespace and task by this broker.
func (f *forwarder) PopAsync(req engine.PopRequest, done func([]engine.Message, bool, error)) popWaiter {
	v := f.c.view.Load()
	if req.Queue == "" || v.Map.Shards <= 0 {
		return f.popHere(req, done)
	}
	if req.Partition != "" {
		id, local, err := f.ownerOf(v, shardOf(&v.Map, req.Queue, req.Partition))
		switch {
		case err != nil:
			done(nil, false, err)
			return nil
		case local:
			return f.popHere(req, done)
		}
		p := f.newPop(req, done)
		if !f.spawn(func() { p.runNamed(id) }) {
			done(nil, false, errLinksClosed)
			return nil
		}
		return p
	}
	if req.AutoAck {
		if msgs := f.held.take(req); len(msgs) > 0 {
			done(msgs, false, nil)
			return nil
		}
	}
	if len(f.peers(v)) == 0 {
		return f.popHere(req, done) // every other broker is down, or owns nothing
	}
	p := f.newPop(req, done)
	if !f.spawn(p.runAny) {
		done(nil, false, errLinksClosed)
		return nil
	}
	return p
}

// popHere is this broker's engine's pop.
func (f *forwarder) popHere(req engine.PopRequest, done func([]engine.Message, bool, error)) popWaiter {
	return f.local.PopAsync(req, done)
}

// popAnswer is one pop's answer.
type popAnswer struct {
	msgs []engine.Message
	cut  bool
	err  error
}

// popNow pops from this broker's engine without waiting (req.Wait false).
func (f *forwarder) popNow(req engine.PopRequest) popAnswer {
	ch := make(chan popAnswer, 1)
	f.local.PopAsync(req, func(m []engine.Message, cut bool, err error) { ch <- popAnswer{m, cut, err} })
	return <-ch
}

// popRemote pops at broker id. The call is not cancelled with its caller
// (what it takes must be given back): it ends with its own timeout, a
// margin past the pop's, or when the link closes.
func (f *forwarder) popRemote(id string, req engine.PopRequest) popAnswer {
	wait := time.Duration(0)
	if req.Wait {
		wait = req.Timeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait+pollMargin)
	defer cancel()
	cl, err := f.links.client(ctx, f.c.view.Load(), id)
	if err != nil {
		return popAnswer{err: err}
	}
	var b client.Batch
	if err := cl.PopBatch(ctx, clientPop(req), &b); err != nil {
		return popAnswer{err: linkErr(id, err)}
	}
	out := make([]engine.Message, len(b.Messages))
	for i := range b.Messages {
		m := &b.Messages[i]
		out[i] = engine.Message{ID: engine.UUID(m.ID), TransactionID: m.TransactionID, TraceID: m.TraceID, Payload: m.Payload,
			CreatedAt: m.CreatedAt.UnixNano(), Queue: m.Queue, Partition: m.Partition, PartitionID: engine.UUID(m.PartitionID),
			Offset: m.Offset, LeaseID: engine.UUID(m.LeaseID), Group: m.Group, RetryCount: m.RetryCount}
		if !m.LeaseExpires.IsZero() {
			out[i].LeaseExpires = m.LeaseExpires.UnixNano()
		}
	}
	return popAnswer{msgs: out, cut: b.Cut}
}

// clientPop is req as the Go client sends it.
func clientPop(req engine.PopRequest) client.PopRequest {
	out := client.PopRequest{Queue: req.Queue, Namespace: req.Namespace, Task: req.Task, Partition: req.Partition, Group: req.Group,
		Subscription: client.SubscriptionMode(req.Subscription), From: req.From, Batch: req.Batch, Partitions: req.Partitions,
		Wait: req.Wait, Timeout: req.Timeout, AutoAck: req.AutoAck}
	if out.Wait && out.Timeout < time.Millisecond {
		out.Timeout = time.Millisecond // 0 would mean the default, 30 s
	}
	return out
}

// fwdPop is a pop served by other brokers (and by this one's engine, for
// a pop of any partition): a goroutine runs it, Cancel withdraws it.
type fwdPop struct {
	f    *forwarder
	req  engine.PopRequest // without Buf: the answer comes later than the caller's PopAsync
	done func([]engine.Message, bool, error)
	quit chan struct{} // closed by Cancel

	mu        sync.Mutex
	answered  bool // done ran or runs
	cancelled bool // Cancel withdrew the pop: done never runs
}

func (f *forwarder) newPop(req engine.PopRequest, done func([]engine.Message, bool, error)) *fwdPop {
	req.Buf = nil
	if req.Timeout <= 0 {
		req.Timeout = defaultPopTimeout
	}
	return &fwdPop{f: f, req: req, done: done, quit: make(chan struct{})}
}

// Cancel is popWaiter's: until the pop answered, it withdraws
// it, and what it takes after goes back.
func (p *fwdPop) Cancel() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.answered {
		return false
	}
	if !p.cancelled {
		p.cancelled = true
		close(p.quit)
	}
	return true
}

// deliver answers the pop, or gives msgs back if it was withdrawn.
func (p *fwdPop) deliver(a popAnswer) {
	p.mu.Lock()
	if p.cancelled {
		p.mu.Unlock()
		p.f.giveBack(p.req, a.msgs)
		return
	}
	p.answered = true
	p.mu.Unlock()
	p.done(a.msgs, a.cut, a.err)
}

// ended reports whether the pop was withdrawn or the broker is stopping:
// nothing more should be taken for it.
func (p *fwdPop) ended() bool {
	select {
	case <-p.quit:
		return true
	case <-p.f.stop:
		return true
	default:
		return false
	}
}

// endAnswer is the answer of a pop that ended: nothing (it was withdrawn:
// nobody reads it), or the broker's stop.
func (p *fwdPop) endAnswer() popAnswer {
	select {
	case <-p.quit:
		return popAnswer{}
	default:
		return popAnswer{err: errLinksClosed}
	}
}

// left is what remains of the pop's timeout from start; false when
// nothing does.
func (p *fwdPop) left(start time.Time) (time.Duration, bool) {
	d := p.req.Timeout - time.Since(start)
	return d, d >= time.Millisecond
}

// runNamed serves a pop of a named partition at its owner, id: in one
// call, or, for an autoAck long poll, in rounds of at most pollSlice.
func (p *fwdPop) runNamed(id string) {
	start := time.Now()
	for {
		r := p.req
		if r.Wait {
			d, ok := p.left(start)
			if !ok {
				p.deliver(popAnswer{})
				return
			}
			r.Timeout = d
			if r.AutoAck {
				r.Timeout = min(d, pollSlice)
			}
		}
		a := p.f.popRemote(id, r)
		switch _, more := p.left(start); {
		case a.err != nil || len(a.msgs) > 0 || !p.req.Wait:
			p.deliver(a)
			return
		case p.ended():
			p.deliver(p.endAnswer())
			return
		case !more:
			p.deliver(popAnswer{})
			return
		}
	}
}

// runAny serves a pop of any partition of a queue. It asks this broker,
// then each other live broker owning shards, without waiting, and answers
// the first messages found. When none has any and the pop may wait, it
// long-polls them all at once (pollAll) and answers the first messages
// that come, in one round for a leased pop, in rounds of at most
// pollSlice for an autoAck one. A broker that is down or unreachable is
// passed over; another refusal answers the pop when nobody has messages.
func (p *fwdPop) runAny() {
	f := p.f
	start := time.Now()
	for {
		if p.ended() {
			p.deliver(p.endAnswer())
			return
		}
		peers := f.peers(f.c.view.Load())
		g := gather{want: p.req, budget: p.req.MaxBytes}
		if g.budget <= 0 || g.budget > f.popBytes {
			g.budget = f.popBytes
		}
		quick := g.next()
		for range maxLocalPasses { // a replicated broker's engines answer one at a time
			a := f.popNow(quick)
			if a.err != nil && len(g.got.msgs) == 0 {
				p.deliver(a)
				return
			}
			if a.err != nil || len(a.msgs) == 0 {
				break
			}
			if g.add(a) {
				p.deliver(g.got)
				return
			}
			quick = g.next()
		}
		var firstErr error
		for _, id := range peers {
			for range maxLocalPasses { // a replicated broker's data plane answers from one engine at a time
				if p.ended() {
					p.deliver(g.answer(p.endAnswer()))
					return
				}
				a := f.popRemote(id, quick)
				if a.err != nil && protocol.CodeOf(a.err) != protocol.CodeUnavailable && firstErr == nil {
					firstErr = a.err
				}
				if len(a.msgs) == 0 {
					break
				}
				if g.add(a) {
					p.deliver(g.got)
					return
				}
				quick = g.next()
			}
		}
		if len(g.got.msgs) > 0 {
			p.deliver(g.got)
			return
		}
		if firstErr != nil {
			p.deliver(popAnswer{err: firstErr})
			return
		}
		d, more := p.left(start)
		if p.ended() {
			p.deliver(p.endAnswer())
			return
		}
		if !p.req.Wait || !more {
			p.deliver(popAnswer{})
			return
		}
		round := p.req
		round.Timeout = d
		if round.AutoAck {
			round.Timeout = min(d, pollSlice)
		}
		if a, over := p.pollAll(peers, round); over {
			p.deliver(a)
			return
		}
	}
}

// maxLocalPasses bounds the pops without waiting that a pop of several
// partitions makes at one broker: a replicated broker's data plane answers
// from one of its engines at a time.
const maxLocalPasses = 16

// gather adds up the answers a pop of any partition gets from brokers (and
// engines) asked in turn without waiting. A pop of one partition takes
// the first answer with messages; an autoAck pop of several (Partitions
// above 1, Queen's partitions=N) goes on asking, for what the batch and
// the partition count have left, so that it takes as many partitions as
// one broker's engine would. A leased pop of several takes the first
// answer too: one engine grants one lease for every partition it claims,
// and Queen's clients renew and ack a pop's messages under the one lease
// its answer names; a lease spanning engines would be a cross-shard
// commit, which the cluster does not have.
type gather struct {
	want engine.PopRequest
	// budget bounds the bytes of the answer, as MessageBytes counts them:
	// each broker or engine asked gets what is left of it.
	budget int
	got    popAnswer
	bytes  int
	parts  map[engine.UUID]struct{} // the partitions of got
}

// next is the request for the next broker or engine asked: no long poll,
// no answer buffer (the messages of several answers are kept), the batch,
// partitions and bytes that are left.
func (g *gather) next() engine.PopRequest {
	r := g.want
	r.Wait, r.Buf = false, nil
	if r.Partitions > 1 {
		r.Batch = max(r.Batch, 1) - len(g.got.msgs)
		r.Partitions -= len(g.parts)
		r.MaxBytes = g.budget - g.bytes
	}
	return r
}

// add takes an answer with messages and says whether the pop is answered.
func (g *gather) add(a popAnswer) bool {
	g.got.msgs = append(g.got.msgs, a.msgs...)
	g.got.cut = g.got.cut || a.cut
	if g.want.Partitions <= 1 || !g.want.AutoAck {
		return true
	}
	if g.parts == nil {
		g.parts = make(map[engine.UUID]struct{})
	}
	for i := range a.msgs {
		m := &a.msgs[i]
		g.parts[m.PartitionID] = struct{}{}
		g.bytes += engine.MessageBytes(len(m.Payload), m.TransactionID, m.TraceID, m.Partition, m.ProducerSub)
	}
	r := g.next()
	return r.Batch <= 0 || r.Partitions <= 0 || r.MaxBytes <= 0 || a.cut
}

// answer is what a pop that ended answers: what was gathered, if
// anything (fwdPop.deliver gives it back when the pop was withdrawn), else
// end.
func (g *gather) answer(end popAnswer) popAnswer {
	if len(g.got.msgs) > 0 {
		return g.got
	}
	return end
}

// pollAll long-polls this broker and peers at once with req and returns
// the first answer with messages; over is false when every poll answered
// nothing (another round may follow). What the others take after that is
// given back (pollRound).
func (p *fwdPop) pollAll(peers []string, req engine.PopRequest) (a popAnswer, over bool) {
	f := p.f
	rd := &pollRound{f: f, req: req, ch: make(chan popAnswer, len(peers)+1)}
	n := 0
	for _, id := range peers {
		if f.spawn(func() { rd.offer(f.popRemote(id, req)) }) {
			n++
		}
	}
	n++
	pw := f.local.PopAsync(req, func(m []engine.Message, cut bool, err error) { rd.offer(popAnswer{m, cut, err}) })
	defer func() {
		rd.take()
		if pw != nil {
			pw.Cancel() // if it answered or answers now, the answer goes back (offer)
		}
	}()
	var firstErr error
	for got := 0; got < n; {
		select {
		case a := <-rd.ch:
			got++
			if len(a.msgs) > 0 {
				return a, true
			}
			if a.err != nil && protocol.CodeOf(a.err) != protocol.CodeUnavailable && firstErr == nil {
				firstErr = a.err
			}
		case <-p.quit:
			return popAnswer{}, true
		case <-f.stop:
			return popAnswer{err: errLinksClosed}, true
		}
	}
	if firstErr != nil {
		return popAnswer{err: firstErr}, true
	}
	return popAnswer{}, false
}

// pollRound gathers the answers of one round of long polls. Once the
// round's answer is taken, every other answer, buffered or still to come,
// is given back.
type pollRound struct {
	f   *forwarder
	req engine.PopRequest

	mu    sync.Mutex
	taken bool
	ch    chan popAnswer // room for every poll's answer: offer never blocks
}

// offer hands in one poll's answer (from the engine's goroutines too: it
// does not block).
func (r *pollRound) offer(a popAnswer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.taken {
		r.f.giveBack(r.req, a.msgs)
		return
	}
	r.ch <- a
}

// take ends the round: what is buffered goes back, and so does what comes
// after.
func (r *pollRound) take() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.taken = true
	for {
		select {
		case a := <-r.ch:
			r.f.giveBack(r.req, a.msgs)
		default:
			return
		}
	}
}

// giveBack returns messages a pop took that its caller will not get:
// leased ones by an ack with status retry (no retry spent) of each
// partition's lease, at their broker; autoAck ones, which cannot go back,
// are held for the next pop (hold). It does not block.
func (f *forwarder) giveBack(req engine.PopRequest, msgs []engine.Message) {
	if len(msgs) == 0 {
		return
	}
	if msgs[0].LeaseID.IsZero() {
		f.hold(req, msgs)
		return
	}
	acks := retryAcks(msgs)
	// Not spawned once the broker stops: the leases then expire.
	f.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		res := make([]engine.AckResult, len(acks))
		ch := make(chan error, 1)
		f.AckAsync(ctx, acks, res, func(err error) { ch <- err })
		err := <-ch
		for i := range res {
			err = cmpErr(err, res[i].Err)
		}
		if err != nil {
			f.log.Warn("cluster: messages a pop took for nobody were not given back: their lease expires", "queue", req.Queue, "group", req.Group, "err", err)
		}
	})
}

func cmpErr(first, err error) error {
	if first == nil {
		return err
	}
	return first
}

// hold keeps autoAck messages a pop took for nobody for the next autoAck
// pop of any partition of their queue by their group (f.held), up to
// maxHeld messages in all; past that they are dropped, delivered to
// nobody (autoAck is at most once).
func (f *forwarder) hold(req engine.PopRequest, msgs []engine.Message) {
	if !f.held.hold(req, msgs) {
		f.log.Warn("cluster: an autoAck pop's late answer is dropped: its messages are delivered to nobody",
			"queue", req.Queue, "group", req.Group, "messages", len(msgs))
	}
}
