package engine

import "sync/atomic"

// pending counts the journal appends one call is waiting for and runs its
// completion when the last one is durable. It starts at one (the call itself,
// released by finish), so completions cannot run before the call has
// appended everything.
type pending struct {
	n    atomic.Int32
	err  atomic.Pointer[error]
	fn   func(error)
	done func(error) // the bound method value, made once
}

func newPending(fn func(error)) *pending {
	p := &pending{fn: fn}
	p.n.Store(1)
	p.done = p.commit
	return p
}

// hold registers one more append and returns its completion.
func (p *pending) hold() func(error) {
	p.n.Add(1)
	return p.done
}

func (p *pending) commit(err error) {
	if err != nil {
		p.err.CompareAndSwap(nil, &err)
	}
	if p.n.Add(-1) == 0 {
		var e error
		if ep := p.err.Load(); ep != nil {
			e = *ep
		}
		p.fn(e)
	}
}

// finish releases the call's own hold; it may run the completion at once.
func (p *pending) finish() { p.commit(nil) }
