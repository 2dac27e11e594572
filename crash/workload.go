package crash

import (
	"context"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/regentmq/regent/client"
)

const (
	queueName  = "crash"
	outQueue   = "crash-out"
	groupAcks  = "g1"
	groupTxns  = "g2"
	retryLimit = 2
	callTime   = 2 * time.Second
)

// outcome of one send of an item or one ack.
type outcome uint8

const (
	answeredOK      outcome = iota + 1 // queued, duplicate, or ack success
	answeredRefused                    // failed item, refused ack or transaction
	noAnswer                           // the call failed: it may or may not have taken effect
)

// item is one message a producer (or a transaction) pushed.
type item struct {
	key       string
	queue     string
	partition string
	payload   []byte
	producer  int // -1 for transaction outputs
	n         int
	sends     []outcome
	// From the first answer queued or duplicate: where it must be stored.
	answered bool
	id       client.ID
	offset   uint64
}

// delivery is one message handed to a group.
type delivery struct {
	seq     uint64
	retries int
	id      client.ID
	worker  string
}

// ackEvent is one ack sent for a message in a group (alone, or in a
// transaction).
type ackEvent struct {
	sent   uint64 // taken before the request went out
	seq    uint64 // taken when the answer (or the failure) came back
	status client.AckStatus
	out    outcome
	dead   bool // answered success with DeadLettered
	txn    bool
}

type gk struct{ group, key string }

// ledger records everything the workload did and every answer, in the
// order the answers arrived (seq).
type ledger struct {
	seq        atomic.Uint64
	partitions []string

	mu         sync.Mutex
	items      map[string]*item
	deliveries map[gk][]delivery
	acks       map[gk][]ackEvent
	callErrors int
	txns       int
	nAnswers   atomic.Int64
}

func newLedger(partitions int) *ledger {
	l := &ledger{items: map[string]*item{}, deliveries: map[gk][]delivery{}, acks: map[gk][]ackEvent{}}
	for i := 0; i < partitions; i++ {
		l.partitions = append(l.partitions, fmt.Sprintf("p%d", i))
	}
	return l
}

func (l *ledger) answers() int64 { return l.nAnswers.Load() }

func (l *ledger) callError() {
	l.mu.Lock()
	l.callErrors++
	l.mu.Unlock()
}

// payloadFor makes an item's payload: its key, filler, and a CRC of both,
// so that a damaged payload can never pass for a pushed one.
func payloadFor(key string, r *rand.Rand) []byte {
	var b strings.Builder
	b.WriteString(key)
	b.WriteByte('|')
	n := 8 + r.IntN(200)
	for i := 0; i < n; i++ {
		b.WriteByte("abcdefghijklmnopqrstuvwxyz0123456789"[r.IntN(36)])
	}
	s := b.String()
	return fmt.Appendf(nil, "%s|%08x", s, crc32.ChecksumIEEE([]byte(s)))
}

func startWorkers(ctx context.Context, wg *sync.WaitGroup, c *client.Client, l *ledger, cfg *Config) {
	for i := 0; i < cfg.Producers; i++ {
		r := rand.New(rand.NewPCG(cfg.Seed, uint64(100+i)))
		wg.Add(1)
		rate := float64(cfg.PushRate) / float64(cfg.Producers)
		go func() { defer wg.Done(); producer(ctx, c, l, i, r, rate) }()
	}
	for i := 0; i < cfg.Consumers; i++ {
		r := rand.New(rand.NewPCG(cfg.Seed, uint64(200+i)))
		wg.Add(1)
		go func() { defer wg.Done(); consumer(ctx, c, l, fmt.Sprint("c", i), r) }()
	}
	for i := 0; i < cfg.TxnWorkers; i++ {
		r := rand.New(rand.NewPCG(cfg.Seed, uint64(300+i)))
		wg.Add(1)
		go func() { defer wg.Done(); txnWorker(ctx, c, l, fmt.Sprint("t", i), r) }()
	}
}

// pause waits a little after a failed call (the broker is probably down).
func pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(20 * time.Millisecond):
	}
}

// producer pushes batches; a batch whose push got no answer is sent again,
// same items, until it is answered (or the run ends).
func producer(ctx context.Context, c *client.Client, l *ledger, p int, r *rand.Rand, rate float64) {
	n := 0
	next := time.Now() // when the next batch may go (PushRate)
	for ctx.Err() == nil {
		if wait := time.Until(next); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		} else if wait < -100*time.Millisecond {
			next = time.Now() // no burst to catch up after the broker was down
		}
		batch := make([]*item, 1+r.IntN(4))
		next = next.Add(time.Duration(float64(len(batch)) / rate * float64(time.Second)))
		l.mu.Lock()
		for i := range batch {
			key := fmt.Sprintf("P%d-%d", p, n)
			it := &item{key: key, queue: queueName, partition: l.partitions[r.IntN(len(l.partitions))], payload: payloadFor(key, r), producer: p, n: n}
			l.items[key] = it
			batch[i] = it
			n++
		}
		l.mu.Unlock()
		items := make([]client.Item, len(batch))
		for i, it := range batch {
			items[i] = client.Item{Queue: it.queue, Partition: it.partition, TransactionID: it.key, Payload: it.payload}
		}
		for ctx.Err() == nil {
			cctx, cancel := context.WithTimeout(ctx, callTime)
			res, err := c.Push(cctx, items...)
			cancel()
			if err != nil || len(res) != len(items) {
				l.mu.Lock()
				for _, it := range batch {
					it.sends = append(it.sends, noAnswer)
				}
				l.callErrors++
				l.mu.Unlock()
				pause(ctx)
				continue
			}
			l.nAnswers.Add(1)
			l.mu.Lock()
			for i, it := range batch {
				l.notePush(it, res[i])
			}
			l.mu.Unlock()
			break
		}
	}
}

// notePush records the answer for one item. l.mu is held.
func (l *ledger) notePush(it *item, res client.PushResult) {
	switch res.Status {
	case client.PushQueued, client.PushDuplicate:
		it.sends = append(it.sends, answeredOK)
		if !it.answered {
			it.answered, it.id, it.offset = true, res.MessageID, res.Offset
		}
	default:
		it.sends = append(it.sends, answeredRefused)
	}
}

// noteDeliveries records a pop's messages for a group.
func (l *ledger) noteDeliveries(group, worker string, msgs []client.Message) {
	l.nAnswers.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range msgs {
		k := gk{group, m.TransactionID}
		l.deliveries[k] = append(l.deliveries[k], delivery{seq: l.seq.Add(1), retries: m.RetryCount, id: m.ID, worker: worker})
	}
}

var ackStatuses = []struct {
	st     client.AckStatus
	weight int
}{{client.Completed, 80}, {client.Failed, 8}, {client.Retry, 6}, {client.DLQ, 6}}

func pickStatus(r *rand.Rand) client.AckStatus {
	x := r.IntN(100)
	for _, s := range ackStatuses {
		if x < s.weight {
			return s.st
		}
		x -= s.weight
	}
	return client.Completed
}

// consumer pops for group g1 and acks each pop in offset order, in one
// request, with a random status per message.
func consumer(ctx context.Context, c *client.Client, l *ledger, name string, r *rand.Rand) {
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, callTime)
		msgs, err := c.Queue(queueName).Group(groupAcks).Batch(1 + r.IntN(10)).Wait(true).Timeout(200 * time.Millisecond).Pop(cctx)
		cancel()
		if err != nil {
			l.callError()
			pause(ctx)
			continue
		}
		if len(msgs) == 0 {
			continue
		}
		l.noteDeliveries(groupAcks, name, msgs)
		if r.IntN(100) < 2 {
			continue // walk away: the lease runs out and the messages come back
		}
		acks := make([]client.Ack, len(msgs))
		for i, m := range msgs {
			acks[i] = client.Ack{Message: m, Status: pickStatus(r), Error: "crash harness " + name}
		}
		sent := l.seq.Add(1)
		cctx, cancel = context.WithTimeout(ctx, callTime)
		res, err := c.AckEach(cctx, acks...)
		cancel()
		l.mu.Lock()
		if err != nil || len(res) != len(acks) {
			l.callErrors++
			for _, a := range acks {
				k := gk{groupAcks, a.Message.TransactionID}
				l.acks[k] = append(l.acks[k], ackEvent{sent: sent, seq: l.seq.Add(1), status: a.Status, out: noAnswer})
			}
		} else {
			l.nAnswers.Add(1)
			for i, a := range acks {
				k := gk{groupAcks, a.Message.TransactionID}
				ev := ackEvent{sent: sent, seq: l.seq.Add(1), status: a.Status, out: answeredRefused}
				if res[i].Err == nil {
					ev.out, ev.dead = answeredOK, res[i].DeadLettered
				}
				l.acks[k] = append(l.acks[k], ev)
			}
		}
		l.mu.Unlock()
		if err != nil {
			pause(ctx)
		}
	}
}

// txnWorker pops for group g2 and handles each message with a transaction:
// ack it completed and push a result to queue crash-out.
func txnWorker(ctx context.Context, c *client.Client, l *ledger, name string, r *rand.Rand) {
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, callTime)
		msgs, err := c.Queue(queueName).Group(groupTxns).Batch(1 + r.IntN(5)).Wait(true).Timeout(200 * time.Millisecond).Pop(cctx)
		cancel()
		if err != nil {
			l.callError()
			pause(ctx)
			continue
		}
		if len(msgs) == 0 {
			continue
		}
		l.noteDeliveries(groupTxns, name, msgs)
		for _, m := range msgs {
			key := "T-" + m.TransactionID
			l.mu.Lock()
			out := l.items[key]
			if out == nil {
				out = &item{key: key, queue: outQueue, partition: m.Partition, payload: payloadFor(key, r), producer: -1}
				l.items[key] = out
			}
			l.mu.Unlock()
			sent := l.seq.Add(1)
			cctx, cancel := context.WithTimeout(ctx, callTime)
			res, err := c.Transaction().Ack(m, client.Completed).
				Push(client.Item{Queue: out.queue, Partition: out.partition, TransactionID: key, Payload: out.payload}).Commit(cctx)
			cancel()
			k := gk{groupTxns, m.TransactionID}
			l.mu.Lock()
			ev := ackEvent{sent: sent, seq: l.seq.Add(1), status: client.Completed, txn: true}
			switch {
			case err != nil:
				ev.out = noAnswer
				out.sends = append(out.sends, noAnswer)
				l.callErrors++
			case res.Err != nil || len(res.Pushes) != 1:
				ev.out = answeredRefused
				out.sends = append(out.sends, answeredRefused)
				if len(res.Pushes) == 1 && res.Pushes[0].Err == nil && res.Pushes[0].Status != client.PushFailed {
					// A transaction across a cluster's shards pushes, then
					// acks: its ack was refused, its push answered queued.
					l.notePush(out, res.Pushes[0])
				}
			default:
				ev.out = answeredOK
				l.txns++
				l.notePush(out, res.Pushes[0])
			}
			l.acks[k] = append(l.acks[k], ev)
			l.mu.Unlock()
			if err == nil {
				l.nAnswers.Add(1)
			}
			if ev.out != answeredOK {
				break // the lease is gone (or the broker): the rest comes back
			}
		}
	}
}
