package engine

import (
	"sort"
	"sync"
)

// Pops by namespace and task: PopRequest with no Queue but a Namespace
// and/or a Task takes messages from the queues whose options carry them.
// Higher-priority queues are served first; queues of equal priority take
// turns, so none starves the others. Such a pop's group is created on each
// matching queue it reads. A long poll by labels parks in one engine-wide
// list, woken by any queue that carries labels when it has something
// deliverable (Queen removed this route; Regent keeps it).

type labelWaiters struct {
	mu      sync.Mutex
	version uint64
	list    []*waiter
}

// version returns the change counter a parked pop compares before parking.
func (e *Engine) version(c *popCall) uint64 {
	if c.absent {
		e.absent.mu.Lock()
		defer e.absent.mu.Unlock()
		return e.absent.version | absentVersionBit
	}
	if c.byLabels() {
		e.labels.mu.Lock()
		defer e.labels.mu.Unlock()
		return e.labels.version
	}
	return c.g.readVersion()
}

func (c *popCall) matches(q *queue) bool {
	o := q.options()
	return (c.req.Namespace == "" || o.Namespace == c.req.Namespace) && (c.req.Task == "" || o.Task == c.req.Task)
}

// labelQueues lists the queues a pop by labels reads, in serving order.
func (e *Engine) labelQueues(c *popCall) []*queue {
	e.mu.RLock()
	var qs []*queue
	for _, q := range e.queues {
		if c.matches(q) {
			qs = append(qs, q)
		}
	}
	e.mu.RUnlock()
	sort.Slice(qs, func(i, j int) bool {
		pi, pj := qs[i].options().Priority, qs[j].options().Priority
		if pi != pj {
			return pi > pj
		}
		return qs[i].name < qs[j].name
	})
	// Take turns within each priority: rotate each run of equal priority.
	turn := int(e.labelTurn.Add(1))
	for i := 0; i < len(qs); {
		j := i + 1
		for j < len(qs) && qs[j].options().Priority == qs[i].options().Priority {
			j++
		}
		run := qs[i:j]
		k := turn % len(run)
		rotated := append(append([]*queue(nil), run[k:]...), run[:k]...)
		copy(run, rotated)
		i = j
	}
	return qs
}

// attemptLabels pops from the first matching queue that has something.
func (e *Engine) attemptLabels(c *popCall) ([]Message, *pending, error) {
	c.cut = false
	var from int64
	if c.req.Subscription == SubFrom {
		from = c.req.From.UnixNano()
	}
	for _, q := range e.labelQueues(c) {
		g, err := e.groupOrCreate(q, c.req.Group, c.req.Subscription, from)
		if err != nil {
			return nil, nil, err
		}
		sub := &popCall{req: c.req, q: q, g: g, deadline: c.deadline}
		sub.req.Queue = q.name
		msgs, pend, err := e.attempt(sub)
		if err != nil || len(msgs) > 0 {
			c.cut = sub.cut
			return msgs, pend, err
		}
	}
	return nil, nil, nil
}

// parkLabels puts w in the label list unless something changed since ver;
// it reports whether it parked.
func (e *Engine) parkLabels(w *waiter, ver uint64) bool {
	l := &e.labels
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.version != ver {
		return false
	}
	l.list = append(l.list, w)
	e.labelWaiting.Add(1)
	return true
}

func (e *Engine) dropLabelWaiter(w *waiter) {
	l := &e.labels
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, x := range l.list {
		if x == w {
			l.list = append(l.list[:i], l.list[i+1:]...)
			e.labelWaiting.Add(-1)
			return
		}
	}
}

// wakeLabels wakes one parked pop by labels that q matches, when q
// carries labels. Caller holds a stripe of q (the list's lock comes after).
func (e *Engine) wakeLabels(q *queue, wakes *[]*waiter) {
	if o := q.options(); o.Namespace == "" && o.Task == "" {
		return
	}
	l := &e.labels
	l.mu.Lock()
	defer l.mu.Unlock()
	l.version++
	for i, w := range l.list {
		if w.c.matches(q) {
			l.list = append(l.list[:i], l.list[i+1:]...)
			e.labelWaiting.Add(-1)
			*wakes = append(*wakes, w)
			return
		}
	}
}
