package engine

import (
	"sync/atomic"
	"time"
)

// What went through each queue since the engine started: the per-queue
// share of Stats's counters (pushed, popped, acked, dead-lettered, removed
// by retention, evicted), and what Stats adds beside them: failed acks,
// retention cuts and the lag of pops. The HTTP bridge samples them each
// minute for Queen's analytics routes. They are atomics, counted where
// Stats's are (after the journal took the change: countPop in pop.go,
// countAcks in ack.go, the others beside their changes), so they cost a few
// atomic adds per push, pop or ack call, not per message.

// flow is one queue's counters; a deleted queue's go with it.
type flow struct {
	pushed, popped, acked, ackFailed, deadLettered atomic.Uint64
	retained, evicted, retentionCuts               atomic.Uint64
	lag                                            popLag
}

// popLag measures how long popped messages waited: from their createdAt to
// the pop that delivered them (Queen's "lag"), each delivery once.
type popLag struct {
	count, sumMs atomic.Uint64
	// max holds the largest lag of the two latest minutes (by the engine's
	// clock) in which messages were popped, in slot minute%2, each as
	// minute<<32 | ms (ms capped at 2^32-1, 49 days). A reader of a
	// finished minute finds it until the minute after next.
	max [2]atomic.Uint64
}

// add counts msgs popped at now (Unix nanoseconds).
func (l *popLag) add(msgs []Message, now int64) {
	var sum, top uint64
	for i := range msgs {
		ms := uint64(max(now-msgs[i].CreatedAt, 0) / int64(time.Millisecond))
		sum += ms
		top = max(top, ms)
	}
	l.count.Add(uint64(len(msgs)))
	l.sumMs.Add(sum)
	minute := uint64(now / int64(time.Minute))
	v := minute<<32 | min(top, 1<<32-1)
	slot := &l.max[minute%2]
	for {
		old := slot.Load()
		if old>>32 == minute && old >= v {
			return
		}
		if old>>32 > minute || slot.CompareAndSwap(old, v) {
			return
		}
	}
}

func (l *popLag) read() (count, sumMs uint64, maxes LagMaxes) {
	for i := range l.max {
		v := l.max[i].Load()
		maxes[i] = LagMax{Minute: int64(v >> 32), Ms: v & (1<<32 - 1)}
	}
	return l.count.Load(), l.sumMs.Load(), maxes
}

// LagMax is the largest pop lag, in milliseconds, of one minute (Unix
// minutes, by the engine's clock).
type LagMax struct {
	Minute int64
	Ms     uint64
}

// LagMaxes are the largest pop lags of the two latest minutes in which
// messages were popped.
type LagMaxes [2]LagMax

// In returns the largest lag of minute (Unix minutes), 0 when nothing of it
// was popped or the minute is no longer kept (two minutes later).
func (l LagMaxes) In(minute int64) uint64 {
	for _, m := range l {
		if m.Minute == minute && minute != 0 {
			return m.Ms
		}
	}
	return 0
}

// QueueFlow is what went through one queue since the engine started (or
// the queue was created): the same counts as Stats, for this queue alone.
type QueueFlow struct {
	Name       string
	ID         UUID
	Partitions int // partitions now
	Pushed     uint64
	Popped     uint64
	Acked      uint64 // acks that completed or failed messages, and autoAck deliveries
	AckFailed  uint64 // of Acked, acks other than completed (failed, retry, dlq)
	// DeadLettered counts messages filed to the dead-letter queue.
	DeadLettered uint64
	Retained     uint64 // messages removed by retention
	Evicted      uint64 // of them, messages some group never consumed (once per such group)
	// RetentionCuts counts the removals by retention (each removes the
	// oldest messages of one partition).
	RetentionCuts uint64
	// PopLagCount messages were popped, after waiting PopLagSumMs
	// milliseconds in all since their createdAt; PopLagMax holds the
	// longest wait of the latest minutes.
	PopLagCount uint64
	PopLagSumMs uint64
	PopLagMax   LagMaxes
}

// QueueFlows returns every queue's flow, by name. It reads a few atomics
// per queue; nothing grows with partitions or messages.
func (e *Engine) QueueFlows() []QueueFlow {
	qs := e.sortedQueues()
	out := make([]QueueFlow, 0, len(qs))
	for _, q := range qs {
		if q.deleted.Load() {
			continue
		}
		q.mu.RLock()
		parts := len(q.parts) - q.holes
		q.mu.RUnlock()
		f := &q.flow
		qf := QueueFlow{Name: q.name, ID: queueUUID(q.id), Partitions: parts,
			Pushed: f.pushed.Load(), Popped: f.popped.Load(), Acked: f.acked.Load(), AckFailed: f.ackFailed.Load(),
			DeadLettered: f.deadLettered.Load(), Retained: f.retained.Load(), Evicted: f.evicted.Load(),
			RetentionCuts: f.retentionCuts.Load()}
		qf.PopLagCount, qf.PopLagSumMs, qf.PopLagMax = f.lag.read()
		out = append(out, qf)
	}
	return out
}
