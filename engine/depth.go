package engine

// Queue depth: the messages of a queue that are still to be done, counted
// from each partition's slowest group (from its oldest message when the
// queue has no group yet). maxSize caps it: a push that would go past it is
// refused for that item. Each partition remembers where its pending
// messages start (pendFrom), and the queue keeps the sum of next - pendFrom,
// adjusted whenever a partition's slowest cursor moves.

// pendingFrom is where p's pending messages start. Caller holds p's stripe.
func (p *partition) pendingFrom() uint64 {
	if min, any := p.minCursor(); any {
		return max(min, p.low())
	}
	return p.low()
}

// refreshDepth re-reads p's slowest cursor and moves the queue's depth by
// the difference. Caller holds p's stripe.
func (e *Engine) refreshDepth(p *partition) {
	from := min(p.pendingFrom(), p.next)
	if from != p.pendFrom {
		p.q.depth.Add(int64(p.pendFrom) - int64(from))
		p.pendFrom = from
	}
}

// reserve takes room for one message in q under maxSize; it reports false
// when the queue is full.
func (q *queue) reserve(maxSize int64) bool {
	if q.depth.Add(1) > maxSize {
		q.depth.Add(-1)
		return false
	}
	return true
}

// Depth is how many messages of the named queue are still to be done by its
// slowest group.
func (e *Engine) Depth(name string) (int64, error) {
	q := e.queue(name)
	if q == nil {
		return 0, ErrQueueNotFound
	}
	return q.depth.Load(), nil
}
