package engine

import (
	"context"
	"fmt"
)

// groupOrCreate returns the named group of q, creating it with the given
// subscription when it has never read q (from: SubFrom's time; for SubNew,
// a stamp to start after, or 0 for now). A new group learns which
// partitions already hold messages for it: once, not on every pop.
func (e *Engine) groupOrCreate(q *queue, name string, mode SubMode, from int64) (*group, error) {
	if g := q.group(name); g != nil {
		return g, nil
	}
	if err := checkName("consumer group", name, false); err != nil {
		return nil, err
	}
	q.mu.Lock()
	if g := q.gnames[name]; g != nil {
		q.mu.Unlock()
		return g, nil
	}
	stamp := e.newStamp()
	g := &group{q: q, name: own(name), mode: mode, created: stamp}
	switch mode {
	case SubNew:
		g.from = stamp
		if from != 0 {
			g.from = from
		}
	case SubFrom:
		g.from = from
	}
	if _, err := e.append(encodeGroup(q, g), nil); err != nil {
		q.mu.Unlock()
		return nil, err
	}
	e.addGroup(q, g)
	parts := append([]*partition(nil), q.parts...)
	q.mu.Unlock()
	var wakes []*waiter
	for _, p := range parts {
		if p == nil {
			continue
		}
		p.st().mu.Lock()
		e.notify(p, g, e.pgFor(p, g), &wakes)
		e.refreshDepth(p)
		p.st().mu.Unlock()
	}
	e.wake(wakes)
	return g, nil
}

// addGroup registers g in q; q.mu must be held.
func (e *Engine) addGroup(q *queue, g *group) {
	old := q.groupList()
	g.idx = len(old)
	gs := make([]*group, len(old)+1)
	copy(gs, old)
	gs[g.idx] = g
	q.groups.Store(&gs)
	q.gnames[g.name] = g
}

// DeleteGroup removes a consumer group from a queue (or from every queue when
// queueName is ""): its cursors, leases, retry counts and parked pops. It
// reports how many queues had the group, once their deletions are durable
// (or ctx ends).
func (e *Engine) DeleteGroup(ctx context.Context, queueName, name string) (int, error) {
	if err := e.check(); err != nil {
		return 0, err
	}
	var qs []*queue
	e.mu.RLock()
	if queueName != "" {
		if q := e.queues[queueName]; q != nil {
			qs = append(qs, q)
		}
	} else {
		for _, q := range e.queues {
			qs = append(qs, q)
		}
	}
	e.mu.RUnlock()
	if queueName != "" && len(qs) == 0 {
		return 0, fmt.Errorf("%w: %q", ErrQueueNotFound, queueName)
	}
	n := 0
	ch := make(chan error, 1)
	pend := newPending(func(err error) { ch <- err })
	for _, q := range qs {
		q.mu.Lock()
		g := q.gnames[name]
		if g == nil {
			q.mu.Unlock()
			continue
		}
		if _, err := e.appendHeld(encodeGroupDel(q, name), pend); err != nil {
			q.mu.Unlock()
			if n == 0 {
				return 0, err
			}
			pend.finish()
			if werr := waitDurable(ctx, ch); werr != nil {
				return n, werr
			}
			return n, err
		}
		e.removeGroup(q, g)
		parts := append([]*partition(nil), q.parts...)
		q.mu.Unlock()
		e.clearGroupState(g, parts)
		e.failWaiters(g, nil)
		n++
	}
	pend.finish()
	return n, waitDurable(ctx, ch)
}

// removeGroup unregisters g; q.mu must be held.
func (e *Engine) removeGroup(q *queue, g *group) {
	old := q.groupList()
	gs := make([]*group, len(old))
	copy(gs, old)
	gs[g.idx] = nil
	q.groups.Store(&gs)
	delete(q.gnames, g.name)
	g.mu.Lock()
	g.deleted.Store(true)
	clear(g.ready)
	g.ready, g.rhead = nil, 0
	g.mu.Unlock()
}

// clearGroupState drops g's leases, timers and cursors on every partition.
func (e *Engine) clearGroupState(g *group, parts []*partition) {
	for _, p := range parts {
		if p == nil {
			continue
		}
		p.st().mu.Lock()
		if g.idx < len(p.groups) {
			pg := &p.groups[g.idx]
			if a := pg.act; a != nil {
				if a.lease != nil {
					e.retireLease(a.lease)
				}
				p.st().wheel.cancel(&a.blockTimer)
			}
			*pg = pgState{cursor: noCursor}
		}
		e.refreshDepth(p)
		p.st().mu.Unlock()
	}
}
