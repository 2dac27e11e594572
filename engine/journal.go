package engine

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"
)

// Journal is where the engine makes its changes durable. The log package's
// *log.Log implements it; tests may use an in-memory one. Positions are
// opaque, increasing uint64s.
type Journal interface {
	// Append copies rec into the journal's current group commit and returns
	// its position at once; done is called exactly once, from the journal's
	// committer, when rec is durable (or failed). done must not block.
	// Append never waits: the engine appends while it holds partition
	// locks that done callbacks take. It refuses a record it cannot take
	// now, keeping nothing of it, with an error matching syscall.EAGAIN
	// (the journal is behind), syscall.ENOSPC (the disk is full) or
	// syscall.EMSGSIZE (the record is too large); any other error is a
	// failure of the journal, which Err then reports.
	Append(rec []byte, done func(error)) (uint64, error)
	// Read returns a copy of the record at pos.
	Read(pos uint64) ([]byte, error)
	// Replay calls fn for every record after position after, in order.
	Replay(after uint64, fn func(pos uint64, rec []byte) error) error
	// LoadSnapshot returns the newest snapshot and the position it covers.
	LoadSnapshot() (pos uint64, data []byte, ok bool, err error)
	// WriteSnapshot stores a snapshot covering every record up to pos.
	WriteSnapshot(pos uint64, data []byte) error
	// Release lets the journal drop what the engine no longer needs: every
	// record up to covered is in an older snapshot (0: none), which stays a
	// fallback, so what a replay after covered reads stays; the record at
	// live is the oldest that holds messages still kept (0: none), and it
	// stays. The journal picks what goes (whole segments, for the log).
	Release(covered, live uint64) error
	// OldestSegment returns the positions [from, to) of the records the
	// journal would drop first, and whether Release could drop them at all
	// (something follows them). The engine copies the few live records in
	// there forward (compact.go).
	OldestSegment() (from, to uint64, ok bool)
	// Err reports why the journal refuses records now: a failure (a write or
	// fsync that failed; sticky), or a passing condition: an error matching
	// syscall.ENOSPC (disk full) or syscall.EAGAIN (out of descriptors).
	Err() error
	// Stalled returns an error when records have waited longer than after
	// without the journal writing any (a stuck disk or committer).
	Stalled(after time.Duration) error
}

// check refuses changes after Close or after the journal failed.
//
// While the journal reports a full disk (an error matching syscall.ENOSPC:
// the log's ErrNoSpace) changes are refused with ErrJournal wrapping it, and
// while it reports a resource short that comes back (syscall.EAGAIN: the
// process out of descriptors) with ErrOverloaded; both are accepted again
// once the journal writes again, and nothing else about the engine fails.
// Any other journal error is a failure until restarted.
func (e *Engine) check() error {
	if e.closed.Load() {
		return ErrClosed
	}
	if p := e.failErr.Load(); p != nil {
		return *p
	}
	if err := e.j.Err(); err != nil {
		switch {
		case errors.Is(err, ErrDeposed):
			return err
		case errors.Is(err, syscall.ENOSPC):
			return fmt.Errorf("%w: %w", ErrJournal, err)
		case errors.Is(err, syscall.EAGAIN): // short of a resource that comes back (descriptors)
			return fmt.Errorf("%w: %w", ErrOverloaded, err)
		}
		e.fail(err)
		return *e.failErr.Load()
	}
	return nil
}

func (e *Engine) fail(err error) {
	werr := fmt.Errorf("%w: %w", ErrJournal, err)
	if e.failErr.CompareAndSwap(nil, &werr) {
		e.log.Error("journal failed; the engine refuses changes until restarted", "err", err)
	}
}

// append journals rec and tracks the last position (for snapshots). done,
// when not nil, runs once rec is durable. It never waits (the journal
// refuses what it cannot take now): callers may hold any engine lock.
func (e *Engine) append(rec []byte, done func(error)) (uint64, error) {
	pos, err := e.j.Append(rec, done)
	if err != nil {
		return 0, e.refused(err)
	}
	e.sinceSnap.Add(int64(len(rec)))
	for {
		last := e.lastPos.Load()
		if pos <= last || e.lastPos.CompareAndSwap(last, pos) {
			return pos, nil
		}
	}
}

// refused turns the journal's refusal of one record into that record's
// error. The journal behind (syscall.EAGAIN) is ErrOverloaded, a full disk
// (syscall.ENOSPC) ErrJournal, and a record too large for the journal
// (syscall.EMSGSIZE) ErrTooLarge: each passes, and fails only the request
// that made the record. The engine fails for good only when the journal
// itself reports a failure (Journal.Err).
func (e *Engine) refused(err error) error {
	switch {
	case errors.Is(err, syscall.EAGAIN):
		return fmt.Errorf("%w: %w", ErrOverloaded, err)
	case errors.Is(err, syscall.EMSGSIZE):
		return fmt.Errorf("%w: %w", ErrTooLarge, err)
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("%w: %w", ErrJournal, err)
	case errors.Is(err, ErrDeposed):
		return err
	}
	if jerr := e.j.Err(); jerr != nil && !errors.Is(jerr, syscall.ENOSPC) && !errors.Is(jerr, syscall.EAGAIN) && !errors.Is(jerr, ErrDeposed) {
		e.fail(jerr)
	}
	return fmt.Errorf("%w: %w", ErrJournal, err)
}

// appendHeld journals rec as one of the appends pend holds. A record the
// journal refuses is that part's error only: pend's completion does not see
// it (the caller answers for the part, undoes what it changed, and fails the
// whole call only if nothing of it was kept).
func (e *Engine) appendHeld(rec []byte, pend *pending) (uint64, error) {
	done := pend.hold()
	pos, err := e.append(rec, done)
	if err != nil {
		done(nil)
	}
	return pos, err
}

// isRefusal reports whether err is the journal refusing one record (see
// refused): the request may be tried again, nothing of it was kept.
func isRefusal(err error) bool {
	return errors.Is(err, ErrOverloaded) || errors.Is(err, ErrJournal) || errors.Is(err, ErrTooLarge) || errors.Is(err, ErrDeposed)
}

// effectRecord encodes pg's state as an effect record, with dead-letter
// entries filed by the change.
func (e *Engine) effectRecord(p *partition, g *group, pg *pgState, dead []deadEntry) []byte {
	ef := effect{queueID: p.q.id, seq: p.seq, group: g.name, cursor: pg.cursor, dead: dead}
	if a := pg.act; a != nil {
		ef.retries = a.retries
		ef.blockedUntil = a.blockedUntil
	}
	size := 64 + len(g.name) + 4*len(ef.retries)
	if e.cfg.JournalLeases {
		ef.withLease, ef.lease = true, leaseRecOf(pg)
		if ef.lease != nil {
			size += 40 + len(ef.lease.status)
		}
	}
	for i := range dead {
		size += 64 + len(dead[i].err) + len(dead[i].m.txn) + len(dead[i].m.trace) + len(dead[i].m.payload)
	}
	return appendEffect(make([]byte, 0, size), &ef)
}

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
