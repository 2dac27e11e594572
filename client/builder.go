package client

import (
	"context"
	"errors"
	"time"

	"github.com/regentmq/regent/protocol"
)

// QueueBuilder builds pops, pushes and consume loops on one queue:
//
//	msgs, err := c.Queue("events").Group("auditor").SubscriptionMode(client.FromOldest).Batch(50).Wait(true).Pop(ctx)
//
// Each method returns a copy, so a builder can be kept and reused.
type QueueBuilder struct {
	c           *Client
	req         PopRequest
	concurrency int
}

// Queue starts a builder on queue name.
func (c *Client) Queue(name string) QueueBuilder {
	return QueueBuilder{c: c, req: PopRequest{Queue: name}, concurrency: 1}
}

// Labels starts a builder that pops from any queue whose options carry the
// namespace and/or task ("" matches any), higher priority first, taking
// turns within a priority.
func (c *Client) Labels(namespace, task string) QueueBuilder {
	return QueueBuilder{c: c, req: PopRequest{Namespace: namespace, Task: task}, concurrency: 1}
}

// Partition restricts pops (and sets pushes) to one partition.
func (q QueueBuilder) Partition(p string) QueueBuilder { q.req.Partition = p; return q }

// Group names the consumer group ("" = queue mode: competing consumers).
func (q QueueBuilder) Group(g string) QueueBuilder { q.req.Group = g; return q }

// SubscriptionMode decides where a group that never read the queue starts.
func (q QueueBuilder) SubscriptionMode(m SubscriptionMode) QueueBuilder {
	q.req.Subscription = m
	return q
}

// From starts a new group at the first message created at or after t.
func (q QueueBuilder) From(t time.Time) QueueBuilder {
	q.req.Subscription, q.req.From = FromTime, t
	return q
}

// Batch caps the messages of one pop (default 1).
func (q QueueBuilder) Batch(n int) QueueBuilder { q.req.Batch = n; return q }

// Partitions caps how many partitions one pop may lease (default 1).
func (q QueueBuilder) Partitions(n int) QueueBuilder { q.req.Partitions = n; return q }

// Wait makes pops long polls: they return once there is at least one
// message or the timeout passes.
func (q QueueBuilder) Wait(w bool) QueueBuilder { q.req.Wait = w; return q }

// Timeout is the long-poll timeout (default 30 s).
func (q QueueBuilder) Timeout(d time.Duration) QueueBuilder { q.req.Timeout = d; return q }

// AutoAck moves the cursor at delivery: at most once, no lease, no ack.
func (q QueueBuilder) AutoAck(a bool) QueueBuilder { q.req.AutoAck = a; return q }

// Concurrency is how many workers Each runs (default 1).
func (q QueueBuilder) Concurrency(n int) QueueBuilder { q.concurrency = max(n, 1); return q }

// Pop asks for messages.
func (q QueueBuilder) Pop(ctx context.Context) ([]Message, error) { return q.c.Pop(ctx, q.req) }

// PopBatch is Pop into b (see Batch): it reuses b's memory, and b.Cut says
// when the reply's byte budget left out messages that were ready.
func (q QueueBuilder) PopBatch(ctx context.Context, b *Batch) error {
	return q.c.PopBatch(ctx, q.req, b)
}

// Push stores payloads on the queue (on the builder's partition).
func (q QueueBuilder) Push(ctx context.Context, payloads ...[]byte) (PushResults, error) {
	items := make([]Item, len(payloads))
	for i, p := range payloads {
		items[i] = Item{Queue: q.req.Queue, Partition: q.req.Partition, Payload: p}
	}
	return q.c.Push(ctx, items...)
}

// Txn is a transaction: acks and pushes applied all or nothing, as one
// durable step. In a cluster that holds when its items fall in one shard
// (one broker applies it); across shards the client pushes, then acks,
// and a transaction sent again after a failure between the two pushes
// nothing twice within the dedup window (see txnAcross).
type Txn struct {
	c    *Client
	acks []Ack
	push []Item
}

// Transaction starts a transaction.
func (c *Client) Transaction() *Txn { return &Txn{c: c} }

// Ack adds an ack of m with status.
func (t *Txn) Ack(m Message, status AckStatus) *Txn {
	t.acks = append(t.acks, Ack{Message: m, Status: status})
	return t
}

// AckWithError adds a failed or dlq ack carrying an error text.
func (t *Txn) AckWithError(m Message, status AckStatus, errText string) *Txn {
	t.acks = append(t.acks, Ack{Message: m, Status: status, Error: errText})
	return t
}

// AddAck adds a, which names its message as a says (by offset, by
// transactionId or by id) and carries its own status and error text. In a
// cluster it is routed by a.Message's Queue and Partition, as Ack's are.
func (t *Txn) AddAck(a Ack) *Txn {
	t.acks = append(t.acks, a)
	return t
}

// Push adds a message to push.
func (t *Txn) Push(it Item) *Txn {
	t.push = append(t.push, it)
	return t
}

// TxnResult answers a transaction. Err is nil when it was applied; when an
// operation was refused nothing was applied and Err says which and why.
type TxnResult struct {
	Acks   []AckResult
	Pushes PushResults
	Err    error
}

// Commit sends the transaction. The error is for the call itself (a lost
// connection); a refused transaction is reported in TxnResult.Err.
func (t *Txn) Commit(ctx context.Context) (TxnResult, error) {
	req := protocol.TransactionRequest{Acks: ackItems(t.acks)}
	for _, it := range t.push {
		req.Pushes = append(req.Pushes, protocol.PushItem{Queue: it.Queue, Partition: it.Partition, TransactionID: it.TransactionID, TraceID: it.TraceID, Payload: it.Payload})
	}
	var reply protocol.TransactionReply
	p := t.c.pool
	wctx := ctx
	if t.c.cl != nil {
		var err error
		if p, err = t.c.cl.txnPool(ctx, t.acks, t.push); errors.Is(err, errAcrossShards) {
			return t.c.cl.txnAcross(ctx, t.acks, t.push)
		}
		if err != nil {
			return TxnResult{}, err
		}
		// Given up (ErrLeadMoved) when it waits at a leader that stopped.
		var end func()
		wctx, end = t.c.cl.watchFor(ctx, p, len(t.push)+len(t.acks), txnKey(t.acks, t.push), nil)
		defer end()
	}
	err := p.do(wctx, protocol.OpTransaction, func(dst []byte, id uint64) []byte { return protocol.AppendTransactionRequest(dst, id, &req) }, &reply)
	if err = movedOr(wctx, err); err != nil {
		return TxnResult{}, err
	}
	return TxnResult{Acks: appendAckResults(nil, reply.Acks), Pushes: pushResults(reply.Pushes, t.push), Err: codeErr(reply.Code, reply.Error)}, nil
}
