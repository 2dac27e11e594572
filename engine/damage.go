package engine

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Damage: what the engine does with a journal that lost records.
//
// A journal that checks its entries when it opens (the log package does)
// refuses to open on damage; opened to salvage it, it skips the damaged
// entries (or sets aside unusable snapshots) and says so through Salvager.
// Recovery then rebuilds what it can from what is left, instead of
// refusing on the inconsistencies that missing records leave:
//
//   - a lost push record leaves a hole in a partition's offsets: the next
//     push record starts past p.next. The hole becomes a lost chunk (its
//     position is lostPos), so offsets stay contiguous; consumers pass over
//     it (a pop never serves it, nor fails on it), and it is reported;
//   - a lost push at a partition's end shows as a cursor, a retention low
//     or a deletion mark past p.next: the partition is extended to it with
//     a lost chunk;
//   - a chunk whose record sits in a lost entry (a snapshot's, or one
//     replayed before its move record was lost) becomes a lost chunk too;
//   - a lost queue creation: the pushes of that queue id are kept in a
//     queue named "salvaged-<id>" (its name comes back if a later record of
//     its options carries it);
//   - a lost group creation: the group is created when its cursor moves
//     are met (subscription "all");
//   - lost acks (cursor moves, retry counts, dead-letter filings): the
//     cursors stay where the last surviving record put them, so some
//     messages are delivered again (at-least-once);
//   - a record that passed the journal's checks but does not decode is
//     skipped and counted.
//
// What was lost is logged at start (queue, partition, offsets) and kept:
// lost chunks are in snapshots like any other, PartitionInfo.Lost lists
// them and QueueInfo.LostMessages counts them, until retention removes them.
//
// A read that meets damage after start (an entry that went bad since) is an
// error for that partition alone, counted in Stats.ReadErrors: a pop of
// that partition by name answers it; a pop of any partition logs it and
// serves the others.

// Salvager is what a journal that checks its entries when it opens tells
// recovery about damage (*log.Log implements it). A journal without it is
// taken as whole.
type Salvager interface {
	// Salvaged reports that what Replay gives may miss records: entries
	// lost to damage were skipped, or the snapshots were set aside.
	Salvaged() bool
	// Check returns nil when the entry holding pos is held and whole, and
	// otherwise an error naming it.
	Check(pos uint64) error
	// CheckFront returns nil when the journal still starts with its first
	// record; otherwise the first entry it holds (for the report) and an
	// error naming what is missing.
	CheckFront() (first uint64, err error)
}

// lostPos is the position of a lost chunk: its messages were lost to
// damage (no journal position is 0).
const lostPos = 0

// ErrUnreadable: a message cannot be read back from the journal (its entry
// went bad after the broker started). It is that partition's error alone.
var ErrUnreadable = errors.New("message unreadable: its journal entry is damaged")

// OffsetRange is the offsets First to Last (inclusive) of a partition.
type OffsetRange struct{ First, Last uint64 }

func (r OffsetRange) String() string {
	if r.First == r.Last {
		return fmt.Sprint(r.First)
	}
	return fmt.Sprintf("%d-%d", r.First, r.Last)
}

// salvageState is what a salvaging recovery keeps while it runs.
type salvageState struct {
	placeholders map[uint64]bool // queue ids recreated as "salvaged-<id>"
	deletedIDs   map[uint64]bool // queue ids deleted during the replay
	badRecords   int             // records that did not decode, skipped
	orphanRecs   int             // records of queues, partitions or groups that are gone, skipped
	queues       []string        // queues recreated
	groups       []string        // groups recreated (queue/group)
}

// lostRanges lists the offsets of p lost to damage (lost chunks, adjacent
// ones merged). Caller holds p's stripe.
func (p *partition) lostRanges() []OffsetRange {
	if p.lost == 0 {
		return nil
	}
	var out []OffsetRange
	for i := range p.chunks {
		if p.chunks[i].pos != lostPos {
			continue
		}
		r := OffsetRange{p.chunks[i].first, p.chunkEnd(i) - 1}
		if r.Last < r.First {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Last+1 == r.First {
			out[n-1].Last = r.Last
			continue
		}
		out = append(out, r)
	}
	return out
}

// extendLost makes offsets [p.next, to) of p a lost chunk (recovery only).
// Caller holds p's stripe.
func (e *Engine) extendLost(p *partition, to uint64, ts int64) {
	if to <= p.next {
		return
	}
	if len(p.chunks) > 0 {
		ts = p.lastTS // stamps never go down
	}
	p.chunks = append(p.chunks, chunk{first: p.next, pos: lostPos, ts: ts})
	p.lost++
	p.next = to
	p.durable = p.next
}

// recoverLost makes the messages of the move record pr (at pos) the
// offsets they were copied from, inside lost chunk i of p: the chunk is
// split around them, and what is left of it stays lost. Without this, the
// lost chunk took the copy's position whole, and a pop read one message's
// record for a chunk of many (index out of range). Recovery only; caller
// holds p's stripe.
func (e *Engine) recoverLost(p *partition, i int, pos uint64, pr *pushRecord) {
	c := p.chunks[i]
	first, n, end := pr.first, uint64(len(pr.refs)), p.chunkEnd(i)
	if n == 0 || first+n > end {
		return // not a copy of messages inside this chunk: it stays lost
	}
	repl := make([]chunk, 0, 3)
	if c.first < first {
		repl = append(repl, chunk{first: c.first, pos: lostPos, ts: min(c.ts, pr.ts)})
	}
	repl = append(repl, chunk{first: first, pos: pos, ts: pr.ts})
	if first+n < end {
		repl = append(repl, chunk{first: first + n, pos: lostPos, ts: max(c.ts, pr.ts)})
	}
	p.chunks = slices.Replace(p.chunks, i, i+1, repl...)
	p.lost += int32(len(repl) - 2) // one lost chunk became len(repl)-1 of them
}

// growTo extends p to offset off (exclusive) with a lost chunk when a record
// of a salvaging recovery points past its end: the pushes that led there
// were lost. It reports whether off is within p now. Caller holds p's
// stripe.
func (e *Engine) growTo(p *partition, off uint64) bool {
	if off <= p.next {
		return true
	}
	if e.sv == nil {
		return false
	}
	e.extendLost(p, off, p.lastTS)
	return true
}

// salvagedQueue recreates a queue whose creation record was lost, for the
// push records of it that survived (salvaging recovery only).
func (e *Engine) salvagedQueue(id uint64) *queue {
	if e.sv == nil || e.sv.deletedIDs[id] {
		return nil
	}
	name := fmt.Sprintf("salvaged-%016x", id)
	o := DefaultQueueOptions()
	q := e.newQueue(name, id, 0, &o)
	e.queues[name] = q
	e.queuesID[id] = q
	e.sv.placeholders[id] = true
	e.sv.queues = append(e.sv.queues, name)
	e.log.Error("recovery SALVAGE: push records of a queue whose creation was lost; keeping them in a queue of their own",
		"queue", name)
	return q
}

// renameSalvaged gives a recreated queue its name back when a surviving
// record of its options carries it.
func (e *Engine) renameSalvaged(q *queue, name string, created int64) {
	if e.sv == nil || !e.sv.placeholders[q.id] || e.queues[name] != nil {
		return
	}
	delete(e.sv.placeholders, q.id)
	for i, n := range e.sv.queues {
		if n == q.name {
			e.sv.queues[i] = name
		}
	}
	delete(e.queues, q.name)
	e.log.Error("recovery SALVAGE: a recreated queue found its name", "was", q.name, "queue", name)
	q.name, q.created = own(name), created
	e.queues[q.name] = q
}

// salvagedGroup recreates a group whose creation record was lost, when an
// effect record of it survived (salvaging recovery only).
func (e *Engine) salvagedGroup(q *queue, name string) *group {
	if e.sv == nil {
		return nil
	}
	q.mu.Lock()
	g := q.gnames[name]
	if g == nil {
		g = &group{q: q, name: own(name), mode: SubAll}
		e.addGroup(q, g)
		e.sv.groups = append(e.sv.groups, q.name+"/"+name)
	}
	q.mu.Unlock()
	return g
}

// checkJournalStart (recovery without a snapshot) makes sure the journal
// starts at its first entry: the engine drops old segments only after a
// snapshot, so without one a journal that starts later lost its first
// segment files, and with them what they created (queues, groups, the
// first messages). Salvaging, it says so and goes on.
func (e *Engine) checkJournalStart(sv Salvager) error {
	if sv == nil {
		return nil
	}
	first, err := sv.CheckFront()
	if err == nil {
		return nil
	}
	if e.sv == nil {
		return fmt.Errorf("engine: there is no snapshot and the journal starts at entry %d: %w "+
			"(a salvage rebuilds what the rest holds and reports what was lost)", first, err)
	}
	e.log.Error("recovery SALVAGE: there is no snapshot and the journal starts after entry 1: what only the entries before held is lost",
		"first_entry", first, "lost_entries", fmt.Sprintf("1..%d", first-1))
	return nil
}

// checkChunks makes sure every chunk's record is in an entry the journal
// holds whole: an entry lost to damage (or gone) is a lost chunk under
// salvage, and otherwise recovery refuses, naming it (the journal's error:
// the log's wraps ErrCorrupt).
func (e *Engine) checkChunks(sv Salvager) error {
	for _, q := range e.queues {
		for _, p := range q.parts {
			if p == nil {
				continue
			}
			for i := range p.chunks {
				c := &p.chunks[i]
				if c.pos == lostPos {
					continue
				}
				err := sv.Check(c.pos)
				if err == nil {
					continue
				}
				if e.sv == nil {
					return fmt.Errorf("engine: %s/%s: messages from offset %d are in a journal entry that is not whole: %w "+
						"(a salvage passes over them and reports them lost)", q.name, p.name, c.first, err)
				}
				e.dropChunk(c)
				c.pos = lostPos
				p.lost++
			}
		}
	}
	return nil
}

// reportLost logs what a salvaging recovery lost, per partition, and
// returns how many messages.
func (e *Engine) reportLost() uint64 {
	const maxLines = 1000
	var total uint64
	lines, parts := 0, 0
	names := make([]string, 0, len(e.queues))
	for name := range e.queues {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		q := e.queues[name]
		for _, p := range q.parts {
			if p == nil || p.lost == 0 {
				continue
			}
			rs := p.lostRanges()
			var n uint64
			texts := make([]string, len(rs))
			for i, r := range rs {
				n += r.Last - r.First + 1
				texts[i] = r.String()
			}
			if n == 0 {
				continue
			}
			total += n
			parts++
			if lines < maxLines {
				e.log.Error("recovery SALVAGE: messages lost to journal damage", "queue", q.name, "partition", p.name,
					"offsets", strings.Join(texts, ","), "messages", n)
			}
			lines++
		}
	}
	sv := e.sv
	e.log.Error("recovery SALVAGE: the journal lost records to damage; the state is rebuilt from the rest",
		"lost_messages", total, "partitions", parts, "unlisted_partitions", max(lines-maxLines, 0),
		"undecodable_records", sv.badRecords, "orphan_records", sv.orphanRecs,
		"recreated_queues", sv.queues, "recreated_groups", sv.groups,
		"note", "acks (cursor moves) and dead-letter filings in the lost records are lost too: some messages may be delivered again; "+
			"the lost offsets are passed over by every group, and listed by queue info until retention removes them")
	return total
}

// skipLost moves g's cursor on p past lost messages it has reached: there
// is nothing to deliver there. The move is not journaled (the lost chunk
// is kept: the next recovery passes over it the same way). Caller holds
// p's stripe.
func (e *Engine) skipLost(p *partition, pg *pgState) {
	if a := pg.act; a != nil && a.lease != nil {
		return
	}
	moved := false
	for ci := p.chunkFor(pg.cursor); ci >= 0 && ci < len(p.chunks) && p.chunks[ci].pos == lostPos && pg.cursor < p.durable; ci++ {
		pg.cursor = p.chunkEnd(ci)
		moved = true
	}
	if moved {
		if a := pg.act; a != nil {
			a.dropRetriesBelow(pg.cursor)
		}
		e.refreshDepth(p)
	}
}

// beforeLost is the end of the messages [from, to) of p that come before
// the first lost one. Caller holds p's stripe.
func (p *partition) beforeLost(from, to uint64) uint64 {
	for ci := p.chunkFor(from); ci >= 0 && ci < len(p.chunks) && p.chunks[ci].first < to; ci++ {
		if p.chunks[ci].pos == lostPos {
			return max(from, p.chunks[ci].first)
		}
	}
	return to
}
