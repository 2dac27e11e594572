package engine

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// ConfigureResult answers Configure.
type ConfigureResult struct {
	QueueID     UUID // the queue's id: none of its partitions' ids (queueUUID)
	PartitionID UUID // the id of the queue's Default partition
	Options     QueueOptions
	Created     bool
}

// Configure creates queue name or replaces all of its options (an option
// left at its default in o goes back to its default). Like Queen, it also
// creates the queue's Default partition. Queue, options and partition are
// one journal record, and Configure returns once it is durable (or ctx
// ends; the change then still takes effect).
func (e *Engine) Configure(ctx context.Context, name string, o QueueOptions) (ConfigureResult, error) {
	if err := e.check(); err != nil {
		return ConfigureResult{}, err
	}
	if err := checkName("queue", name, true); err != nil {
		return ConfigureResult{}, err
	}
	if err := o.Validate(); err != nil {
		return ConfigureResult{}, err
	}
	ch := make(chan error, 1)
	res, err := e.configure(name, func(opts *QueueOptions) { *opts = o }, func(err error) { ch <- err })
	if err != nil {
		return ConfigureResult{}, err
	}
	return res, waitDurable(ctx, ch)
}

// UpdateQueue changes some of queue name's options and keeps the others:
// change gets the queue's options as they are (a queue that does not exist
// yet: DefaultQueueOptions, and it is created) and changes what it sets.
// Read and write are one step under the engine's lock, so two updates of
// different options never undo each other (a read, then a Configure, can).
// change runs under that lock: it must not call the engine. The result is
// checked as Configure's is, and journaled the same way.
func (e *Engine) UpdateQueue(ctx context.Context, name string, change func(*QueueOptions)) (ConfigureResult, error) {
	if err := e.check(); err != nil {
		return ConfigureResult{}, err
	}
	if err := checkName("queue", name, true); err != nil {
		return ConfigureResult{}, err
	}
	ch := make(chan error, 1)
	res, err := e.configure(name, change, func(err error) { ch <- err })
	if err != nil {
		return ConfigureResult{}, err
	}
	return res, waitDurable(ctx, ch)
}

// configure journals and applies a Configure: set makes the new options
// from the queue's current ones (DefaultQueueOptions for a new queue); done
// runs once it is durable.
func (e *Engine) configure(name string, set func(*QueueOptions), done func(error)) (ConfigureResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.queues[name]
	opts := DefaultQueueOptions()
	if q != nil {
		opts = *q.options()
	}
	set(&opts)
	if err := opts.Validate(); err != nil {
		return ConfigureResult{}, err
	}
	o := &opts
	created := q == nil
	if created {
		q = e.newQueue(name, newQueueID(), e.newStamp(), o) // known to nobody until journaled
		for e.queuesID[q.id] != nil {
			q.id = newQueueID()
		}
	}
	subs := [][]byte{encodeQueue(q, o)}
	p, made, err := e.partitionOrCreate(q, DefaultPartition)
	if err != nil {
		return ConfigureResult{}, err
	}
	st := p.st()
	st.mu.Lock()
	var stamp int64
	if made && p.next == 0 {
		// The empty partition is journaled so that its id survives a
		// restart; its creation time counts as activity (see forgettable).
		stamp = e.newStamp()
		subs = append(subs, appendPushHeader(nil, recPush, p, 0, stamp, 0, "", 0))
	}
	if _, err := e.append(encodeTxn(subs), done); err != nil {
		st.mu.Unlock()
		if made && !created {
			e.dropUnused(p)
		}
		return ConfigureResult{}, err
	}
	if stamp != 0 {
		p.lastTS = stamp
	}
	st.mu.Unlock()
	q.setOptions(o)
	if created {
		e.queues[q.name] = q
		e.queuesID[q.id] = q
		e.queueBorn(q.name)
	}
	return ConfigureResult{QueueID: queueUUID(q.id), PartitionID: p.id(), Options: *o, Created: created}, nil
}

// waitDurable waits for a journal commit's answer, or for ctx.
func waitDurable(ctx context.Context, ch <-chan error) error {
	select {
	case err := <-ch:
		if err != nil {
			return fmt.Errorf("%w: %w", ErrJournal, err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// DeleteQueue removes a queue with its partitions, messages, groups and
// dead-letter entries. It reports whether the queue existed, once the
// deletion is durable (or ctx ends).
func (e *Engine) DeleteQueue(ctx context.Context, name string) (bool, error) {
	if err := e.check(); err != nil {
		return false, err
	}
	e.mu.Lock()
	q := e.queues[name]
	if q == nil {
		e.mu.Unlock()
		return false, nil
	}
	ch := make(chan error, 1)
	if _, err := e.append(encodeQueueDel(q.id), func(err error) { ch <- err }); err != nil {
		e.mu.Unlock()
		return false, err
	}
	e.dropQueue(q)
	e.mu.Unlock()
	for _, g := range q.groupList() {
		if g != nil {
			g.deleted.Store(true)
			e.failWaiters(g, nil)
		}
	}
	return true, waitDurable(ctx, ch)
}

// SeekTarget says where Seek moves a group: to the end (past every message)
// or to a time (the first message created after it).
type SeekTarget struct {
	ToEnd bool
	Time  time.Time
}

// Seek moves group's cursor on every partition of queueName (or only on
// partition, when not ""), releasing its leases and forgetting its retry
// counts there. Every partition moves, or (when the journal refuses the
// record) none does. It returns how many partitions moved, once the move is
// durable (or ctx ends). A seek creates nothing: it fails with
// ErrQueueNotFound, ErrGroupNotFound (a group that has never read the
// queue) or ErrPartitionNotFound, also when the queue or the group is
// deleted while it runs.
func (e *Engine) Seek(ctx context.Context, queueName, groupName, partName string, to SeekTarget) (int, error) {
	if err := e.check(); err != nil {
		return 0, err
	}
	q := e.queue(queueName)
	if q == nil {
		return 0, fmt.Errorf("%w: %q", ErrQueueNotFound, queueName)
	}
	if groupName == "" {
		groupName = QueueModeGroup
	}
	g := q.group(groupName)
	if g == nil {
		return 0, fmt.Errorf("%w: %s has never read %q", ErrGroupNotFound, groupLabel(groupName), queueName)
	}
	var parts []*partition
	q.mu.RLock()
	if partName != "" {
		if p := q.byName.get(partName); p != nil {
			parts = append(parts, p)
		}
	} else {
		for _, p := range q.parts {
			if p != nil {
				parts = append(parts, p)
			}
		}
	}
	q.mu.RUnlock()
	if partName != "" && len(parts) == 0 {
		return 0, fmt.Errorf("%w: %s/%s", ErrPartitionNotFound, queueName, partName)
	}
	unlock := e.lockStripesOf(parts)
	// A deletion of the queue or the group marks it before it clears the
	// stripes, which it waits for: checked here, the seek either comes
	// before the clearing or sees the mark.
	if q.deleted.Load() {
		unlock()
		return 0, fmt.Errorf("%w: %q was deleted", ErrQueueNotFound, queueName)
	}
	if g.deleted.Load() {
		unlock()
		return 0, fmt.Errorf("%w: %s was deleted from %q", ErrGroupNotFound, groupLabel(groupName), queueName)
	}
	ts := to.Time.UnixNano()
	cursors := make([]uint64, len(parts))
	subs := make([][]byte, 0, len(parts))
	for i, p := range parts {
		if p.gone {
			continue
		}
		if to.ToEnd {
			cursors[i] = p.next
		} else {
			cursors[i] = p.firstAfter(ts)
		}
		// The seek ends the group's leases (stated, with Config.JournalLeases).
		ef := effect{queueID: q.id, seq: p.seq, group: g.name, cursor: cursors[i], withLease: e.cfg.JournalLeases}
		subs = append(subs, appendEffect(make([]byte, 0, 32+len(g.name)), &ef))
	}
	if len(subs) == 0 {
		unlock()
		return 0, nil
	}
	ch := make(chan error, 1)
	if _, err := e.append(encodeTxn(subs), func(err error) { ch <- err }); err != nil {
		unlock()
		return 0, err
	}
	var wakes []*waiter
	for i, p := range parts {
		if p.gone {
			continue
		}
		pg := e.pgFor(p, g)
		pg.cursor = cursors[i]
		if a := pg.act; a != nil {
			if a.lease != nil {
				e.endLease(p, pg, a.lease, &wakes)
			}
			a.retries = nil
			a.blockedUntil = 0
			p.st().wheel.cancel(&a.blockTimer)
		}
		e.notify(p, g, pg, &wakes)
		e.shrinkTail(p, false)
	}
	unlock()
	e.wake(wakes)
	return len(subs), waitDurable(ctx, ch)
}

// lockStripesOf locks the stripes of parts, each once, in stripe order (the
// order every multi-stripe operation takes them in), and returns the unlock.
func (e *Engine) lockStripesOf(parts []*partition) (unlock func()) {
	seen := make(map[*stripe]bool)
	var sts []*stripe
	for _, p := range parts {
		if s := p.st(); !seen[s] {
			seen[s] = true
			sts = append(sts, s)
		}
	}
	base := &e.stripes[0]
	sort.Slice(sts, func(i, j int) bool { return stripeIndex(base, sts[i]) < stripeIndex(base, sts[j]) })
	for _, s := range sts {
		s.mu.Lock()
	}
	return func() {
		for i := len(sts) - 1; i >= 0; i-- {
			sts[i].mu.Unlock()
		}
	}
}

// firstAfter is the first offset of p created after ts (p.next if none).
func (p *partition) firstAfter(ts int64) uint64 {
	for i := range p.chunks {
		if p.chunks[i].ts > ts {
			return p.chunks[i].first
		}
	}
	return p.next
}
