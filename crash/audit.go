package crash

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
)

// stored is a message found by the audit.
type stored struct {
	m client.Message
}

// audit runs the checks after the last restart (see doc.go).
func audit(ctx context.Context, c *client.Client, l *ledger, rep *Report, cfg *Config) error {
	// 1. Redeliveries caused by the last crash: pop what each group can
	// have now (no ack).
	for _, g := range []string{groupAcks, groupTxns} {
		for _, p := range l.partitions {
			msgs, err := popAll(ctx, c, queueName, p, g, false)
			if err != nil {
				return err
			}
			l.noteDeliveries(g, "final", msgs)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.summarizeLocked(rep)

	// 2. Every partition of both queues from offset 0, by a fresh group.
	auditGroup := fmt.Sprintf("audit-%d", time.Now().UnixNano())
	found := map[string][]stored{} // key -> where it is stored
	for _, q := range []string{queueName, outQueue} {
		for _, p := range l.partitions {
			msgs, err := popAll(ctx, c, q, p, auditGroup, true)
			if err != nil {
				return err
			}
			rep.Stored += len(msgs)
			lastByProducer := map[int]uint64{}
			for i, m := range msgs {
				if m.Offset != uint64(i) {
					rep.problem(&rep.OutOfOrder, "%s/%s: message %d of the partition has offset %d", q, p, i, m.Offset)
				}
				it := l.items[m.TransactionID]
				switch {
				case it == nil:
					rep.problem(&rep.Phantoms, "%s/%s offset %d: transactionId %q was never pushed (payload %.40q)", q, p, m.Offset, m.TransactionID, m.Payload)
					continue
				case it.queue != q || it.partition != p:
					rep.problem(&rep.Phantoms, "%s/%s offset %d: %s was pushed to %s/%s", q, p, m.Offset, it.key, it.queue, it.partition)
				case !bytes.Equal(m.Payload, it.payload):
					rep.problem(&rep.Phantoms, "%s/%s offset %d: %s has a payload that was never pushed (%.40q)", q, p, m.Offset, it.key, m.Payload)
				}
				found[it.key] = append(found[it.key], stored{m})
				if it.producer >= 0 {
					if last, ok := lastByProducer[it.producer]; ok && m.Offset < last {
						rep.problem(&rep.OutOfOrder, "%s/%s: producer %d's item %s stored before an earlier one", q, p, it.producer, it.key)
					}
					lastByProducer[it.producer] = m.Offset
				}
			}
			// Producer order: a producer's items in one partition are stored
			// in the order it pushed them.
			var keys []*item
			for _, m := range msgs {
				if it := l.items[m.TransactionID]; it != nil && it.producer >= 0 {
					keys = append(keys, it)
				}
			}
			for i := 1; i < len(keys); i++ {
				a, b := keys[i-1], keys[i]
				if a.producer == b.producer && a.n > b.n {
					rep.problem(&rep.OutOfOrder, "%s/%s: %s is stored before %s", q, p, b.key, a.key)
				}
			}
		}
	}
	for key, it := range l.items {
		where := found[key]
		if len(where) > 1 {
			rep.problem(&rep.Duplicates, "%s is stored %d times (offsets %d and %d)", key, len(where), where[0].m.Offset, where[1].m.Offset)
		}
		if it.answered {
			switch {
			case len(where) == 0:
				if it.producer < 0 {
					rep.problem(&rep.TxnAtomicity, "%s: a transaction answered success pushed it, and it is not stored", key)
				} else {
					rep.problem(&rep.Lost, "%s was answered queued (id %s, offset %d) and is not stored", key, it.id, it.offset)
				}
			case where[0].m.ID != it.id || where[0].m.Offset != it.offset:
				rep.problem(&rep.Lost, "%s was answered as id %s at offset %d but is stored as %s at offset %d",
					key, it.id, it.offset, where[0].m.ID, where[0].m.Offset)
			}
		} else if len(where) > 0 && allRefused(it.sends) {
			if it.producer < 0 {
				rep.problem(&rep.TxnAtomicity, "%s is stored although every transaction carrying it was refused", key)
			} else {
				rep.problem(&rep.Phantoms, "%s is stored although every push of it was answered failed", key)
			}
		}
	}

	// 3. Deliveries: only pushed messages, retry counts that match the
	// acks, nothing after a completing ack answered success.
	for k, ds := range l.deliveries {
		it := l.items[k.key]
		if it == nil {
			rep.problem(&rep.Phantoms, "group %s was delivered transactionId %q, never pushed", k.group, k.key)
			continue
		}
		if where := found[k.key]; len(where) > 0 {
			for _, d := range ds {
				if d.id != where[0].m.ID {
					rep.problem(&rep.Phantoms, "group %s was delivered %s as id %s; it is stored as %s", k.group, k.key, d.id, where[0].m.ID)
					break
				}
			}
		}
		acks := l.acks[k]
		for _, d := range ds {
			// An ack counts against a delivery if its answer came before
			// the delivery (it certainly took effect before), and may
			// count if it was sent before the delivery came (the pop
			// answer can overtake the ack answer: it does not wait for an
			// fsync).
			okFailed, sentFailed := 0, 0
			var done *ackEvent
			for i := range acks {
				a := &acks[i]
				if a.sent > d.seq {
					continue
				}
				if a.status == client.Failed {
					sentFailed++
				}
				if a.seq > d.seq {
					continue
				}
				if a.status == client.Failed && a.out == answeredOK && !a.dead {
					okFailed++
				}
				if a.out == answeredOK && (a.status == client.Completed || a.status == client.DLQ || a.dead) && done == nil {
					done = a
				}
			}
			if done != nil {
				rep.problem(&rep.Redelivered, "group %s: %s delivered again (to %s, retry count %d) after an ack %v answered success",
					k.group, k.key, d.worker, d.retries, done.status)
				break
			}
			if d.retries < okFailed || d.retries > sentFailed {
				rep.problem(&rep.RetryCounts, "group %s: %s delivered with retry count %d after %d failed acks answered success (%d sent)",
					k.group, k.key, d.retries, okFailed, sentFailed)
			}
		}
	}

	// 4. The dead-letter queue.
	entries, err := listDLQ(ctx, c, queueName)
	if err != nil {
		return err
	}
	rep.DLQEntries = len(entries)
	inDLQ := map[gk]int{}
	for _, e := range entries {
		k := gk{e.Message.Group, e.Message.TransactionID}
		inDLQ[k]++
		it := l.items[k.key]
		if it == nil || !bytes.Equal(e.Message.Payload, it.payload) {
			rep.problem(&rep.Phantoms, "DLQ entry for %q in group %s is not a pushed message", k.key, k.group)
			continue
		}
		asked := false
		for _, a := range l.acks[k] {
			if a.out != answeredRefused && (a.status == client.DLQ || a.status == client.Failed) {
				asked = true
			}
		}
		if !asked {
			rep.problem(&rep.DLQ, "DLQ entry for %s in group %s, but no dlq or failed ack was sent for it", k.key, k.group)
		}
		if e.RetryCount > retryLimit {
			rep.problem(&rep.DLQ, "DLQ entry for %s in group %s has retry count %d (limit %d)", k.key, k.group, e.RetryCount, retryLimit)
		}
	}
	for k, acks := range l.acks {
		dead := false
		for _, a := range acks {
			if a.out == answeredOK && a.dead {
				dead = true
			}
		}
		switch n := inDLQ[k]; {
		case dead && n == 0:
			rep.problem(&rep.DLQ, "group %s: %s was dead-lettered by an ack answered success and is not in the DLQ", k.group, k.key)
		case n > 1:
			rep.problem(&rep.DLQ, "group %s: %s is in the DLQ %d times", k.group, k.key, n)
		}
	}
	if len(rep.Problems) > 0 {
		sort.Strings(rep.Problems)
	}
	return nil
}

func allRefused(sends []outcome) bool {
	for _, s := range sends {
		if s != answeredRefused {
			return false
		}
	}
	return len(sends) > 0
}

// summarize fills the report's counters from the ledger.
func (l *ledger) summarize(rep *Report) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.summarizeLocked(rep)
}

func (l *ledger) summarizeLocked(rep *Report) {
	rep.Pushes, rep.Acknowledged, rep.Unanswered, rep.Deliveries = 0, 0, 0, 0
	for _, it := range l.items {
		if it.producer < 0 {
			continue
		}
		rep.Pushes++
		switch {
		case it.answered:
			rep.Acknowledged++
		case len(it.sends) == 0 || !hasAnswer(it.sends):
			rep.Unanswered++
		}
	}
	rep.LeaseRedeliveries = 0
	for k, ds := range l.deliveries {
		rep.Deliveries += len(ds)
		// A delivery after the first that no failed or retry ack sent
		// since the one before explains: the lease ended unacked (its
		// consumer's ack failed with its broker, or came too late).
		// Allowed (at least once), and counted.
		for i := 1; i < len(ds); i++ {
			explained := false
			for _, a := range l.acks[k] {
				if (a.status == client.Failed || a.status == client.Retry) && a.sent > ds[i-1].seq && a.sent < ds[i].seq {
					explained = true
					break
				}
			}
			if !explained {
				rep.LeaseRedeliveries++
			}
		}
	}
	clear(rep.AcksOK)
	for _, acks := range l.acks {
		for _, a := range acks {
			if a.out == answeredOK && !a.txn {
				rep.AcksOK[a.status.String()]++
			}
		}
	}
	rep.Txns = l.txns
	rep.CallErrors = l.callErrors
}

func hasAnswer(sends []outcome) bool {
	for _, s := range sends {
		if s != noAnswer {
			return true
		}
	}
	return false
}

// popAll reads everything a group can have now from one partition, without
// waiting. With autoAck the cursor moves (the audit reads each message
// once); without, one pop leases what it returns, so one pop of a large
// batch is all there is.
func popAll(ctx context.Context, c *client.Client, q, p, group string, autoAck bool) ([]client.Message, error) {
	var out []client.Message
	for {
		var msgs []client.Message
		var err error
		for attempt := 0; ; attempt++ {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			msgs, err = c.Queue(q).Partition(p).Group(group).Batch(5000).AutoAck(autoAck).Pop(cctx)
			cancel()
			if err == nil || attempt == 5 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if errors.Is(err, protocol.NewError(protocol.CodeQueueNotFound, "")) || errors.Is(err, protocol.NewError(protocol.CodePartitionNotFound, "")) {
			return out, nil // nothing was ever pushed there
		}
		if err != nil {
			return nil, fmt.Errorf("pop %s/%s for %s: %w", q, p, group, err)
		}
		out = append(out, msgs...)
		if len(msgs) == 0 || !autoAck {
			return out, nil
		}
	}
}

// listDLQ lists every dead-letter entry of queue q.
func listDLQ(ctx context.Context, c *client.Client, q string) ([]client.DLQEntry, error) {
	var out []client.DLQEntry
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		page, total, err := c.DLQ(cctx, client.DLQFilter{Queue: q, Limit: 1000, Offset: len(out)})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("list the DLQ: %w", err)
		}
		out = append(out, page...)
		if len(page) == 0 || len(out) >= total {
			return out, nil
		}
	}
}
