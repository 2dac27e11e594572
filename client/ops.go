package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/regentmq/regent/protocol"
)

// Push stores items and answers one result per item, in order. An item
// answered PushQueued is durable under the broker's sync policy.
func (c *Client) Push(ctx context.Context, items ...Item) (PushResults, error) {
	if c.cl != nil {
		return c.cl.push(ctx, items)
	}
	reply := pushReplies.Get().(*protocol.PushReply)
	err := c.do(ctx, protocol.OpPush, pushFrame(items, nil), reply)
	if err != nil {
		// Not pooled: after a cancelled wait the reply may still be
		// decoded into it.
		return nil, err
	}
	out := pushResults(reply.Items, items)
	clear(reply.Items)
	pushReplies.Put(reply)
	if len(out) != len(items) {
		return nil, fmt.Errorf("client: push of %d items answered with %d results", len(items), len(out))
	}
	return out, nil
}

// pushFrame encodes a Push request straight from the caller's items: those
// idx names, in its order (a cluster's part of a push), or all of them when
// idx is nil.
func pushFrame(items []Item, idx []int) func(dst []byte, id uint64) []byte {
	return func(dst []byte, id uint64) []byte {
		n := len(items)
		if idx != nil {
			n = len(idx)
		}
		dst, start := protocol.AppendPushRequestStart(dst, id, n)
		for k := range n {
			i := k
			if idx != nil {
				i = idx[k]
			}
			it := &items[i]
			dst = protocol.AppendPushItem(dst, it.Queue, it.Partition, it.TransactionID, it.TraceID, it.Payload)
		}
		protocol.PatchLength(dst, start)
		return dst
	}
}

// pushReplies keeps decoded push replies (their result slice and string
// arena) for the next Push: pushResults copies out what it keeps.
var pushReplies = sync.Pool{New: func() any { return new(protocol.PushReply) }}

// pushResults converts a reply whose strings live in a reused arena: a
// transactionId is the item's own string when it is the same (the usual
// case), a copy otherwise.
func pushResults(in []protocol.PushResult, items []Item) PushResults {
	out := make(PushResults, len(in))
	for i := range in {
		var it *Item
		if i < len(items) {
			it = &items[i]
		}
		out[i] = pushResult(&in[i], it)
	}
	return out
}

// pushResult converts r, the result of it (nil: unknown), as pushResults
// does.
func pushResult(r *protocol.PushResult, it *Item) PushResult {
	txn := r.TransactionID
	if it != nil && it.TransactionID == txn {
		txn = it.TransactionID
	} else {
		txn = strings.Clone(txn)
	}
	return PushResult{Status: PushStatus(r.Status), MessageID: ID(r.MessageID), PartitionID: ID(r.PartitionID),
		Offset: r.Offset, TransactionID: txn, Err: codeErr(r.Code, strings.Clone(r.Error))}
}

// PopRequest is the low-level form of a pop; QueueBuilder builds it.
type PopRequest struct {
	Queue        string // or "" with Namespace and/or Task: any queue carrying them, by priority
	Namespace    string
	Task         string
	Partition    string // "" = any partition
	Group        string // "" = queue mode
	Subscription SubscriptionMode
	From         time.Time // where a new group starts with FromTime
	Batch        int
	Partitions   int
	Wait         bool
	Timeout      time.Duration
	AutoAck      bool
}

// Pop asks for messages. An empty answer is normal.
func (c *Client) Pop(ctx context.Context, r PopRequest) ([]Message, error) {
	if c.cl != nil {
		return c.cl.pop(ctx, r)
	}
	reply := popReplies.Get().(*protocol.PopReply)
	err := c.doMinor(ctx, protocol.OpPop, r.frame(reply), reply)
	if err != nil {
		return nil, err // not pooled: see Push
	}
	out := appendMessages(make([]Message, 0, len(reply.Messages)), reply)
	// The messages' strings and payloads stay in the arena, which goes with
	// them; the message slice is kept for the next Pop.
	reply.Detach()
	clear(reply.Messages)
	reply.Queue, reply.Group = "", ""
	popReplies.Put(reply)
	return out, nil
}

// Batch holds one pop's messages in memory that the next PopBatch into it
// reuses (the message slice, the strings and payloads, the ack results), so
// a consumer cycling through a few Batches allocates only a few small
// objects per pop or ack. The zero Batch is ready to use; a Batch is not
// safe for concurrent use.
type Batch struct {
	// Messages, with their strings and payloads, are valid until the next
	// PopBatch into this Batch: copy what must outlive it.
	Messages []Message
	// Cut: the broker's byte budget for one reply (the frame size this
	// client reads) left out messages that were ready: pop again for them.
	Cut     bool
	reply   *protocol.PopReply // its arena holds the messages' strings and payloads
	results []AckResult
	ack     pendingAck // SendAck's request, until WaitAck
}

// PopBatch is Pop into b: b.Messages holds the answer (empty is normal).
func (c *Client) PopBatch(ctx context.Context, r PopRequest, b *Batch) error {
	b.Messages, b.Cut = b.Messages[:0], false
	if c.cl != nil {
		msgs, err := c.cl.pop(ctx, r)
		b.Messages = append(b.Messages, msgs...)
		return err
	}
	if b.reply == nil {
		b.reply = new(protocol.PopReply)
	}
	err := c.doMinor(ctx, protocol.OpPop, r.frame(b.reply), b.reply)
	if err != nil {
		// After a cancelled wait the reply may still be decoded into it:
		// it is left to the reader.
		b.reply = nil
		return err
	}
	b.Messages, b.Cut = appendMessages(b.Messages, b.reply), b.reply.Cut
	return nil
}

// AckBatch is Ack of b.Messages. The results live in b until its next
// AckBatch.
func (c *Client) AckBatch(ctx context.Context, b *Batch, status AckStatus, opt AckOptions) ([]AckResult, error) {
	if err := c.SendAck(ctx, b, status, opt); err != nil {
		return nil, err
	}
	return c.WaitAck(ctx, b)
}

// SendAck sends AckBatch's request and returns without waiting for the
// answer; WaitAck waits for it. A consumer that sends its ack and then pops
// the next batch has both go out together, often in one write. The ack
// takes effect when the broker has made it durable, as with AckBatch, so
// that pop may still find those messages' partitions leased. Until
// WaitAck returns, b must not be popped into or acked again.
func (c *Client) SendAck(ctx context.Context, b *Batch, status AckStatus, opt AckOptions) error {
	if b.ack.pending() {
		return errors.New("client: SendAck on a batch whose ack is still pending")
	}
	p, err := c.startAck(ctx, len(b.Messages), sameAnswer(b.Messages, status, opt), c.msgKey(b.Messages))
	b.ack = p
	return err
}

// WaitAck waits for the answer to b's SendAck. The results live in b until
// its next ack.
func (c *Client) WaitAck(ctx context.Context, b *Batch) ([]AckResult, error) {
	p := b.ack
	if !p.pending() {
		return nil, errors.New("client: WaitAck on a batch with no ack sent")
	}
	b.ack = pendingAck{}
	res, err := p.finish(ctx, b.results[:0])
	if err == nil {
		b.results = res
	}
	return res, err
}

// frame encodes r as a Pop request frame, and tells reply the layout the
// server it goes to answers in (CompactMessages from a 1.5 server).
func (r *PopRequest) frame(reply *protocol.PopReply) func(dst []byte, id uint64, minor uint16) []byte {
	req := protocol.PopRequest{
		Queue: r.Queue, Partition: r.Partition, Group: r.Group, Subscription: protocol.SubMode(r.Subscription),
		Batch: uint32(max(r.Batch, 0)), Partitions: uint32(max(r.Partitions, 0)), Wait: r.Wait,
		TimeoutMs: uint32(max(r.Timeout, 0) / time.Millisecond), AutoAck: r.AutoAck,
		Namespace: r.Namespace, Task: r.Task,
	}
	if r.Subscription == FromTime {
		req.From = r.From.UnixNano()
	}
	return func(dst []byte, id uint64, minor uint16) []byte {
		reply.SetCompact(minor >= compactPopMinor)
		return protocol.AppendPopRequest(dst, id, &req)
	}
}

// compactPopMinor is the protocol minor version from which a server
// answers pops with CompactMessages.
const compactPopMinor = 5

// appendMessages converts a pop reply's messages; their strings and
// payloads still point into the reply's arena.
func appendMessages(dst []Message, reply *protocol.PopReply) []Message {
	for i := range reply.Messages {
		dst = append(dst, messageFromWire(&reply.Messages[i], reply.Queue, reply.Group))
	}
	return dst
}

var popReplies = sync.Pool{New: func() any { return new(protocol.PopReply) }}

// Ack gives every message in msgs the same answer; use AckEach for an answer
// per message. Refused acks are per-message results, not an error.
func (c *Client) Ack(ctx context.Context, msgs []Message, status AckStatus, opt AckOptions) ([]AckResult, error) {
	return c.ack(ctx, len(msgs), sameAnswer(msgs, status, opt), c.msgKey(msgs), nil)
}

// msgKey gives the queue and partition of message i, which route its ack
// in a cluster.
//
// Nil when the broker runs alone: nothing routes, and the closure is not
// made (an allocation per ack request).
func (c *Client) msgKey(msgs []Message) func(i int) (string, string) {
	if c.cl == nil {
		return nil
	}
	return func(i int) (string, string) { return msgs[i].Queue, msgs[i].Partition }
}

// sameAnswer encodes ack item i of msgs, all with the same answer.
func sameAnswer(msgs []Message, status AckStatus, opt AckOptions) func(dst []byte, i int) []byte {
	return func(dst []byte, i int) []byte {
		m := &msgs[i]
		group := m.Group
		if opt.Group != "" {
			group = opt.Group
		}
		it := ackItem(m, group, status, opt.Error)
		return protocol.AppendAckItem(dst, &it)
	}
}

// AckEach acks a batch with an answer (and error text) per message, in one
// request; the broker applies them in order, per partition.
func (c *Client) AckEach(ctx context.Context, acks ...Ack) ([]AckResult, error) {
	return c.ack(ctx, len(acks), func(dst []byte, i int) []byte {
		it := ackOf(&acks[i])
		return protocol.AppendAckItem(dst, &it)
	}, c.ackKey(acks), nil)
}

// ackKey is msgKey for AckEach's acks.
func (c *Client) ackKey(acks []Ack) func(i int) (string, string) {
	if c.cl == nil {
		return nil
	}
	return func(i int) (string, string) { return acks[i].Message.Queue, acks[i].Message.Partition }
}

// ack sends an Ack of n items, each encoded straight into the frame by
// item, and appends the results to out.
func (c *Client) ack(ctx context.Context, n int, item func(dst []byte, i int) []byte, key func(i int) (string, string), out []AckResult) ([]AckResult, error) {
	p, err := c.startAck(ctx, n, item, key)
	if err != nil {
		return nil, err
	}
	return p.finish(ctx, out)
}

// pendingAck is an Ack request on its way (in a cluster, the requests to
// each owner).
type pendingAck struct {
	cl    *call
	reply *protocol.AckReply
	n     int
	multi *clusterAck
}

func (p pendingAck) pending() bool { return p.cl != nil || p.multi != nil }

// startAck sends an Ack of n items, item encoding each; key gives an item's
// queue and partition, which route it in a cluster.
func (c *Client) startAck(ctx context.Context, n int, item func(dst []byte, i int) []byte, key func(i int) (string, string)) (pendingAck, error) {
	if c.cl != nil {
		ca := &clusterAck{r: c.cl, n: n, item: item, key: key, maybe: make([]bool, n)}
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		c.cl.startAck(ctx, ca, idx)
		return pendingAck{multi: ca, n: n}, nil
	}
	cn, err := c.conn(ctx)
	if err != nil {
		return pendingAck{}, err
	}
	reply := ackReplies.Get().(*protocol.AckReply)
	cl, err := cn.start(ctx, protocol.OpAck, func(dst []byte, id uint64) []byte {
		dst, start := protocol.AppendAckRequestStart(dst, id, n)
		for i := 0; i < n; i++ {
			dst = item(dst, i)
		}
		protocol.PatchLength(dst, start)
		return dst
	}, reply)
	if err != nil {
		ackReplies.Put(reply) // never sent: nobody else has it
		return pendingAck{}, err
	}
	return pendingAck{cl: cl, reply: reply, n: n}, nil
}

// finish waits for the answer and appends the results to out.
func (p pendingAck) finish(ctx context.Context, out []AckResult) ([]AckResult, error) {
	if p.multi != nil {
		return p.multi.finish(ctx, out)
	}
	if err := p.cl.wait(ctx); err != nil {
		return nil, err // not pooled: see Push
	}
	out = appendAckResults(out, p.reply.Items) // copies the error texts out of the arena
	clear(p.reply.Items)
	ackReplies.Put(p.reply)
	if len(out) != p.n {
		return nil, fmt.Errorf("client: ack of %d items answered with %d results", p.n, len(out))
	}
	return out, nil
}

var ackReplies = sync.Pool{New: func() any { return new(protocol.AckReply) }}

func ackItems(acks []Ack) []protocol.AckItem {
	items := make([]protocol.AckItem, len(acks))
	for i := range acks {
		items[i] = ackOf(&acks[i])
	}
	return items
}

// ackOf is a's wire item: by offset, by transactionId, or by message id.
func ackOf(a *Ack) protocol.AckItem {
	it := ackItem(&a.Message, a.Message.Group, a.Status, a.Error)
	switch {
	case a.ByTransactionID:
		it.HasOffset, it.Offset, it.MessageID, it.TransactionID = false, 0, protocol.UUID{}, a.Message.TransactionID
	case a.ByMessageID:
		it.HasOffset, it.Offset = false, 0
	}
	return it
}

func ackItem(m *Message, group string, status AckStatus, errText string) protocol.AckItem {
	return protocol.AckItem{PartitionID: protocol.UUID(m.PartitionID), HasOffset: true, Offset: m.Offset,
		MessageID: protocol.UUID(m.ID), LeaseID: protocol.UUID(m.LeaseID), Group: group,
		Status: protocol.AckStatus(status), Error: errText}
}

func appendAckResults(out []AckResult, in []protocol.AckResult) []AckResult {
	if out == nil {
		out = make([]AckResult, 0, len(in))
	}
	for _, r := range in {
		out = append(out, AckResult{Err: codeErr(r.Code, strings.Clone(r.Error)), Offset: r.Offset, LeaseReleased: r.LeaseReleased, DeadLettered: r.DeadLettered})
	}
	return out
}

// Extend pushes a lease's expiry to at least now+d (every partition of the
// pop that made it) and returns the new expiry.
func (c *Client) Extend(ctx context.Context, lease ID, d time.Duration) (time.Time, error) {
	req := protocol.LeaseExtendRequest{LeaseID: protocol.UUID(lease), DurationMs: uint64(max(d, 0) / time.Millisecond)}
	var reply protocol.LeaseExtendReply
	var err error
	if c.cl != nil {
		reply, err = c.cl.extend(ctx, lease, &req)
	} else {
		err = c.do(ctx, protocol.OpLeaseExtend, func(dst []byte, id uint64) []byte { return protocol.AppendLeaseExtendRequest(dst, id, &req) }, &reply)
	}
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, reply.Expires), nil
}

// QueueConfig is what Configure answers.
type QueueConfig struct {
	QueueID, DefaultPartitionID ID
	Created                     bool
	Options                     QueueOptions
}

// Configure creates a queue or replaces all its options.
func (c *Client) Configure(ctx context.Context, queue string, o QueueOptions) (QueueConfig, error) {
	req := protocol.ConfigureRequest{Queue: queue, Options: o.wire()}
	var reply protocol.ConfigureReply
	err := c.do(ctx, protocol.OpConfigure, func(dst []byte, id uint64) []byte { return protocol.AppendConfigureRequest(dst, id, &req) }, &reply)
	if err != nil {
		return QueueConfig{}, err
	}
	return queueConfig(&reply), nil
}

func queueConfig(r *protocol.ConfigureReply) QueueConfig {
	return QueueConfig{QueueID: ID(r.QueueID), DefaultPartitionID: ID(r.PartitionID), Created: r.Created, Options: optionsFromWire(&r.Options)}
}

// ErrUpdateUnsupported: the broker speaks protocol 1.3 or older, whose
// Configure replaces every option; UpdateQueue refuses rather than read and
// write in two steps (which could undo another client's change).
var ErrUpdateUnsupported = protocol.NewError(protocol.CodeInvalid, "the broker speaks protocol 1.3 or older, which cannot change some options and keep the others in one step: upgrade it, or use Configure")

// UpdateQueue changes the options of queue that set names to o's values
// and keeps the others as they are (a queue that does not exist is created
// with the defaults for them). The broker reads and writes them in one
// step, so two updates of different options never undo each other. It
// needs a broker of protocol 1.4 or later (ErrUpdateUnsupported).
func (c *Client) UpdateQueue(ctx context.Context, queue string, o QueueOptions, set OptionSet) (QueueConfig, error) {
	w := o.wire()
	w.Set = protocol.OptionMask(set)&protocol.OptAll | protocol.OptKeepUnset
	req := protocol.ConfigureRequest{Queue: queue, Options: w}
	cn, err := c.conn(ctx)
	if err != nil {
		return QueueConfig{}, err
	}
	if cn.minor < 4 {
		return QueueConfig{}, ErrUpdateUnsupported // it would refuse the bit as malformed
	}
	var reply protocol.ConfigureReply
	if err := c.do(ctx, protocol.OpConfigure, func(dst []byte, id uint64) []byte { return protocol.AppendConfigureRequest(dst, id, &req) }, &reply); err != nil {
		return QueueConfig{}, err
	}
	return queueConfig(&reply), nil
}

// Queues lists every queue, by name. From a broker that speaks protocol
// 1.2 it reads them a page at a time.
func (c *Client) Queues(ctx context.Context) ([]QueueSummary, error) {
	var all [][]QueueSummary
	err := c.each(func(p *pool) error {
		qs, err := queuesOn(ctx, p)
		all = append(all, qs)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(all) == 1 {
		return all[0], nil
	}
	return mergeSummaries(all), nil
}

// queuesOn lists the queues of one broker.
func queuesOn(ctx context.Context, c *pool) ([]QueueSummary, error) {
	var out []QueueSummary
	after := ""
	for {
		req := protocol.QueueListRequest{After: after, Limit: uint32(MaxPage)}
		var reply protocol.QueueListReply
		err := c.doMinor(ctx, protocol.OpQueueList, func(dst []byte, id uint64, minor uint16) []byte {
			if minor < 2 {
				return protocol.AppendQueueListRequest(dst, id) // a 1.1 server refuses page fields
			}
			return protocol.AppendFrame(dst, id, &req)
		}, &reply)
		if err != nil {
			return nil, err
		}
		for i := range reply.Queues {
			out = append(out, summaryFromWire(&reply.Queues[i]))
		}
		if !reply.More || len(reply.Queues) == 0 {
			return out, nil
		}
		after = reply.Queues[len(reply.Queues)-1].Name
	}
}

// MaxPage is the most partitions (or queues) a broker puts in one page.
const MaxPage = 10_000

// QueueInfo describes one queue with all its partitions and their group
// cursors. From a broker that speaks protocol 1.2 it reads them a page of
// up to MaxPage at a time (QueueInfoPage); the summary is the first
// page's. A 1.1 broker sends what fits one reply.
func (c *Client) QueueInfo(ctx context.Context, queue string) (QueueDetail, error) {
	var all []QueueDetail
	err := c.eachHaving(func(p *pool) error {
		d, err := queueInfoOn(ctx, p, queue)
		if err == nil {
			all = append(all, d)
		}
		return err
	})
	if err != nil {
		return QueueDetail{}, err
	}
	out := all[0]
	if len(all) > 1 {
		sums := make([][]QueueSummary, len(all))
		for i := range all {
			sums[i] = []QueueSummary{all[i].QueueSummary}
			if i > 0 {
				out.Partitions = append(out.Partitions, all[i].Partitions...)
			}
		}
		out.QueueSummary = mergeSummaries(sums)[0]
		slices.SortFunc(out.Partitions, func(a, b PartitionInfo) int { return strings.Compare(a.Name, b.Name) })
	}
	return out, nil
}

// queueInfoOn describes a queue as one broker holds it, all pages.
func queueInfoOn(ctx context.Context, c *pool, queue string) (QueueDetail, error) {
	var out QueueDetail
	var after ID
	for page := 0; ; page++ {
		d, more, err := queueInfoPageOn(ctx, c, queue, after, MaxPage)
		if err != nil {
			return QueueDetail{}, err
		}
		if page == 0 {
			out = d
		} else {
			out.Partitions = append(out.Partitions, d.Partitions...)
		}
		if !more || len(d.Partitions) == 0 {
			return out, nil
		}
		after = d.Partitions[len(d.Partitions)-1].ID
	}
}

// QueueInfoPage describes one queue with a page of its partitions: those
// after the partition after (zero: from the first), in the order they were
// created, at most limit of them (0: the broker's default page, 1,000; at
// most MaxPage). more says that partitions follow: ask again with after set
// to the last one's ID. A 1.1 broker ignores the page and sends the first
// partitions that fit one reply, with more false. In a cluster it pages
// the broker dialled (its partitions only); QueueInfo gathers every
// broker's.
func (c *Client) QueueInfoPage(ctx context.Context, queue string, after ID, limit int) (QueueDetail, bool, error) {
	return queueInfoPageOn(ctx, c.pool, queue, after, limit)
}

func queueInfoPageOn(ctx context.Context, c *pool, queue string, after ID, limit int) (QueueDetail, bool, error) {
	req := protocol.QueueInfoRequest{Queue: queue, After: protocol.UUID(after), Limit: uint32(min(max(limit, 0), MaxPage))}
	var reply protocol.QueueInfoReply
	err := c.doMinor(ctx, protocol.OpQueueInfo, func(dst []byte, id uint64, minor uint16) []byte {
		r := req
		if minor < 2 {
			r.After, r.Limit = protocol.UUID{}, 0 // a 1.1 server refuses page fields
		}
		return protocol.AppendQueueInfoRequest(dst, id, &r)
	}, &reply)
	if err != nil {
		return QueueDetail{}, false, err
	}
	out := QueueDetail{QueueSummary: summaryFromWire(&reply.QueueSummary), Partitions: make([]PartitionInfo, len(reply.Partitions))}
	for i := range reply.Partitions {
		out.Partitions[i] = partitionFromWire(&reply.Partitions[i])
	}
	return out, reply.More, nil
}

// partitionFromWire converts a QueueInfo reply's partition. Its strings
// stay in the reply's arena, which no other call reuses.
func partitionFromWire(p *protocol.PartitionInfo) PartitionInfo {
	out := PartitionInfo{Name: p.Name, ID: ID(p.ID), Low: p.Low, Next: p.Next, Oldest: unixNano(p.Oldest), Newest: unixNano(p.Newest)}
	if len(p.Groups) > 0 {
		out.Groups = make([]GroupCursor, len(p.Groups))
		for i := range p.Groups {
			out.Groups[i] = groupCursorFromWire(&p.Groups[i])
		}
	}
	if len(p.Lost) > 0 {
		out.Lost = make([]OffsetRange, len(p.Lost))
		for i, r := range p.Lost {
			out.Lost[i] = OffsetRange{First: r.First, Last: r.Last}
		}
	}
	return out
}

func groupCursorFromWire(g *protocol.GroupCursor) GroupCursor {
	return GroupCursor{Group: g.Group, Cursor: g.Cursor, Lag: g.Lag, Leased: g.Leased, LeaseID: ID(g.LeaseID),
		LeaseExpires: unixNano(g.LeaseExpires), BlockedUntil: unixNano(g.BlockedUntil), Retrying: int(g.Retrying)}
}

// DeleteQueue removes a queue and everything in it; it reports whether the
// queue existed.
func (c *Client) DeleteQueue(ctx context.Context, queue string) (bool, error) {
	req := protocol.DeleteQueueRequest{Queue: queue}
	var reply protocol.DeleteQueueReply
	err := c.do(ctx, protocol.OpDeleteQueue, func(dst []byte, id uint64) []byte { return protocol.AppendDeleteQueueRequest(dst, id, &req) }, &reply)
	return reply.Existed, err
}

// SeekTo says where Seek moves a group: to the end, or to the first message
// created after Time; on every partition, or on Partition only.
type SeekTo struct {
	ToEnd     bool
	Time      time.Time
	Partition string
}

// Seek moves a consumer group's cursors on a queue (releasing its leases)
// and returns how many partitions moved.
func (c *Client) Seek(ctx context.Context, queue, group string, to SeekTo) (int, error) {
	req := protocol.SeekRequest{Queue: queue, Group: group, Partition: to.Partition, ToEnd: to.ToEnd}
	if !to.ToEnd {
		req.Time = to.Time.UnixNano()
	}
	moved := 0
	seek := func(p *pool) error {
		var reply protocol.SeekReply
		err := p.do(ctx, protocol.OpSeek, func(dst []byte, id uint64) []byte { return protocol.AppendSeekRequest(dst, id, &req) }, &reply)
		moved += int(reply.PartitionsMoved)
		return err
	}
	if c.cl != nil && to.Partition != "" {
		md := c.cl.ownedTable(ctx, 1, func(int) (string, string) { return queue, to.Partition })
		b, err := owner(md, queue, to.Partition)
		if err != nil {
			return 0, err
		}
		p, err := c.cl.poolOf(b)
		if err != nil {
			return 0, err
		}
		return moved, seek(p)
	}
	return moved, c.eachHaving(seek)
}

// DeleteGroup forgets a consumer group on a queue ("" = on every queue) and
// returns how many queues had it.
func (c *Client) DeleteGroup(ctx context.Context, queue, group string) (int, error) {
	req := protocol.DeleteGroupRequest{Queue: queue, Group: group}
	affected := 0
	err := c.eachHaving(func(p *pool) error {
		var reply protocol.DeleteGroupReply
		err := p.do(ctx, protocol.OpDeleteGroup, func(dst []byte, id uint64) []byte { return protocol.AppendDeleteGroupRequest(dst, id, &req) }, &reply)
		affected = max(affected, int(reply.QueuesAffected)) // each broker has the queues
		return err
	})
	return affected, err
}

// DLQ lists a page of dead-letter entries and how many match in all. A
// page holds at most 10,000 entries and what fits one reply, so it may be
// shorter than f.Limit: ask for the next one from Offset + the entries
// returned.
func (c *Client) DLQ(ctx context.Context, f DLQFilter) ([]DLQEntry, int, error) {
	if c.cl != nil {
		return c.cl.dlq(ctx, f)
	}
	return dlqOn(ctx, c.pool, f)
}

// dlqOn lists dead letters on one broker.
func dlqOn(ctx context.Context, c *pool, f DLQFilter) ([]DLQEntry, int, error) {
	req := protocol.DLQListRequest{Queue: f.Queue, Group: f.Group, Partition: f.Partition, Limit: uint32(max(f.Limit, 0)), Offset: uint32(max(f.Offset, 0))}
	if !f.From.IsZero() {
		req.From = f.From.UnixNano()
	}
	if !f.To.IsZero() {
		req.To = f.To.UnixNano()
	}
	var reply protocol.DLQListReply
	err := c.do(ctx, protocol.OpDLQList, func(dst []byte, id uint64) []byte { return protocol.AppendDLQListRequest(dst, id, &req) }, &reply)
	if err != nil {
		return nil, 0, err
	}
	out := make([]DLQEntry, len(reply.Entries))
	for i := range reply.Entries {
		e := &reply.Entries[i]
		out[i] = DLQEntry{ID: ID(e.ID), Message: messageFromWire(&e.Message, e.Queue, e.Group), Error: e.Error, RetryCount: int(e.RetryCount), FailedAt: time.Unix(0, e.FailedAt)}
	}
	return out, int(reply.Total), nil
}

// Stats returns the broker's counters.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var out Stats
	err := c.each(func(p *pool) error {
		var reply protocol.StatsReply
		if err := p.do(ctx, protocol.OpStats, func(dst []byte, id uint64) []byte { return protocol.AppendStatsRequest(dst, id) }, &reply); err != nil {
			return err
		}
		out = addStats(out, statsFromWire(&reply))
		return nil
	})
	return out, err
}

// addStats adds a broker's figures to a cluster's: counts add up, and
// Queues is the most any broker has (each holds every configured queue).
func addStats(a, b Stats) Stats {
	a.Queues = max(a.Queues, b.Queues)
	a.Pushed += b.Pushed
	a.Popped += b.Popped
	a.Acked += b.Acked
	a.DeadLettered += b.DeadLettered
	a.CacheBytes += b.CacheBytes
	a.Connections += b.Connections
	a.Fsyncs += b.Fsyncs
	a.FsyncTime += b.FsyncTime
	a.BytesWritten += b.BytesWritten
	a.Entries += b.Entries
	for k, v := range b.Extra {
		if a.Extra == nil {
			a.Extra = map[string]int64{}
		}
		a.Extra[k] += v
	}
	return a
}

// mergeSummaries merges the queue lists of a cluster's brokers, each
// sorted by name: a queue's partitions, messages and dead letters add up,
// its groups are the union, and its id, creation and options are the
// first broker's (each broker holds the same options).
func mergeSummaries(all [][]QueueSummary) []QueueSummary {
	byName := map[string]*QueueSummary{}
	var names []string
	for _, qs := range all {
		for _, q := range qs {
			m := byName[q.Name]
			if m == nil {
				c := q
				c.Groups = append([]string(nil), q.Groups...)
				byName[q.Name] = &c
				names = append(names, q.Name)
				continue
			}
			m.PartitionCount += q.PartitionCount
			m.Messages += q.Messages
			m.DeadLetters += q.DeadLetters
			for _, g := range q.Groups {
				if !slices.Contains(m.Groups, g) {
					m.Groups = append(m.Groups, g)
				}
			}
		}
	}
	slices.Sort(names)
	out := make([]QueueSummary, len(names))
	for i, n := range names {
		out[i] = *byName[n]
		slices.Sort(out[i].Groups)
	}
	return out
}

// statsFromWire converts a Stats reply. The extras' names stay in the
// reply's arena, which no other call reuses.
func statsFromWire(r *protocol.StatsReply) Stats {
	out := Stats{Queues: int(r.Queues), Pushed: r.Pushed, Popped: r.Popped, Acked: r.Acked, DeadLettered: r.DeadLettered,
		CacheBytes: r.CacheBytes, Connections: int(r.Connections), Fsyncs: r.Fsyncs, FsyncTime: time.Duration(r.FsyncNanos),
		BytesWritten: r.BytesWritten, Entries: r.Entries}
	if len(r.Extra) > 0 {
		out.Extra = make(map[string]int64, len(r.Extra))
		for _, x := range r.Extra {
			out.Extra[x.Name] = x.Value
		}
	}
	return out
}

// Ping checks the connection: one round trip.
func (c *Client) Ping(ctx context.Context) error {
	return c.do(ctx, protocol.OpPing, func(dst []byte, id uint64) []byte { return protocol.AppendPingRequest(dst, id) }, &protocol.PingReply{})
}

// Redriven is a dead-letter entry put back as a new message.
type Redriven struct {
	Entry, MessageID, PartitionID ID
	Queue, Partition              string
}

func dlqSelect(f DLQFilter, ids []ID) protocol.DLQSelect {
	s := protocol.DLQSelect{Queue: f.Queue, Group: f.Group, Partition: f.Partition}
	if !f.From.IsZero() {
		s.From = f.From.UnixNano()
	}
	if !f.To.IsZero() {
		s.To = f.To.UnixNano()
	}
	for _, id := range ids {
		s.IDs = append(s.IDs, protocol.UUID(id))
	}
	return s
}

// Redrive puts the dead-letter entries matching f (only those in ids, when
// ids is not empty) back at the end of their partitions as new messages,
// and removes them from the dead-letter queue.
func (c *Client) Redrive(ctx context.Context, f DLQFilter, ids ...ID) ([]Redriven, error) {
	req := protocol.DLQRedriveRequest{DLQSelect: dlqSelect(f, ids)}
	var out []Redriven
	err := c.each(func(p *pool) error {
		var reply protocol.DLQRedriveReply
		if err := p.do(ctx, protocol.OpDLQRedrive, func(dst []byte, id uint64) []byte { return protocol.AppendDLQRedriveRequest(dst, id, &req) }, &reply); err != nil {
			return err
		}
		for _, r := range reply.Items {
			out = append(out, Redriven{Entry: ID(r.Entry), MessageID: ID(r.MessageID), PartitionID: ID(r.PartitionID), Queue: r.Queue, Partition: r.Partition})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PurgeDLQ drops the dead-letter entries matching f (only those in ids,
// when ids is not empty) and returns how many went.
func (c *Client) PurgeDLQ(ctx context.Context, f DLQFilter, ids ...ID) (int, error) {
	req := protocol.DLQPurgeRequest{DLQSelect: dlqSelect(f, ids)}
	purged := 0
	err := c.each(func(p *pool) error {
		var reply protocol.DLQPurgeReply
		err := p.do(ctx, protocol.OpDLQPurge, func(dst []byte, id uint64) []byte { return protocol.AppendDLQPurgeRequest(dst, id, &req) }, &reply)
		purged += int(reply.Purged)
		return err
	})
	return purged, err
}

// eachHaving is each for an operation on a queue or group that only some
// brokers of a cluster may hold: a broker that answers queue_not_found or
// group_not_found does not count, unless all do.
func (c *Client) eachHaving(op func(p *pool) error) error {
	var missing error
	found := false
	err := c.each(func(p *pool) error {
		err := op(p)
		if code := protocol.CodeOf(err); c.cl != nil && (code == protocol.CodeQueueNotFound || code == protocol.CodeGroupNotFound) {
			missing = cmp(missing, err)
			return nil
		}
		found = found || err == nil
		return err
	})
	if err == nil && !found && missing != nil {
		return missing
	}
	return err
}

// each runs an operation that concerns the whole cluster on every broker,
// one after the other (the broker dialled only, when it runs alone). With
// a broker down it fails with unavailable before it runs anywhere: its
// part would be missing.
func (c *Client) each(op func(p *pool) error) error {
	if c.cl == nil {
		return op(c.pool)
	}
	md := c.cl.table()
	pools := make([]*pool, 0, len(md.Brokers))
	for i := range md.Brokers {
		p, err := c.cl.poolOf(&md.Brokers[i])
		if err != nil {
			return err
		}
		pools = append(pools, p)
	}
	for _, p := range pools {
		if err := op(p); err != nil {
			return err
		}
	}
	return nil
}
