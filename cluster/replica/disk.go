package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	rlog "github.com/regentmq/regent/log"
)

// Disk keeps the Raft logs of every shard of a broker in the broker's one
// journal (package log): each Raft entry is one record that names its shard,
// term and index, and each shard's hard state is a record too. The journal's
// committer fsyncs the records of every shard in one group commit, and
// Sync waits for it. A shard's log (Disk.Log) is an index over those
// records: per index, the term and the record's position, with the data of
// the newest entries kept in memory up to a budget and older ones read back.
//
// The journal is append-only, so an entry replaced by a new leader (a
// follower's conflicting tail) is replaced by appending the new one: on
// open, the records are replayed in order and each entry record truncates
// its shard's index from its own index on, exactly as Save did.
//
//	record    = kind u8 | shard u32 | body
//	entry  (1) = term uvarint | index uvarint | type u8 | data bytes
//	state  (2) = term uvarint | vote uvarint | commit uvarint
//	start  (3) = index uvarint | term uvarint | confState bytes (protobuf)   (the group's bootstrap)
//	anchor (4) = index uvarint | term uvarint | confState bytes | term uvarint | vote uvarint | commit uvarint
//
// An anchor record compacts a shard's log: the entries up to index are
// gone (a snapshot entry after them holds what the engine needs of them),
// and it repeats the group's configuration and hard state, so that the
// newest anchor and the entries after it are all a shard needs of the
// journal. Once every shard's needs start past a segment of the journal,
// the segment is dropped (Disk.Maintain). Replaying a journal whose front
// was dropped, a shard's first records may be entries that a later anchor
// compacts: until its first anchor, a log takes entries as they come.
type Disk struct {
	j *rlog.Log
	// keep bounds the entry data held in memory per shard.
	keep int

	maintained time.Time // the last Maintain that looked at the journal

	// opening is set while OpenDisk replays the journal, whose front may
	// have been dropped (see the anchor record).
	opening bool

	mu     sync.Mutex
	shards map[uint32]*DiskLog

	done func(error) // recorded, bound once
	wmu  sync.Mutex
	// appended counts the records journaled, durable those the journal
	// has reported on (it reports in order: the first durable of them are
	// durable); werr is the first failure, which stays (a record lost
	// fails every Sync after it).
	appended, durable uint64
	// wake is the smallest count of durable records a waiting Sync needs
	// (0: none waits): the journal's reports wake the Syncs only once it
	// is reached, not at each record.
	wake  uint64
	werr  error
	wdone *sync.Cond
}

// Record kinds of a Disk.
const (
	diskEntry  = 1
	diskState  = 2
	diskStart  = 3
	diskAnchor = 4
)

// DefaultKeepBytes is how much entry data each shard's log keeps in memory
// (the newest entries: what followers and the engine read next), besides
// entries not yet applied (up to unappliedKeepBytes more) and its newest.
// Per shard: a broker holding 64 replicas keeps 64 MiB, and up to about
// 1.1 GiB while every shard's apply lags 16 MiB behind its log.
const DefaultKeepBytes = 1 << 20

// OpenDisk rebuilds every shard's log from j, which nothing else writes.
// keep bounds the entry data held in memory per shard (0: DefaultKeepBytes).
func OpenDisk(j *rlog.Log, keep int) (*Disk, error) {
	if keep <= 0 {
		keep = DefaultKeepBytes
	}
	d := &Disk{j: j, keep: keep, shards: make(map[uint32]*DiskLog), opening: true}
	d.wdone = sync.NewCond(&d.wmu)
	d.done = d.recorded
	err := j.Replay(0, func(pos uint64, rec []byte) error {
		if len(rec) < 5 {
			return fmt.Errorf("replica: record at %d: %w", pos, errBadRecord)
		}
		l := d.log(binary.BigEndian.Uint32(rec[1:5]))
		return l.replay(pos, rec[0], rec[5:], nil, false)
	})
	if err != nil {
		return nil, fmt.Errorf("replica: reading the raft logs: %w", err)
	}
	d.opening = false
	for id, l := range d.shards {
		if !l.started || l.snapIndex != l.front {
			return nil, fmt.Errorf("replica: shard %d: the journal holds its log's entries from %d on, and its newest anchor starts the log after %d: %w",
				id, l.snapIndex+1, l.front, errBadRecord)
		}
	}
	return d, nil
}

var errBadRecord = errors.New("malformed raft log record")

// Log returns shard's log: empty when the journal holds nothing of it (then
// Bootstrap it, or let its group's leader send it a snapshot).
func (d *Disk) Log(shard uint32) *DiskLog { return d.log(shard) }

func (d *Disk) log(shard uint32) *DiskLog {
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.shards[shard]
	if l == nil {
		l = &DiskLog{d: d, shard: shard, cs: &pb.ConfState{}, hs: &pb.HardState{}}
		d.shards[shard] = l
	}
	return l
}

// append journals rec, waiting while the journal is behind (Save runs on
// the node loop: this is its backpressure), and counts it until durable.
// A full disk is an error (Process fails, and Run with it).
func (d *Disk) append(rec []byte) (uint64, error) {
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		pos, err := d.j.Append(rec, d.done)
		if err == nil {
			d.wmu.Lock()
			d.appended++
			d.wmu.Unlock()
			return pos, nil
		}
		if !errors.Is(err, syscall.EAGAIN) {
			return 0, err
		}
		time.Sleep(wait)
	}
}

// recorded is the journal's done for every record (Disk.done: one method
// value made at open, not a closure per record).
func (d *Disk) recorded(err error) {
	d.wmu.Lock()
	if err != nil && d.werr == nil {
		d.werr = err
	}
	d.durable++
	if d.wake != 0 && (d.durable >= d.wake || d.werr != nil) {
		d.wake = 0 // the Syncs still short say what they need again
		d.wdone.Broadcast()
	}
	d.wmu.Unlock()
}

// Sync waits until every record appended before it was called is durable,
// and reports the journal's first failure. Records appended meanwhile (the
// node loop goes on saving while its syncer waits: Node.Run) are not
// waited for, so a Sync ends however busy the journal stays.
func (d *Disk) Sync() error {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	target := d.appended
	for d.durable < target && d.werr == nil {
		if d.wake == 0 || target < d.wake {
			d.wake = target
		}
		d.wdone.Wait()
	}
	return d.werr
}

// DiskLog is one shard's Raft log in a Disk.
type DiskLog struct {
	d     *Disk
	shard uint32

	mu        sync.Mutex
	hs        *pb.HardState
	cs        *pb.ConfState
	snapIndex uint64
	snapTerm  uint64
	started   bool      // a start or anchor record was seen
	front     uint64    // the index the newest start or anchor record starts the log after
	anchorPos uint64    // that record's journal position
	ents      []diskRef // ents[i] is entry snapIndex+1+i
	kept      int       // bytes of data held by ents
	keptFrom  int       // ents before it hold no data
	applied   uint64    // the last entry applied here (Applied)
	snaps     []uint64  // indexes of the snapshot entries, ascending (Marks)
	confs     []uint64  // indexes of the configuration change entries, ascending
}

type diskRef struct {
	term uint64
	pos  uint64
	typ  pb.EntryType
	data []byte // nil once dropped from memory (read back by pos)
	size int
}

// Bootstrap starts a new group's log with voters (see Bootstrap); a log
// that already holds the group is left as it is.
func (l *DiskLog) Bootstrap(voters []uint64) error {
	l.mu.Lock()
	started := l.started
	l.mu.Unlock()
	if started {
		return nil
	}
	snap, hs := Bootstrap(voters)
	if err := l.Save(hs, nil, snap); err != nil {
		return err
	}
	return l.d.Sync()
}

// Save journals hs, entries and snap (a snapshot is the metadata of a log's
// start, never data: a bootstrap, or another replica's start, Snapshot)
// and updates the index. A snapshot drops every entry the log held.
func (l *DiskLog) Save(hs *pb.HardState, entries []*pb.Entry, snap *pb.Snapshot) error {
	if !raft.IsEmptySnap(snap) {
		if len(snap.GetData()) > 0 {
			return fmt.Errorf("replica: shard %d: a snapshot with data: the replicas ship only a log's start", l.shard)
		}
		cs, err := proto.Marshal(snap.GetMetadata().GetConfState())
		if err != nil {
			return err
		}
		b := l.header(diskStart, 16+len(cs))
		b = binary.AppendUvarint(b, snap.GetMetadata().GetIndex())
		b = binary.AppendUvarint(b, snap.GetMetadata().GetTerm())
		b = appendBytes(b, cs)
		if err := l.write(b, nil); err != nil {
			return err
		}
	}
	for _, e := range entries {
		b := l.header(diskEntry, 24+len(e.GetData()))
		b = binary.AppendUvarint(b, e.GetTerm())
		b = binary.AppendUvarint(b, e.GetIndex())
		b = append(b, byte(e.GetType()))
		b = appendBytes(b, e.GetData())
		if err := l.write(b, e.GetData()); err != nil {
			return err
		}
	}
	if !raft.IsEmptyHardState(hs) {
		b := l.header(diskState, 24)
		b = binary.AppendUvarint(b, hs.GetTerm())
		b = binary.AppendUvarint(b, hs.GetVote())
		b = binary.AppendUvarint(b, hs.GetCommit())
		if err := l.write(b, nil); err != nil {
			return err
		}
	}
	return nil
}

// recScratch holds the buffers Save and Compact build records in: the
// journal copies a record into its group as it takes it (rlog.Log.Append),
// so one buffer serves every record.
var recScratch = sync.Pool{New: func() any { return new([]byte) }}

// maxRecScratch bounds the buffers recScratch keeps.
const maxRecScratch = 256 << 10

// header starts a record of kind for the shard in a scratch buffer with
// room for size more bytes; write gives the buffer back.
func (l *DiskLog) header(kind byte, size int) []byte {
	bp := recScratch.Get().(*[]byte)
	b := *bp
	if cap(b) < 5+size {
		b = make([]byte, 0, 5+size)
	}
	b = append(b[:0], kind, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(b[1:], l.shard)
	return b
}

func appendBytes(b, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

// write journals rec (made by header) and applies it to the index; data is
// an entry record's data, which the index keeps instead of a copy (a Raft
// entry's data never changes once made). rec goes back to recScratch.
func (l *DiskLog) write(rec, data []byte) error {
	pos, err := l.d.append(rec)
	if err == nil {
		err = l.replay(pos, rec[0], rec[5:], data, true)
	} else {
		err = fmt.Errorf("replica: shard %d: %w", l.shard, err)
	}
	if cap(rec) <= maxRecScratch {
		rec = rec[:0]
		recScratch.Put(&rec)
	}
	return err
}

// replay applies one record of the shard (at pos) to the index. An entry's
// data is kept in memory: keep, when own (write journaled the entry, and
// keep is its data), else a copy of what body holds (body is the journal's
// buffer).
func (l *DiskLog) replay(pos uint64, kind byte, body, keep []byte, own bool) error {
	r := body
	uv := func() uint64 {
		v, n := binary.Uvarint(r)
		if n <= 0 {
			r = nil
			return 0
		}
		r = r[n:]
		return v
	}
	bytes := func() ([]byte, bool) {
		n := uv()
		if r == nil || uint64(len(r)) < n {
			return nil, false
		}
		p := r[:n]
		r = r[n:]
		return p, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch kind {
	case diskStart:
		index, term := uv(), uv()
		csb, ok := bytes()
		var cs pb.ConfState
		if !ok || proto.Unmarshal(csb, &cs) != nil {
			return fmt.Errorf("replica: start record at %d: %w", pos, errBadRecord)
		}
		l.snapIndex, l.snapTerm, l.cs, l.started, l.anchorPos, l.front = index, term, &cs, true, pos, index
		l.ents, l.kept, l.keptFrom = nil, 0, 0
		l.snaps, l.confs = nil, nil
	case diskAnchor:
		index, term := uv(), uv()
		csb, ok := bytes()
		var cs pb.ConfState
		if !ok || proto.Unmarshal(csb, &cs) != nil {
			return fmt.Errorf("replica: anchor record at %d: %w", pos, errBadRecord)
		}
		hs := &pb.HardState{Term: new(uv()), Vote: new(uv()), Commit: new(uv())}
		if r == nil {
			return fmt.Errorf("replica: anchor record at %d: %w", pos, errBadRecord)
		}
		l.cs, l.hs, l.anchorPos, l.front, l.started = &cs, hs, pos, index, true
		last := l.snapIndex + uint64(len(l.ents))
		switch {
		case index >= l.snapIndex && index <= last:
			l.compactLocked(index, term)
		case !l.d.opening:
			return fmt.Errorf("replica: shard %d: anchor at %d compacts to %d, outside the log's entries %d..%d: %w",
				l.shard, pos, index, l.snapIndex+1, last, errBadRecord)
		case index > last:
			// Replaying after a dropped front: the entries it keeps
			// come later in the journal, or were compacted by a later
			// anchor.
			l.snapIndex, l.snapTerm, l.ents, l.kept, l.keptFrom = index, term, nil, 0, 0
			l.snaps, l.confs = nil, nil
		default:
			// The log took entries from past the anchor (a dropped
			// front): a later anchor compacts up to them, or OpenDisk
			// finds the gap.
		}
	case diskEntry:
		term, index := uv(), uv()
		if len(r) < 1 {
			return fmt.Errorf("replica: entry record at %d: %w", pos, errBadRecord)
		}
		typ := pb.EntryType(r[0])
		r = r[1:]
		data, ok := bytes()
		if ok && l.d.opening && (index <= l.snapIndex || index > l.snapIndex+uint64(len(l.ents))+1) {
			// Replaying after a dropped front: the log takes entries from
			// here, and an anchor that follows says where it starts
			// (OpenDisk checks that one did).
			l.snapIndex, l.snapTerm, l.ents, l.kept, l.keptFrom = index-1, 0, nil, 0, 0
			l.snaps, l.confs = nil, nil
		}
		if !ok || index <= l.snapIndex || index > l.snapIndex+uint64(len(l.ents))+1 {
			return fmt.Errorf("replica: shard %d: entry %d at %d does not follow the log (%d..%d): %w",
				l.shard, index, pos, l.snapIndex+1, l.snapIndex+uint64(len(l.ents)), errBadRecord)
		}
		// A new entry at an index the log holds replaces it and every
		// entry after it (a leader's log won over this one's tail).
		i := int(index - l.snapIndex - 1)
		for k := i; k < len(l.ents); k++ {
			l.kept -= len(l.ents[k].data)
		}
		l.ents = l.ents[:i]
		l.keptFrom = min(l.keptFrom, i)
		l.snaps = cutFrom(l.snaps, index)
		l.confs = cutFrom(l.confs, index)
		d := keep
		if !own {
			d = append([]byte(nil), data...)
		}
		if d == nil {
			d = []byte{} // held, and empty (nil: dropped, read back by pos)
		}
		e := diskRef{term: term, pos: pos, typ: typ, data: d, size: len(d)}
		l.ents = append(l.ents, e)
		switch {
		case typ == pb.EntryConfChange || typ == pb.EntryConfChangeV2:
			l.confs = append(l.confs, index)
		case typ == pb.EntryNormal && len(d) > 0 && d[0] == snapshotMark:
			l.snaps = append(l.snaps, index)
		}
		l.kept += len(d)
		l.trim()
	case diskState:
		l.hs = &pb.HardState{Term: new(uv()), Vote: new(uv()), Commit: new(uv())}
		if r == nil {
			return fmt.Errorf("replica: state record at %d: %w", pos, errBadRecord)
		}
	default:
		return fmt.Errorf("replica: record kind %d at %d: %w", kind, pos, errBadRecord)
	}
	return nil
}

// Compact drops the entries before keep from the log (an entry must stay
// for every index a replay or a follower may still ask for: the caller
// knows) and journals an anchor record saying so. It writes records, so it
// runs on the node loop, between Saves (Shard.apply).
func (l *DiskLog) Compact(keep uint64) error {
	l.mu.Lock()
	if keep <= l.snapIndex+1 {
		l.mu.Unlock()
		return nil
	}
	if keep > l.snapIndex+uint64(len(l.ents))+1 {
		last := l.snapIndex + uint64(len(l.ents))
		l.mu.Unlock()
		return fmt.Errorf("replica: shard %d: compacting to %d, past the last entry %d", l.shard, keep, last)
	}
	term := l.ents[keep-2-l.snapIndex].term
	l.mu.Unlock()
	return l.anchor(keep-1, term)
}

// anchor journals an anchor record at index (in term), with the log's
// configuration and hard state as they are now.
func (l *DiskLog) anchor(index, term uint64) error {
	l.mu.Lock()
	cs, err := proto.Marshal(l.cs)
	hs := proto.Clone(l.hs).(*pb.HardState)
	l.mu.Unlock()
	if err != nil {
		return err
	}
	b := l.header(diskAnchor, 48+len(cs))
	b = binary.AppendUvarint(b, index)
	b = binary.AppendUvarint(b, term)
	b = appendBytes(b, cs)
	b = binary.AppendUvarint(b, hs.GetTerm())
	b = binary.AppendUvarint(b, hs.GetVote())
	b = binary.AppendUvarint(b, hs.GetCommit())
	return l.write(b, nil)
}

// compactLocked drops the entries up to index (in term). Caller holds l.mu.
func (l *DiskLog) compactLocked(index, term uint64) {
	n := int(index - l.snapIndex)
	for k := range min(n, len(l.ents)) {
		l.kept -= len(l.ents[k].data)
	}
	l.ents = append([]diskRef(nil), l.ents[min(n, len(l.ents)):]...)
	l.keptFrom = max(l.keptFrom-n, 0)
	l.snapIndex, l.snapTerm = index, term
	i, _ := slices.BinarySearch(l.snaps, index+1)
	l.snaps = slices.Delete(l.snaps, 0, i)
	i, _ = slices.BinarySearch(l.confs, index+1)
	l.confs = slices.Delete(l.confs, 0, i)
}

// needs is the oldest journal position the log needs: its anchor's and
// its first entry's.
func (l *DiskLog) needs() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.anchorPos
	if len(l.ents) > 0 {
		p = min(p, l.ents[0].pos)
	}
	return p
}

// oldest returns the entries [from, to) of the log held in the oldest
// segment of the journal, and whether anything follows them (see
// journal.OldestSegment).
func (l *DiskLog) oldest() (uint64, uint64, bool) {
	starts := l.d.j.SegmentStarts()
	if len(starts) < 2 {
		return 0, 0, false
	}
	next := rlog.MakePos(starts[1], 0)
	l.mu.Lock()
	defer l.mu.Unlock()
	n := sort.Search(len(l.ents), func(i int) bool { return l.ents[i].pos >= next })
	if n == 0 || n == len(l.ents) {
		return 0, 0, false
	}
	return l.snapIndex + 1, l.snapIndex + 1 + uint64(n), true
}

// maintainEvery is how often Maintain drops the front of the journal: each
// drop closes and opens the journal's files again, with writes waiting.
const maintainEvery = 5 * time.Second

// Maintain drops the segments at the front of the broker's journal that no
// shard's log needs any more, and returns the shards whose entries hold
// the front back: their leader's engine snapshots, and its snapshot entry
// compacts them (Node). A log that only its anchor keeps in an old segment
// (a shard with nothing new) is anchored again at the tail. It writes
// records, so it runs on the node loop (Config.Maintain), between Saves;
// an error is the journal's failure (the node stops, as for a Save's).
func (d *Disk) Maintain() ([]uint32, error) {
	now := time.Now()
	if now.Sub(d.maintained) < maintainEvery {
		return nil, nil
	}
	d.maintained = now
	starts := d.j.SegmentStarts()
	if len(starts) < 2 {
		return nil, nil
	}
	second, tail := rlog.MakePos(starts[1], 0), rlog.MakePos(starts[len(starts)-1], 0)
	d.mu.Lock()
	logs := make([]*DiskLog, 0, len(d.shards))
	for _, l := range d.shards {
		logs = append(logs, l)
	}
	d.mu.Unlock()
	cut := tail
	var pinned []uint32
	for _, l := range logs {
		l.mu.Lock()
		started, index, term := l.started, l.snapIndex, l.snapTerm
		first := uint64(0)
		if len(l.ents) > 0 {
			first = l.ents[0].pos
		}
		l.mu.Unlock()
		if !started {
			continue
		}
		if l.needs() < tail && (first == 0 || first >= tail) {
			if err := l.anchor(index, term); err != nil {
				return nil, err
			}
		}
		n := l.needs()
		if n < second {
			pinned = append(pinned, l.shard)
		}
		cut = min(cut, n)
	}
	keep := uint64(0)
	for _, st := range starts {
		if st <= rlog.PosIndex(cut) {
			keep = st
		}
	}
	if keep > starts[0] {
		// The anchors written above must be durable before the records
		// they stand for go: a crash between would leave a shard's log
		// without its front.
		if err := d.Sync(); err != nil {
			return pinned, err
		}
		if err := d.j.TruncateFront(keep); err != nil {
			return pinned, err
		}
	}
	return pinned, nil
}

// cutFrom drops the indexes from index on of the ascending list idx.
func cutFrom(idx []uint64, index uint64) []uint64 {
	i, _ := slices.BinarySearch(idx, index)
	return idx[:i]
}

// Marks returns the newest snapshot entry at or before upTo (0: upTo is
// no bound) and the oldest configuration change entry (see Log).
func (l *DiskLog) Marks(upTo uint64) (snapshot, confChange uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.confs) > 0 {
		confChange = l.confs[0]
	}
	i := len(l.snaps)
	if upTo != 0 {
		i, _ = slices.BinarySearch(l.snaps, upTo+1)
	}
	if i > 0 {
		snapshot = l.snaps[i-1]
	}
	return snapshot, confChange
}

// trim drops the data of the oldest entries past the memory budget; they
// are read back by position. An entry not yet applied stays while the
// shard keeps less than unappliedKeepBytes more: applying reads it next
// (Raft hands the node loop its committed entries), and an entry larger
// than the budget, dropped as soon as it was saved, was read back from
// the disk by the node loop for every apply (os.ReadFile of the journal's
// segment, then decompressing the group commit it is in). Caller holds
// l.mu.
func (l *DiskLog) trim() {
	for l.kept > l.d.keep && l.keptFrom < len(l.ents)-1 {
		if l.snapIndex+uint64(l.keptFrom)+1 > l.applied && !l.d.opening && l.kept <= l.d.keep+unappliedKeepBytes {
			return
		}
		l.kept -= len(l.ents[l.keptFrom].data)
		l.ents[l.keptFrom].data = nil
		l.keptFrom++
	}
}

// unappliedKeepBytes is how much more than its budget a shard's log keeps
// in memory of entries saved and not yet applied (trim).
const unappliedKeepBytes = 16 << 20

// Applied tells the log that its entries up to index are applied here:
// their data may leave memory (trim).
func (l *DiskLog) Applied(index uint64) {
	l.mu.Lock()
	if index > l.applied {
		l.applied = index
		l.trim()
	}
	l.mu.Unlock()
}

// InitialState returns the saved hard state and the group's configuration.
func (l *DiskLog) InitialState() (*pb.HardState, *pb.ConfState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return proto.Clone(l.hs).(*pb.HardState), proto.Clone(l.cs).(*pb.ConfState), nil
}

// Entries returns the entries [lo, hi), at least one, at most maxSize bytes.
func (l *DiskLog) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	l.mu.Lock()
	if lo <= l.snapIndex {
		l.mu.Unlock()
		return nil, raft.ErrCompacted
	}
	if hi > l.snapIndex+uint64(len(l.ents))+1 || lo > hi {
		l.mu.Unlock()
		return nil, raft.ErrUnavailable
	}
	refs := make([]diskRef, hi-lo)
	copy(refs, l.ents[lo-l.snapIndex-1:hi-l.snapIndex-1])
	l.mu.Unlock()
	out := make([]*pb.Entry, 0, len(refs))
	var size uint64
	for i, ref := range refs {
		size += uint64(ref.size)
		if i > 0 && size > maxSize {
			break
		}
		data := ref.data
		if data == nil {
			var err error
			if data, err = l.readBack(ref.pos, lo+uint64(i)); err != nil {
				return nil, err
			}
		}
		out = append(out, &pb.Entry{Term: new(ref.term), Index: new(lo + uint64(i)), Type: ref.typ.Enum(), Data: data})
	}
	return out, nil
}

// errScanned stops a journal replay that Scan no longer needs.
var errScanned = errors.New("replica: scanned")

// Scan calls fn with every entry [lo, hi) of the log, in order; an
// entry's data is valid only during the call. Entries
// whose data left memory are read back with one pass over the journal
// from the first of them, which decodes each group-commit entry once:
// Entries reads them one by one, and each read decodes a whole entry of
// the journal (every shard's records of one group commit) for one record,
// so that a takeover replaying a few thousand records took seconds.
func (l *DiskLog) Scan(lo, hi uint64, fn func(e *pb.Entry) error) error {
	l.mu.Lock()
	if lo <= l.snapIndex {
		l.mu.Unlock()
		return raft.ErrCompacted
	}
	if hi > l.snapIndex+uint64(len(l.ents))+1 || lo > hi {
		l.mu.Unlock()
		return raft.ErrUnavailable
	}
	refs := slices.Clone(l.ents[lo-l.snapIndex-1 : hi-l.snapIndex-1])
	l.mu.Unlock()
	entry := func(i int, data []byte) *pb.Entry {
		return &pb.Entry{Term: new(refs[i].term), Index: new(lo + uint64(i)), Type: refs[i].typ.Enum(), Data: data}
	}
	for i := 0; i < len(refs); {
		if refs[i].data != nil {
			if err := fn(entry(i, refs[i].data)); err != nil {
				return err
			}
			i++
			continue
		}
		// From here until the next entry held in memory: one pass.
		// Retained entries lie in the journal in the order of their
		// indexes (an entry replacing others comes after them).
		var ferr error
		err := l.d.j.Replay(refs[i].pos-1, func(pos uint64, rec []byte) error {
			if pos < refs[i].pos {
				return nil
			}
			if pos > refs[i].pos {
				return fmt.Errorf("replica: shard %d: entry %d is not at %d in the journal: %w", l.shard, lo+uint64(i), refs[i].pos, errBadRecord)
			}
			data, err := entryData(rec, l.shard, lo+uint64(i))
			if err != nil {
				return err
			}
			if ferr = fn(entry(i, data)); ferr != nil {
				return ferr
			}
			if i++; i == len(refs) || refs[i].data != nil {
				return errScanned
			}
			return nil
		})
		switch {
		case errors.Is(err, errScanned):
		case ferr != nil:
			return ferr
		case err != nil:
			return fmt.Errorf("replica: shard %d: reading entries from %d: %w", l.shard, lo+uint64(i), err)
		default:
			return fmt.Errorf("replica: shard %d: entry %d is not in the journal: %w", l.shard, lo+uint64(i), errBadRecord)
		}
	}
	return nil
}

// entryData returns the data of an entry record rec (shard's, at index),
// within rec.
func entryData(rec []byte, shard uint32, index uint64) ([]byte, error) {
	if len(rec) < 5 || rec[0] != diskEntry || binary.BigEndian.Uint32(rec[1:5]) != shard {
		return nil, fmt.Errorf("replica: shard %d: entry %d: the record at its position is another: %w", shard, index, errBadRecord)
	}
	r := rec[5:]
	for k := range 2 { // term, index
		v, n := binary.Uvarint(r)
		if n <= 0 || (k == 1 && v != index) {
			return nil, fmt.Errorf("replica: shard %d: entry %d: %w", shard, index, errBadRecord)
		}
		r = r[n:]
	}
	if len(r) < 1 {
		return nil, errBadRecord
	}
	r = r[1:]
	n, k := binary.Uvarint(r)
	if k <= 0 || uint64(len(r)-k) < n {
		return nil, errBadRecord
	}
	return r[k : k+int(n)], nil
}

// readBack reads the data of the entry at index from its record at pos.
func (l *DiskLog) readBack(pos, index uint64) ([]byte, error) {
	rec, err := l.d.j.Read(pos)
	if err != nil {
		return nil, fmt.Errorf("replica: shard %d: entry %d: %w", l.shard, index, err)
	}
	return entryData(rec, l.shard, index) // rec is a copy: the data may stay in it
}

// Term returns the term of entry i.
func (l *DiskLog) Term(i uint64) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case i == l.snapIndex:
		return l.snapTerm, nil
	case i < l.snapIndex:
		return 0, raft.ErrCompacted
	case i > l.snapIndex+uint64(len(l.ents)):
		return 0, raft.ErrUnavailable
	}
	return l.ents[i-l.snapIndex-1].term, nil
}

// LastIndex returns the index of the last entry.
func (l *DiskLog) LastIndex() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.snapIndex + uint64(len(l.ents)), nil
}

// FirstIndex returns the index of the first entry.
func (l *DiskLog) FirstIndex() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.snapIndex + 1, nil
}

// Snapshot returns the log's start as a snapshot with no data: a replica
// whose log ends before it (a wiped disk, a replica that was down while the
// group compacted) installs it and is sent the entries that follow. That is
// all it needs: the log is compacted only up to a snapshot entry's keep,
// so the entries after its start hold the newest snapshot entry (the
// engine's state), every record after it, and every record holding a
// message the engine still keeps (journal.keepLocked).
func (l *DiskLog) Snapshot() (*pb.Snapshot, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return &pb.Snapshot{Metadata: &pb.SnapshotMetadata{
		Index: new(l.snapIndex), Term: new(l.snapTerm), ConfState: proto.Clone(l.cs).(*pb.ConfState),
	}}, nil
}
