package engine

import "sync"

// Pops on a queue that does not exist create nothing. Without Wait such a
// pop answers empty at once. With Wait it parks in one engine-wide list,
// by the queue's name, with no queue and no group (popCall.absent); a queue
// coming into being (a push, a configure, a transaction's push) wakes the
// pops parked on its name, and each then resolves the queue, becomes its
// group's first reader (creating the group, as any first pop of a group on
// an existing queue does) and goes on as a pop of that queue, parked in
// its group's list until it can answer or its timeout passes. So a
// consumer may start before any producer, and a mistyped name leaves no
// queue and no group behind.

type absentWaiters struct {
	mu      sync.Mutex
	version uint64 // moves whenever a queue comes into being
	list    []*waiter
}

// absentVersionBit marks the change counter of a pop waiting for its
// queue (version), so that it never equals a group's counter: a pop that
// resolves its queue reads its group's counter before it parks there.
const absentVersionBit = 1 << 63

// resolveAbsent makes c a pop of its queue once the queue exists: it
// reports whether c now has its queue and group. A waiter's lock orders
// the attempts of one call, so c changes under no other lock.
func (e *Engine) resolveAbsent(c *popCall) (bool, error) {
	q := e.queue(c.req.Queue)
	if q == nil {
		return false, nil
	}
	from := c.started // "new" means after this consumer started, not after the queue appeared
	if c.req.Subscription == SubFrom {
		from = c.req.From.UnixNano()
	}
	g, err := e.groupOrCreate(q, c.req.Group, c.req.Subscription, from)
	if err != nil {
		return false, err
	}
	c.q, c.g, c.absent = q, g, false
	return true, nil
}

// parkAbsent puts w in the list of pops waiting for their queue unless a
// queue came into being since ver; it reports whether it parked.
func (e *Engine) parkAbsent(w *waiter, ver uint64) bool {
	l := &e.absent
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.version|absentVersionBit != ver {
		return false
	}
	l.list = append(l.list, w)
	return true
}

func (e *Engine) dropAbsentWaiter(w *waiter) {
	l := &e.absent
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, x := range l.list {
		if x == w {
			l.list = append(l.list[:i], l.list[i+1:]...)
			return
		}
	}
}

// queueBorn wakes the pops waiting for a queue named name, which has just
// been put in the queue table. It may run under Engine.mu (the list's lock
// comes after it); the woken pops run on goroutines of their own.
func (e *Engine) queueBorn(name string) {
	l := &e.absent
	l.mu.Lock()
	l.version++
	var ws []*waiter
	keep := l.list[:0]
	for _, w := range l.list {
		if w.c.req.Queue == name {
			ws = append(ws, w)
		} else {
			keep = append(keep, w)
		}
	}
	clear(l.list[len(keep):])
	l.list = keep
	l.mu.Unlock()
	e.wake(ws)
}

// failAbsent answers every pop waiting for its queue with err.
func (e *Engine) failAbsent(err error) {
	l := &e.absent
	l.mu.Lock()
	ws := l.list
	l.list = nil
	l.mu.Unlock()
	for _, w := range ws {
		w.mu.Lock()
		if !w.finished {
			w.finish()
			w.c.done(nil, false, err)
		}
		w.mu.Unlock()
	}
}
