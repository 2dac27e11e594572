package engine

import "sort"

// Visibility options: delayedProcessing (a message is not deliverable until
// createdAt + delay; the messages after it in its partition wait behind it,
// so order holds) and windowBuffer (a partition is served only once its
// newest message is that old, so that a burst comes out as one batch). Both
// are driven by a timer per partition in its stripe's wheel: when the time
// comes, the partition's groups are told, as a commit would tell them.

// visibleEnd is the end of the messages of p a consumer may take now:
// the durable ones, minus those still inside the delay, and none while the
// window holds the partition back. wakeAt, when not 0, is when that changes.
// Caller holds p's stripe.
func (e *Engine) visibleEnd(p *partition) (end uint64, wakeAt int64) {
	o := p.q.options()
	end = p.durable
	if o.DelayedProcessing <= 0 && o.WindowBuffer <= 0 {
		return end, 0
	}
	now := e.clock.Now()
	if w := int64(o.WindowBuffer); w > 0 && p.lastTS+w > now && end > p.low() {
		return 0, p.lastTS + w
	}
	if d := int64(o.DelayedProcessing); d > 0 {
		cut := now - d
		i := sort.Search(len(p.chunks), func(i int) bool { return p.chunks[i].ts > cut })
		if i < len(p.chunks) && p.chunks[i].first < end {
			end = p.chunks[i].first
			wakeAt = p.chunks[i].ts + d
		}
	}
	return end, wakeAt
}

// ptimer wakes a partition's groups when delayed messages become visible or
// its window passes.
type ptimer struct {
	t timer
	p *partition
}

func (e *Engine) armPartition(p *partition, at int64) {
	if p.tm == nil {
		p.tm = &ptimer{p: p}
	}
	if p.tm.t.scheduled() && p.tm.t.when*int64(e.cfg.TimerTick) <= at {
		return // armed for sooner: firing re-arms it for what is left
	}
	p.st().wheel.schedule(&p.tm.t, at, p.tm)
}

func (pt *ptimer) fire(f *wheelFire) {
	e, p := f.e, pt.p
	if p.q.deleted.Load() {
		return
	}
	var wakes []*waiter
	for _, g := range p.q.groupList() {
		if g != nil {
			e.notify(p, g, e.pgFor(p, g), &wakes)
		}
	}
	if len(wakes) > 0 {
		f.after = append(f.after, func() { e.wake(wakes) })
	}
}
