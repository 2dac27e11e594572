package engine

import (
	"fmt"
	"time"
)

// ConfigureResult answers Configure.
type ConfigureResult struct {
	QueueID     UUID // the queue's id (a partition id with sequence 0's queue half)
	PartitionID UUID // the id of the queue's Default partition
	Options     QueueOptions
	Created     bool
}

// Configure creates queue name or replaces all of its options (an option
// left at its default in o goes back to its default). Like Queen, it also
// creates the queue's Default partition.
func (e *Engine) Configure(name string, o QueueOptions) (ConfigureResult, error) {
	if err := e.check(); err != nil {
		return ConfigureResult{}, err
	}
	if err := checkName("queue", name, true); err != nil {
		return ConfigureResult{}, err
	}
	if err := o.Validate(); err != nil {
		return ConfigureResult{}, err
	}
	e.mu.Lock()
	q := e.queues[name]
	created := q == nil
	if created {
		q = e.newQueue(name, newQueueID(), e.newStamp(), &o)
		for e.queuesID[q.id] != nil {
			q.id = newQueueID()
		}
	}
	if _, err := e.append(encodeQueue(q, &o), nil); err != nil {
		e.mu.Unlock()
		return ConfigureResult{}, err
	}
	q.setOptions(&o)
	if created {
		e.queues[q.name] = q
		e.queuesID[q.id] = q
	}
	e.mu.Unlock()
	res := ConfigureResult{QueueID: partitionID(q.id, 0), Options: o, Created: created}
	p, made, err := e.partitionOrCreate(q, DefaultPartition)
	if err != nil {
		return res, err
	}
	if made {
		// Journal the empty partition so that its id survives a restart.
		if err := e.journalPartition(p); err != nil {
			return res, err
		}
	}
	res.PartitionID = p.id()
	return res, nil
}

// journalPartition records the creation of an empty partition.
func (e *Engine) journalPartition(p *partition) error {
	p.st().mu.Lock()
	defer p.st().mu.Unlock()
	if p.next > 0 {
		return nil
	}
	stamp := e.newStamp() // its creation time counts as activity (see forgettable)
	if _, err := e.append(appendPushHeader(nil, recPush, p, 0, stamp, 0, "", 0), nil); err != nil {
		return err
	}
	p.lastTS = stamp
	return nil
}

// DeleteQueue removes a queue with its partitions, messages, groups and
// dead-letter entries. It reports whether the queue existed.
func (e *Engine) DeleteQueue(name string) (bool, error) {
	if err := e.check(); err != nil {
		return false, err
	}
	e.mu.Lock()
	q := e.queues[name]
	if q == nil {
		e.mu.Unlock()
		return false, nil
	}
	if _, err := e.append(encodeQueueDel(q.id), nil); err != nil {
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
	return true, nil
}

// SeekTarget says where Seek moves a group: to the end (past every message)
// or to a time (the first message created after it).
type SeekTarget struct {
	ToEnd bool
	Time  time.Time
}

// Seek moves group's cursor on every partition of queueName (or only on
// partition, when not ""), releasing its leases and forgetting its retry
// counts there. It returns how many partitions moved.
func (e *Engine) Seek(queueName, groupName, partName string, to SeekTarget) (int, error) {
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
	g, err := e.groupOrCreate(q, groupName, SubAll, 0)
	if err != nil {
		return 0, err
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
	ts := to.Time.UnixNano()
	pend := newPending(nil)
	ch := make(chan error, 1)
	pend.fn = func(err error) { ch <- err }
	n := 0
	var wakes []*waiter
	for _, p := range parts {
		p.st().mu.Lock()
		pg := e.pgFor(p, g)
		if to.ToEnd {
			pg.cursor = p.next
		} else {
			pg.cursor = p.firstAfter(ts)
		}
		if a := pg.act; a != nil {
			if a.lease != nil {
				e.endLease(p, pg, a.lease, &wakes)
			}
			a.retries = nil
			a.blockedUntil = 0
			p.st().wheel.cancel(&a.blockTimer)
		}
		_, err := e.appendHeld(e.effectRecord(p, g, pg, nil), pend)
		e.notify(p, g, pg, &wakes)
		e.shrinkTail(p, false)
		p.st().mu.Unlock()
		if err != nil {
			pend.finish()
			return n, err
		}
		n++
	}
	e.wake(wakes)
	pend.finish()
	return n, <-ch
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
