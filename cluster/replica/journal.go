package replica

import (
	"encoding/binary"
	"fmt"
	"sort"
	"syscall"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// journal is the engine.Journal of a shard's leader in one term: the
// shard's Raft log seen from the engine. Its fields past start are guarded
// by Shard.mu.
type journal struct {
	s     *Shard
	term  uint64
	start uint64 // the last index of the log the engine replays

	deposed bool
	err     error      // why it refuses (deposed, or the engine could not be built)
	live    uint64     // no record before it holds messages the engine keeps (Release; 0: not known)
	snapPos uint64     // the position of the last snapshot written (WriteSnapshot)
	next    uint64     // the index the next proposal gets
	pend    []proposal // proposed, not yet committed, by index
}

// proposal is a record proposed and not yet committed.
type proposal struct {
	index uint64
	data  []byte // Read serves it until it is committed
	done  func(error)
	at    time.Time
}

// Append proposes rec. The leader's log grows only by its own proposals
// within a term (takeOverLocked opened the journal on a log with nothing
// unapplied), so the index is j.next.
func (j *journal) Append(rec []byte, done func(error)) (uint64, error) {
	s := j.s
	if len(rec) > s.n.cfg.MaxEntryBytes {
		return 0, fmt.Errorf("replica: a record of %d bytes passes the entry limit of %d: %w", len(rec), s.n.cfg.MaxEntryBytes, syscall.EMSGSIZE)
	}
	data := packRecord(&s.pack, rec)
	s.mu.Lock()
	if j.deposed || j.err != nil {
		err := j.err
		s.mu.Unlock()
		return 0, err
	}
	if err := s.rn.Propose(data); err != nil {
		// The lead is not lost (checkLeadLocked would have deposed j):
		// what drops a proposal here is the uncommitted limit.
		s.mu.Unlock()
		return 0, fmt.Errorf("replica: shard %d: %v: %w", s.id, err, syscall.EAGAIN)
	}
	idx := j.next
	j.next++
	j.pend = append(j.pend, proposal{index: idx, data: data, done: done, at: time.Now()})
	s.mu.Unlock()
	s.n.kick()
	return idx, nil
}

// Read returns a copy of the record at index pos.
func (j *journal) Read(pos uint64) ([]byte, error) {
	s := j.s
	s.mu.Lock()
	var data []byte
	if i := sort.Search(len(j.pend), func(i int) bool { return j.pend[i].index >= pos }); i < len(j.pend) && j.pend[i].index == pos {
		data = j.pend[i].data // never changed: read after the lock
	}
	s.mu.Unlock()
	if data == nil {
		ents, err := s.log.Entries(pos, pos+1, 0)
		if err != nil {
			return nil, fmt.Errorf("replica: shard %d: entry %d: %w", s.id, pos, err)
		}
		if len(ents) != 1 || !isRecord(ents[0]) {
			return nil, fmt.Errorf("replica: shard %d: entry %d holds no record", s.id, pos)
		}
		data = ents[0].GetData()
	}
	rec, err := unpackRecord(data, s.n.cfg.MaxEntryBytes)
	if err != nil {
		return nil, fmt.Errorf("replica: shard %d: entry %d: %w", s.id, pos, err)
	}
	if len(rec) > 0 && &rec[0] == &data[0] {
		rec = append([]byte(nil), rec...) // the caller's own copy
	}
	return rec, nil
}

// replayRecord hands fn the engine record entry e holds, if it holds one.
func (j *journal) replayRecord(e *pb.Entry, fn func(pos uint64, rec []byte) error) error {
	if !isRecord(e) {
		return nil
	}
	rec, err := unpackRecord(e.GetData(), j.s.n.cfg.MaxEntryBytes)
	if err != nil {
		return fmt.Errorf("replica: shard %d: entry %d: %w", j.s.id, e.GetIndex(), err)
	}
	return fn(e.GetIndex(), rec)
}

// SnapshotEveryBytes is how often a shard's engine snapshots its state
// (engine.Config.SnapshotEveryBytes) when its log is replicated: a new
// leader loads the newest snapshot (an entry of the log, WriteSnapshot) and
// replays the records after it, each read back from the broker's journal,
// where the records of every shard of the broker share each group-commit
// entry, so reading one decodes the entry whole. The engine's default (256
// MiB between snapshots, for a journal of its own) made a takeover replay
// thousands of records for seconds.
const SnapshotEveryBytes = 4 << 20

// replayBatch is how many bytes of entries Replay asks the log for at once.
const replayBatch = 4 << 20

// Replay calls fn for every record of the committed log after index after,
// up to the index the shard was taken over at.
func (j *journal) Replay(after uint64, fn func(pos uint64, rec []byte) error) error {
	s := j.s
	lo := after + 1
	first, err := s.log.FirstIndex()
	if err != nil {
		return err
	}
	switch {
	case lo == 1 && first == 2:
		// Index 1 is the group's bootstrap (Bootstrap): no engine state.
		lo = first
	case lo < first:
		return fmt.Errorf("replica: shard %d: replay from %d, but the log starts at %d", s.id, lo, first)
	}
	if sc, ok := s.log.(interface {
		Scan(lo, hi uint64, fn func(*pb.Entry) error) error
	}); ok && lo <= j.start {
		return sc.Scan(lo, j.start+1, func(e *pb.Entry) error { return j.replayRecord(e, fn) })
	}
	for lo <= j.start {
		ents, err := s.log.Entries(lo, j.start+1, replayBatch)
		if err == nil && len(ents) == 0 {
			err = raft.ErrUnavailable // a log must give at least one
		}
		if err != nil {
			return fmt.Errorf("replica: shard %d: entries from %d: %w", s.id, lo, err)
		}
		for _, e := range ents {
			if err := j.replayRecord(e, fn); err != nil {
				return err
			}
			lo = e.GetIndex() + 1
		}
	}
	return nil
}

// LoadSnapshot returns the newest committed snapshot of the shard at or
// before the index the shard was taken over at: any engine of the group
// may have written it (WriteSnapshot proposes it as an entry), so a new
// leader replays only the records that follow it.
func (j *journal) LoadSnapshot() (uint64, []byte, bool, error) {
	s := j.s
	s.mu.Lock()
	idx := s.snapIndex
	s.mu.Unlock()
	if idx == 0 || idx > j.start {
		return 0, nil, false, nil
	}
	pos, data, err := s.readSnapshot(idx)
	if err != nil {
		return 0, nil, false, err
	}
	return pos, data, true, nil
}

// WriteSnapshot proposes data, the engine's state covering every record up
// to pos, as an entry of the shard's log (snapshotEntry): once it is
// committed, every replica of the group knows it (Shard.apply), and
// whichever leads next loads it instead of replaying the log from its
// start. The engine writes one once the records up to pos are durable,
// which here means committed and applied; a deposed journal keeps none, and
// a snapshot that is not committed (the lead was lost meanwhile) is
// replaced by the next. A snapshot larger than an entry is refused: the
// older one stays the newest.
func (j *journal) WriteSnapshot(pos uint64, data []byte) error {
	s := j.s
	if n := 1 + 2*binary.MaxVarintLen64 + len(data); n > s.n.cfg.MaxEntryBytes {
		return fmt.Errorf("replica: shard %d: a snapshot of %d bytes passes the entry limit of %d: %w", s.id, n, s.n.cfg.MaxEntryBytes, syscall.EMSGSIZE)
	}
	s.mu.Lock()
	if j.deposed || j.err != nil {
		err := j.err
		s.mu.Unlock()
		return err
	}
	if pos > s.applied {
		s.mu.Unlock()
		return fmt.Errorf("replica: shard %d: a snapshot at %d, past the applied index %d", s.id, pos, s.applied)
	}
	rec := make([]byte, 0, 1+2*binary.MaxVarintLen64+len(data))
	rec = append(rec, snapshotMark)
	rec = binary.AppendUvarint(rec, pos)
	rec = binary.AppendUvarint(rec, j.keepLocked(pos))
	rec = append(rec, data...)
	if err := s.rn.Propose(rec); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("replica: shard %d: proposing a snapshot: %v: %w", s.id, err, syscall.EAGAIN)
	}
	j.pend = append(j.pend, proposal{index: j.next, data: rec, at: time.Now()})
	j.next++
	j.snapPos = pos
	s.mu.Unlock()
	s.n.kick()
	return nil
}

// keepLocked is the first index every replica of the group must keep of
// the shard's log once a snapshot at pos is committed (snapshot entry): the
// records after pos (a replay from the snapshot reads them), the oldest
// record that holds messages still kept (the engine reads their payloads
// back: Release told it), and every entry some live replica has not yet got
// (a replica that falls behind is caught up from the log, so the log keeps
// what the slowest one lacks). A replica unheard for Config.DownTicks does
// not hold the front back (a log must not grow for as long as a broker is
// down): when it returns, or comes back with its log lost, it is sent the
// log's start and what follows it (DiskLog.Snapshot). Caller holds s.mu.
func (j *journal) keepLocked(pos uint64) uint64 {
	if j.live == 0 {
		return 0 // no Release yet: nothing is known of the messages kept
	}
	keep := min(pos+1, j.live)
	for id, pr := range j.s.rn.Status().Progress {
		if id != j.s.n.cfg.ID && j.s.n.down(id) {
			continue
		}
		keep = min(keep, pr.Match+1)
	}
	return keep
}

// Release notes the oldest record holding messages the engine still keeps
// (live), as of the snapshot it has just written: the next snapshot entry
// lets the replicas drop what is before it (keepLocked). Messages only
// move forward, so the bound holds later too; when none was kept, the
// messages pushed since all follow that snapshot. covered is not needed:
// the snapshot entry is part of the log, which the journal checks.
func (j *journal) Release(covered, live uint64) error {
	s := j.s
	s.mu.Lock()
	if live == 0 {
		live = j.snapPos + 1
	}
	j.live = live
	s.mu.Unlock()
	return nil
}

// OldestSegment returns the entries of the shard's log that hold back the
// front of the broker's journal (the oldest segment of the journal, which
// nothing may drop while they are kept): the engine copies the few live
// records among them forward (engine compact.go), so that its next
// snapshot lets the replicas drop them.
func (j *journal) OldestSegment() (uint64, uint64, bool) {
	o, ok := j.s.log.(interface{ oldest() (uint64, uint64, bool) })
	if !ok {
		return 0, 0, false
	}
	return o.oldest()
}

// Err reports why the journal refuses: its broker lost the lead, or the
// engine could not be built.
func (j *journal) Err() error {
	s := j.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return j.err
}

// Stalled reports a proposal that has waited longer than after for its
// commit: no majority of the group is answering.
func (j *journal) Stalled(after time.Duration) error {
	s := j.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(j.pend) > 0 {
		if w := time.Since(j.pend[0].at); w > after {
			return fmt.Errorf("replica: shard %d: entry %d has waited %s for a majority", s.id, j.pend[0].index, w.Round(time.Millisecond))
		}
	}
	return nil
}
