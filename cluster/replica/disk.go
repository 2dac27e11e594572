package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
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
type Disk struct {
	j *rlog.Log
	// keep bounds the entry data held in memory per shard.
	keep int

	mu     sync.Mutex
	shards map[uint32]*DiskLog

	done    func(error) // recorded, bound once
	wmu     sync.Mutex
	waiting int
	werr    error
	wdone   *sync.Cond
}

// Record kinds of a Disk.
const (
	diskEntry = 1
	diskState = 2
	diskStart = 3
)

// DefaultKeepBytes is how much entry data each shard's log keeps in memory
// (the newest entries: what followers and the engine read next). Per
// shard: a broker holding 64 replicas keeps up to 64 MiB.
const DefaultKeepBytes = 1 << 20

// OpenDisk rebuilds every shard's log from j, which nothing else writes.
// keep bounds the entry data held in memory per shard (0: DefaultKeepBytes).
func OpenDisk(j *rlog.Log, keep int) (*Disk, error) {
	if keep <= 0 {
		keep = DefaultKeepBytes
	}
	d := &Disk{j: j, keep: keep, shards: make(map[uint32]*DiskLog)}
	d.wdone = sync.NewCond(&d.wmu)
	d.done = d.recorded
	err := j.Replay(0, func(pos uint64, rec []byte) error {
		if len(rec) < 5 {
			return fmt.Errorf("replica: record at %d: %w", pos, errBadRecord)
		}
		l := d.log(binary.BigEndian.Uint32(rec[1:5]))
		return l.replay(pos, rec[0], rec[5:])
	})
	if err != nil {
		return nil, fmt.Errorf("replica: reading the raft logs: %w", err)
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
	d.wmu.Lock()
	d.waiting++
	d.wmu.Unlock()
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		pos, err := d.j.Append(rec, d.done)
		if err == nil {
			return pos, nil
		}
		if !errors.Is(err, syscall.EAGAIN) {
			d.recorded(nil)
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
	d.waiting--
	if d.waiting == 0 {
		d.wdone.Broadcast()
	}
	d.wmu.Unlock()
}

// Sync waits until every record appended so far is durable, and reports
// the first that was not.
func (d *Disk) Sync() error {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	for d.waiting > 0 {
		d.wdone.Wait()
	}
	err := d.werr
	d.werr = nil
	return err
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
	started   bool
	ents      []diskRef // ents[i] is entry snapIndex+1+i
	kept      int       // bytes of data held by ents
	keptFrom  int       // ents before it hold no data
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

// Save journals hs, entries and snap (only a bootstrap snapshot: the
// metadata; a snapshot's data is not kept yet) and updates the index.
func (l *DiskLog) Save(hs *pb.HardState, entries []*pb.Entry, snap *pb.Snapshot) error {
	if !raft.IsEmptySnap(snap) {
		if len(snap.GetData()) > 0 {
			return fmt.Errorf("replica: shard %d: a snapshot with data cannot be kept yet", l.shard)
		}
		cs, err := proto.Marshal(snap.GetMetadata().GetConfState())
		if err != nil {
			return err
		}
		b := l.header(diskStart, 16+len(cs))
		b = binary.AppendUvarint(b, snap.GetMetadata().GetIndex())
		b = binary.AppendUvarint(b, snap.GetMetadata().GetTerm())
		b = appendBytes(b, cs)
		if err := l.write(b); err != nil {
			return err
		}
	}
	for _, e := range entries {
		b := l.header(diskEntry, 24+len(e.GetData()))
		b = binary.AppendUvarint(b, e.GetTerm())
		b = binary.AppendUvarint(b, e.GetIndex())
		b = append(b, byte(e.GetType()))
		b = appendBytes(b, e.GetData())
		if err := l.write(b); err != nil {
			return err
		}
	}
	if !raft.IsEmptyHardState(hs) {
		b := l.header(diskState, 24)
		b = binary.AppendUvarint(b, hs.GetTerm())
		b = binary.AppendUvarint(b, hs.GetVote())
		b = binary.AppendUvarint(b, hs.GetCommit())
		if err := l.write(b); err != nil {
			return err
		}
	}
	return nil
}

func (l *DiskLog) header(kind byte, size int) []byte {
	b := make([]byte, 5, 5+size)
	b[0] = kind
	binary.BigEndian.PutUint32(b[1:], l.shard)
	return b
}

func appendBytes(b, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

// write journals rec and applies it to the index.
func (l *DiskLog) write(rec []byte) error {
	pos, err := l.d.append(rec)
	if err != nil {
		return fmt.Errorf("replica: shard %d: %w", l.shard, err)
	}
	return l.replay(pos, rec[0], rec[5:])
}

// replay applies one record of the shard (at pos) to the index.
func (l *DiskLog) replay(pos uint64, kind byte, body []byte) error {
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
		l.snapIndex, l.snapTerm, l.cs, l.started = index, term, &cs, true
		l.ents, l.kept, l.keptFrom = nil, 0, 0
		l.snaps, l.confs = nil, nil
	case diskEntry:
		term, index := uv(), uv()
		if len(r) < 1 {
			return fmt.Errorf("replica: entry record at %d: %w", pos, errBadRecord)
		}
		typ := pb.EntryType(r[0])
		r = r[1:]
		data, ok := bytes()
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
		d := append([]byte(nil), data...)
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
// are read back by position. Caller holds l.mu.
func (l *DiskLog) trim() {
	for l.kept > l.d.keep && l.keptFrom < len(l.ents)-1 {
		l.kept -= len(l.ents[l.keptFrom].data)
		l.ents[l.keptFrom].data = nil
		l.keptFrom++
	}
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

// readBack reads the data of the entry at index from its record at pos.
func (l *DiskLog) readBack(pos, index uint64) ([]byte, error) {
	rec, err := l.d.j.Read(pos)
	if err != nil {
		return nil, fmt.Errorf("replica: shard %d: entry %d: %w", l.shard, index, err)
	}
	r := rec[5:]
	for range 2 { // term, index
		_, n := binary.Uvarint(r)
		if n <= 0 {
			return nil, errBadRecord
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

// Snapshot returns the log's start: only a bootstrap (no engine state is
// shipped between brokers yet), so a replica whose log starts after what a
// follower needs answers that a snapshot is not available.
func (l *DiskLog) Snapshot() (*pb.Snapshot, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.snapIndex > 1 {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	return &pb.Snapshot{Metadata: &pb.SnapshotMetadata{
		Index: new(l.snapIndex), Term: new(l.snapTerm), ConfState: proto.Clone(l.cs).(*pb.ConfState),
	}}, nil
}
