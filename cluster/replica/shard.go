package replica

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/regentmq/regent/engine"
	rlog "github.com/regentmq/regent/log"
	"github.com/regentmq/regent/protocol"
)

// ErrNotLeader answers what a broker cannot do for a shard it does not
// lead (or no longer leads): the client asks the leader (Shard.Engine
// names it). It is the protocol's not_leader, so the doors send its code;
// errors.Is matches any not_leader error.
var ErrNotLeader error = protocol.NewError(protocol.CodeNotLeader, "this broker does not lead the shard")

// Shard is this broker's replica of one shard's Raft group.
type Shard struct {
	id  uint32
	n   *Node
	log Log
	// pack compresses the records this broker proposes as leader
	// (packRecord), guessing from the shard's last ones.
	pack rlog.Compressor

	mu       sync.Mutex
	rn       *raft.RawNode
	stand    int // ticks left to stand for election (Node.PeerDown)
	ledTicks int // ticks this broker has served the shard as leader (handBackLocked)
	// givenUp counts the times in a row the shard's preferred leader gave
	// the lead away to this broker (a leadership transfer from it: it
	// could not serve the shard), givenUpAt the node's tick of the last:
	// each doubles the wait before the lead is handed back to it.
	givenUp   int
	givenUpAt int64
	// pinNext, pinWait and pinSnapping pace the snapshots Node.maintain
	// asks of the shard while its entries pin the journal's front (the
	// node loop's only; pinSnapping: one at a time).
	pinNext     time.Time
	pinWait     time.Duration
	pinSnapping atomic.Bool
	applied     uint64 // the last entry applied
	appliedTerm uint64 // its term
	// j is the journal of the engine while this broker leads the shard in
	// j.term and has taken it over; nil otherwise.
	j   *journal
	eng *engine.Engine // built over j; nil while it is built
	// snapIndex is the index of the newest committed snapshot entry
	// (snapshotEntry) applied here, 0 while there is none: the state an
	// engine of the group wrote, which the next leader's engine loads.
	snapIndex uint64
	// lostLog is set while heartbeats show that this replica lost its log
	// (lostLogLocked): it is said once.
	lostLog bool
}

// ID returns the shard's number.
func (s *Shard) ID() uint32 { return s.id }

// Engine returns the shard's engine while this broker leads the shard and
// has taken it over, with the term it leads in; otherwise nil, and the
// broker the group last heard of as its leader (0: none) with the term.
func (s *Shard) Engine() (eng *engine.Engine, leader, term uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.rn.BasicStatus()
	if s.eng != nil {
		return s.eng, st.ID, s.j.term
	}
	return nil, st.Lead, st.HardState.GetTerm()
}

// Campaign makes this broker stand for election now (a leadership
// transfer, or a test that picks the first leader).
func (s *Shard) Campaign() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.rn.Campaign()
	s.n.kick()
	return err
}

// Applied returns the index of the last entry applied here.
func (s *Shard) Applied() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

// snapshotsSent tells Raft that the snapshots among msgs (MsgSnap: a
// follower's log ends before this replica's log starts) went out. They are
// a log's start, no data (DiskLog.Snapshot), sent like any message: Raft
// then waits for the follower's answer, and one that is lost is sent again
// after a heartbeat. Without the report the follower's progress would stay
// waiting for a snapshot for good.
func (s *Shard) snapshotsSent(msgs []*pb.Message) {
	for _, m := range msgs {
		if m.GetType() != pb.MsgSnap {
			continue
		}
		s.mu.Lock()
		s.rn.ReportSnapshot(m.GetTo(), raft.SnapshotFinish)
		s.mu.Unlock()
		s.n.cfg.Logger.Info("shard snapshot sent", "shard", s.id, "to", m.GetTo(),
			"index", m.GetSnapshot().GetMetadata().GetIndex())
	}
}

// lostLogLocked looks at a heartbeat (m): a leader never tells a follower
// a commit past what it acknowledged, so a higher one than this replica's
// log holds means it lost its log (it started again on a new disk) while
// the leader remembers what it had. Stepped, the heartbeat would stop the
// process (Raft: "commitTo out of range"). So it is not stepped: the
// replica forgets its leader (and so grants the next candidate a vote at
// once) and returns a refusal of an append to send the leader, saying where
// its log ends, so that the leader sees the loss (noteLostLogLocked) even
// with nothing new to send. Caller holds s.mu.
func (s *Shard) lostLogLocked(m *pb.Message) *pb.Message {
	last, err := s.log.LastIndex()
	if err != nil || m.GetCommit() <= last {
		s.lostLog = false
		return nil
	}
	lastTerm, err := s.log.Term(last)
	if err != nil {
		lastTerm = 0
	}
	if !s.lostLog {
		s.lostLog = true
		s.n.cfg.Logger.Warn("the leader says committed what this replica's log lacks: its log was lost",
			"shard", s.id, "leader", m.GetFrom(), "commit", m.GetCommit(), "last", last)
	}
	_ = s.rn.ForgetLeader()
	return &pb.Message{
		Type: pb.MsgAppResp.Enum(), From: new(s.n.cfg.ID), To: new(m.GetFrom()), Term: new(m.GetTerm()),
		Index: new(m.GetCommit()), Reject: new(true), RejectHint: new(last), LogTerm: new(lastTerm),
	}
}

// noteLostLogLocked looks at a follower's refusal of an append (m): one
// whose log ends below what it acknowledged to this leader lost its log (a
// broker started again on a new disk). Raft never moves a follower's next
// index below what it acknowledged, so this leader would send it appends
// above its log for good, and the group could not commit once another
// replica is down. A leader of a new term starts with no such memory: it
// probes the follower down to its log and sends it the log start
// (DiskLog.Snapshot). So this leader steps down to a new term (a message
// of that term from the follower, which is what makes a leader step down)
// and stands at once: its log is the longest, the others elect it again,
// or another replica as long. Caller holds s.mu.
func (s *Shard) noteLostLogLocked(m *pb.Message) {
	st := s.rn.Status()
	pr, ok := st.Progress[m.GetFrom()]
	if st.RaftState != raft.StateLeader || !ok || m.GetIndex() < pr.Match || m.GetRejectHint() >= pr.Match {
		return
	}
	term := st.HardState.GetTerm()
	s.n.cfg.Logger.Warn("a follower lost its log: standing again in a new term, whose leader catches it up",
		"shard", s.id, "follower", m.GetFrom(), "acknowledged", pr.Match, "has", m.GetRejectHint(), "term", term)
	_ = s.rn.Step(&pb.Message{Type: pb.MsgAppResp.Enum(), From: new(m.GetFrom()), To: new(s.n.cfg.ID), Term: new(term + 1), Reject: new(true)})
	_ = s.rn.Campaign()
}

// installed notes that this replica's log now starts at snap (the leader's
// log start, Save): what it applied before is gone with its entries, and
// the entries that follow, the newest snapshot entry among them, come next.
func (s *Shard) installed(snap *pb.Snapshot) {
	idx, term := snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm()
	s.mu.Lock()
	if s.applied < idx {
		s.applied, s.appliedTerm = idx, term
	}
	if s.snapIndex <= idx {
		s.snapIndex = 0
	}
	s.mu.Unlock()
	s.n.cfg.Logger.Info("shard log restarted from the leader's", "shard", s.id, "index", idx, "term", term)
}

// deposal is what losing the lead leaves to do once Shard.mu is released:
// the answers of the proposals that were waiting, and the engine to close.
type deposal struct {
	fail  []proposal
	eng   *engine.Engine
	err   error
	async bool // close the engine on a goroutine of its own (Run)
}

// run answers what waited and closes the engine. It runs wherever the lead
// was lost: the node loop, or the door that stepped a message (Receive),
// which must not wait for an engine to close.
func (d deposal) run() {
	for _, p := range d.fail {
		if p.done != nil {
			p.done(d.err)
		}
	}
	if d.eng != nil {
		// Its Close finds the journal deposed and writes nothing.
		if d.async {
			go d.eng.Close()
		} else {
			_ = d.eng.Close()
		}
	}
}

// ErrClosed answers what was waiting on a shard when its Node closed (the
// broker stops, or its journal failed): not_leader, as for a deposed
// leader, since the proposal may still be committed by the next leader
// and the client must ask it (a resend with transactionIds is
// deduplicated).
var ErrClosed error = protocol.NewError(protocol.CodeNotLeader, "this broker's replicas are closed: the shard's next leader serves it")

// close stops serving the shard: what waits is answered err, and the
// engine is closed without a snapshot (the next leader replays the log).
func (s *Shard) close(err error) {
	s.mu.Lock()
	d := deposal{err: err}
	if j := s.j; j != nil {
		d.fail, d.eng = j.pend, s.eng
		j.pend, j.deposed, j.err = nil, true, fmt.Errorf("%w (%w)", err, engine.ErrDeposed)
		s.j, s.eng = nil, nil
	}
	s.mu.Unlock()
	d.run()
}

// checkLeadLocked deposes the journal when this broker no longer leads in
// its term. Call it after every step of the RawNode.
func (s *Shard) checkLeadLocked() deposal {
	j := s.j
	if j == nil {
		return deposal{}
	}
	st := s.rn.BasicStatus()
	if st.RaftState == raft.StateLeader && st.HardState.GetTerm() == j.term {
		return deposal{}
	}
	err := fmt.Errorf("%w: shard %d: leader %d in term %d", ErrNotLeader, s.id, st.Lead, st.HardState.GetTerm())
	d := deposal{fail: j.pend, eng: s.eng, err: err, async: s.n.async.Load()}
	j.pend, j.deposed, j.err = nil, true, fmt.Errorf("%w (%w)", err, engine.ErrDeposed)
	s.j, s.eng = nil, nil
	s.n.cfg.Logger.Info("shard lead lost", "shard", s.id, "term", j.term, "leader", st.Lead, "now_term", st.HardState.GetTerm(), "unanswered", len(d.fail))
	return d
}

// apply applies committed entries (a MsgStorageApply's: durable here,
// and committed), answers the proposals they commit, steps resps (the
// message's responses, which tell Raft they are applied) and, when this
// broker leads and has applied an entry of its term, takes the shard over.
func (s *Shard) apply(entries []*pb.Entry, resps []*pb.Message) {
	var done []proposal
	var failed []proposal
	var compact uint64
	s.mu.Lock()
	for _, e := range entries {
		switch e.GetType() {
		case pb.EntryConfChange:
			var cc pb.ConfChange
			if err := proto.Unmarshal(e.GetData(), &cc); err == nil {
				s.rn.ApplyConfChange(&cc)
			}
		case pb.EntryConfChangeV2:
			var cc pb.ConfChangeV2
			if err := proto.Unmarshal(e.GetData(), &cc); err == nil {
				s.rn.ApplyConfChange(&cc)
			}
		default:
			if isSnapshot(e) {
				s.snapIndex = e.GetIndex()
				if _, keep, _, ok := parseSnapshot(e); ok {
					compact = keep
				}
			}
			if j := s.j; j != nil {
				for len(j.pend) > 0 && j.pend[0].index <= e.GetIndex() {
					p := j.pend[0]
					j.pend = j.pend[1:]
					if p.index == e.GetIndex() && e.GetTerm() == j.term {
						done = append(done, p)
					} else {
						failed = append(failed, p) // replaced by another leader's entry
					}
				}
			}
		}
		s.applied, s.appliedTerm = e.GetIndex(), e.GetTerm()
	}
	for _, m := range resps {
		_ = s.rn.Step(m) // a MsgStorageApplyResp: Raft refuses none
	}
	d := s.checkLeadLocked()
	j := s.takeOverLocked()
	applied := s.applied
	s.mu.Unlock()
	s.log.Applied(applied)
	if compact > 0 {
		// Every replica applies the snapshot entry at the same index, and
		// compacts its log as the leader said (only what each replica of
		// the group holds, and what no replay after the snapshot reads).
		// Off Shard.mu: it journals a record, which may wait.
		if err := s.log.Compact(compact); err != nil {
			s.n.cfg.Logger.Error("replica: compacting the shard's log", "shard", s.id, "keep", compact, "err", err)
		}
	}
	for _, p := range done {
		if p.done != nil {
			p.done(nil)
		}
	}
	for _, p := range failed {
		if p.done != nil {
			p.done(fmt.Errorf("%w: shard %d: entry %d was replaced", ErrNotLeader, s.id, p.index))
		}
	}
	d.run()
	if j != nil {
		if s.n.async.Load() {
			go s.build(j)
		} else {
			s.build(j)
		}
	}
}

// takeOverLocked opens a journal when this broker leads and has applied an
// entry of its term: everything before that entry is committed and applied,
// and nothing follows it (proposals were closed), so the next index is
// known.
func (s *Shard) takeOverLocked() *journal {
	if s.j != nil {
		return nil
	}
	st := s.rn.BasicStatus()
	term := st.HardState.GetTerm()
	if st.RaftState != raft.StateLeader || s.appliedTerm != term {
		return nil
	}
	last, err := s.log.LastIndex()
	if err != nil || last != s.applied {
		return nil // entries of the term not yet applied: the next Ready
	}
	j := &journal{s: s, term: term, start: s.applied, next: last + 1}
	s.j = j
	s.n.cfg.Logger.Info("shard taken over", "shard", s.id, "term", term, "index", last)
	return j
}

// build makes the engine of a shard just taken over. It runs without
// Shard.mu: the engine replays the journal, and appends to it.
func (s *Shard) build(j *journal) {
	eng, err := s.n.cfg.NewEngine(s.id, j)
	s.mu.Lock()
	if s.j != j || j.deposed {
		s.mu.Unlock()
		if eng != nil {
			_ = eng.Close()
		}
		return
	}
	if err != nil {
		// The shard must not stay led and unserved: the lead goes to
		// another replica (the journal refuses until then, and is deposed
		// when the lead has moved).
		j.err = fmt.Errorf("replica: shard %d: building its engine: %w", s.id, err)
		to := uint64(0)
		for id := range s.rn.Status().Progress {
			if id != s.n.cfg.ID && (to == 0 || id < to) {
				to = id
			}
		}
		if to != 0 {
			s.rn.TransferLeader(to)
		}
		s.mu.Unlock()
		s.n.cfg.Logger.Error("shard engine", "shard", s.id, "err", err, "lead_to", to)
		s.n.kick()
		return
	}
	s.eng = eng
	s.mu.Unlock()
	if f := s.n.cfg.Served; f != nil {
		f(s.id, eng)
	}
}

// snapshotMark starts the data of a snapshot entry: an engine's state
// written as an entry of the shard's log (journal.WriteSnapshot), so that
// every replica has it, not only the broker whose engine wrote it. No
// engine record starts with it (their kinds are small numbers), and the
// journal hands the engine none of these entries as records.
//
//	snapshot entry = snapshotMark | pos uvarint | keep uvarint | engine snapshot
//
// pos is the last record the snapshot covers; keep the first index every
// replica keeps of the log once the entry is committed (journal.keepLocked):
// applying it, each compacts its log up to there (Log.Compact).
const snapshotMark = 0xff

// packedMark starts the data of an entry that holds an engine record
// compressed with zstd by the leader that proposed it, as brokers before
// s2Mark wrote them (read, no longer written):
//
//	packed record = packedMark | rawLen uvarint | zstd frame (log.CompressRecord)
const packedMark = 0xfe

// s2Mark starts the data of an entry that holds an engine record the
// leader that proposed it compressed (journal.Append, log.Compressor.Pack):
//
//	packed record = s2Mark | S2 block (its raw length first)
//
// Compressed once, at the leader, a record goes compressed to every
// replica and into every journal, where a large group of such records is
// found dense and written as it is (the journal's probe). Before, each
// broker compressed every record again in its own journal's groups: zstd
// took 16% of the three brokers' CPU under the harness's push, and the
// links and the disk carried the records whole. No engine record starts
// with it (their kinds are small numbers).
const s2Mark = 0xfd

// minPackBytes is the smallest record journal.Append compresses: the
// small ones (an ack's, a lease's) save too little.
const minPackBytes = 512

// packScratch holds the buffers records are compressed into, before the
// entry's data is copied out at its size.
var packScratch = sync.Pool{New: func() any { return new([]byte) }}

// maxPackScratch bounds the buffers packScratch keeps (a larger record's
// buffer goes back to the heap).
const maxPackScratch = 256 << 10

// packRecord returns the data of the entry that holds rec: rec compressed
// by c (s2Mark) when that makes it smaller, else a copy of rec.
func packRecord(c *rlog.Compressor, rec []byte) []byte {
	if len(rec) >= minPackBytes {
		bp := packScratch.Get().(*[]byte)
		b, ok := c.Pack(append((*bp)[:0], s2Mark), rec)
		var data []byte
		if ok && len(b) < len(rec) {
			data = append([]byte(nil), b...)
		}
		if cap(b) <= maxPackScratch {
			*bp = b
			packScratch.Put(bp)
		}
		if data != nil {
			return data
		}
	}
	return append([]byte(nil), rec...)
}

// unpackRecord returns the engine record an entry's data holds: the data
// itself, or what packRecord compressed (a new buffer), which must be at
// most maxRaw bytes.
func unpackRecord(data []byte, maxRaw int) ([]byte, error) {
	if len(data) == 0 {
		return data, nil
	}
	switch data[0] {
	case s2Mark:
		return rlog.UnpackRecord(nil, data[1:], maxRaw)
	case packedMark:
		n, k := binary.Uvarint(data[1:])
		if k <= 0 || n > uint64(maxRaw) {
			return nil, fmt.Errorf("replica: a compressed record's length: %w", errBadRecord)
		}
		return rlog.DecompressRecord(nil, data[1+k:], int(n))
	}
	return data, nil
}

// isSnapshot reports whether e is a snapshot entry.
func isSnapshot(e *pb.Entry) bool {
	d := e.GetData()
	return e.GetType() == pb.EntryNormal && len(d) > 0 && d[0] == snapshotMark
}

// isRecord reports whether e holds one of the engine's records: not
// Raft's empty entry of a new term, a configuration change or a snapshot.
func isRecord(e *pb.Entry) bool {
	d := e.GetData()
	return e.GetType() == pb.EntryNormal && len(d) > 0 && d[0] != snapshotMark
}

// readSnapshot returns the engine snapshot held by the snapshot entry at
// index, and the position it covers.
func (s *Shard) readSnapshot(index uint64) (uint64, []byte, error) {
	ents, err := s.log.Entries(index, index+1, 0)
	if err != nil {
		return 0, nil, fmt.Errorf("replica: shard %d: snapshot entry %d: %w", s.id, index, err)
	}
	if len(ents) != 1 || !isSnapshot(ents[0]) {
		return 0, nil, fmt.Errorf("replica: shard %d: entry %d holds no snapshot", s.id, index)
	}
	pos, _, state, ok := parseSnapshot(ents[0])
	if !ok {
		return 0, nil, fmt.Errorf("replica: shard %d: snapshot entry %d: %w", s.id, index, errBadRecord)
	}
	// The log may hand out the data it keeps in memory: the engine gets
	// its own copy.
	return pos, append([]byte(nil), state...), nil
}

// parseSnapshot splits snapshot entry e.
func parseSnapshot(e *pb.Entry) (pos, keep uint64, state []byte, ok bool) {
	d := e.GetData()[1:]
	pos, n := binary.Uvarint(d)
	if n <= 0 || pos >= e.GetIndex() {
		return 0, 0, nil, false
	}
	d = d[n:]
	keep, n = binary.Uvarint(d)
	if n <= 0 || keep > pos+1 {
		return 0, 0, nil, false
	}
	return pos, keep, d[n:], true
}
