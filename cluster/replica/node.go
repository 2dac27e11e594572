package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/protocol"
)

// Envelope is one Raft message of one shard's group.
type Envelope struct {
	Shard uint32
	Msg   *pb.Message
}

// Transport carries Raft messages between brokers. Send is called from the
// node loop with every message of one Process for one peer; it must not
// block, and it may drop messages (Raft sends again what matters).
type Transport interface {
	Send(to uint64, msgs []Envelope)
}

// Log is one shard's Raft log on this broker. Raft reads it (raft.Storage);
// the node loop writes what each Ready holds with Save, and Config.Sync
// makes the Saves made so far durable at once. Raft reads no entry from it
// before that Sync: until it hears they are stable, it serves them from
// its own memory.
type Log interface {
	raft.Storage
	// Save appends entries (replacing any at the same indexes and after),
	// records the hard state when it is not empty, and installs snap when it
	// is not empty.
	Save(hs *pb.HardState, entries []*pb.Entry, snap *pb.Snapshot) error
	// Marks returns the index of the newest snapshot entry (an engine's
	// state: see snapshotMark) at or before upTo, and of the oldest
	// configuration change entry the log holds; 0 for none. It reads no
	// entry: a broker that starts again learns from it what it would
	// otherwise apply the whole committed log again to learn.
	Marks(upTo uint64) (snapshot, confChange uint64)
	// Compact drops the entries before keep, which is at most the
	// applied index plus one; it is called from the node loop, between
	// Saves.
	Compact(keep uint64) error
	// Applied says that the entries up to index are applied here (the
	// log may then let their data leave memory; until then the apply
	// reads them).
	Applied(index uint64)
}

// Config is what a Node is built from.
type Config struct {
	// ID is this broker's Raft id in every group: not zero.
	ID uint64
	// Transport carries the messages of every group to the other brokers.
	Transport Transport
	// NewEngine builds the engine of a shard this broker has just taken the
	// lead of, over j; it runs without any of the Node's locks, and the
	// engine replays j while it is built. The engine must journal its
	// leases (engine.Config.JournalLeases), or a failover forgets them.
	NewEngine func(shard uint32, j engine.Journal) (*engine.Engine, error)
	// Served, when set, is told of an engine once Shard.Engine returns it
	// (after NewEngine, if the lead was not lost meanwhile), off the
	// Node's locks: what must reach every served engine (a broker's queue
	// configurations) reaches it from here on.
	Served func(shard uint32, e *engine.Engine)
	// Sync makes every Save made before it was called durable; nil when
	// the Logs are durable as soon as they are saved. Run calls it from a
	// goroutine of its own while the node loop goes on saving: it must not
	// wait for the Saves made after it was called (Disk.Sync does not).
	Sync func() error
	// Maintain, when set, is called by Run's loop after each tick's
	// Process (Disk.Maintain): it may write records, and returns the
	// shards whose old entries hold the journal's front back; the engine
	// of those this broker leads snapshots, which compacts them.
	Maintain func() ([]uint32, error)
	// Preferred, when set, names each shard's preferred leader (the first
	// of its replica set): a leader that is not it hands it the lead back
	// once it is caught up (Node.Tick), so that leadership, spread at the
	// start, is spread again after a broker that died returns. Without it
	// one broker ends up leading every shard after a few failovers, does
	// every leader's work, and its death fails every shard over at once.
	Preferred func(shard uint32) uint64
	// Logger takes the Node's and Raft's messages; nil discards them.
	Logger *slog.Logger

	// ElectionTicks is the ticks without a leader's word before a follower
	// campaigns (default 10); HeartbeatTicks the ticks between a leader's
	// heartbeats (default 1).
	ElectionTicks, HeartbeatTicks int
	// MaxMsgBytes caps the entries of one append message (default 1 MiB);
	// MaxInflightMsgs and MaxInflightBytes cap what a leader has sent a
	// follower and not heard back about (defaults 256 and 32 MiB).
	MaxMsgBytes      uint64
	MaxInflightMsgs  int
	MaxInflightBytes uint64
	// MaxUncommittedBytes caps what a leader holds proposed and not yet
	// committed: past it, Append refuses with syscall.EAGAIN (default
	// 64 MiB). MaxEntryBytes caps one record (default DefaultMaxEntryBytes);
	// a peer's link takes frames of its Hello reply's MaxFrame, which must
	// hold the largest entry with its Raft message around it.
	MaxUncommittedBytes uint64
	MaxEntryBytes       int
	// DownTicks is how long a replica goes unheard before its groups'
	// logs stop keeping what it lacks (default 300 ticks: 30 s in Run).
	// Until then a replica that falls behind is caught up from the log;
	// after, a log passes it (its disk must not fill while a broker is
	// down), and when it returns it is sent the log's start and what
	// follows (DiskLog.Snapshot).
	DownTicks int
}

func (c *Config) setDefaults() error {
	if c.ID == 0 {
		return errors.New("replica: the node's id must not be zero")
	}
	if c.Transport == nil || c.NewEngine == nil {
		return errors.New("replica: a node needs a Transport and NewEngine")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ElectionTicks == 0 {
		c.ElectionTicks = 10
	}
	if c.HeartbeatTicks == 0 {
		c.HeartbeatTicks = 1
	}
	if c.DownTicks == 0 {
		c.DownTicks = 300
	}
	if c.MaxMsgBytes == 0 {
		c.MaxMsgBytes = 1 << 20
	}
	if c.MaxInflightMsgs == 0 {
		c.MaxInflightMsgs = 256
	}
	if c.MaxInflightBytes == 0 {
		c.MaxInflightBytes = 32 << 20
	}
	if c.MaxUncommittedBytes == 0 {
		c.MaxUncommittedBytes = 64 << 20
	}
	if c.MaxEntryBytes == 0 {
		c.MaxEntryBytes = DefaultMaxEntryBytes
	}
	return nil
}

// DefaultMaxEntryBytes is Config.MaxEntryBytes when none is given: what a
// link frame of the protocol's default size holds of an entry, with room
// for the Raft message and the request around it.
const DefaultMaxEntryBytes = protocol.DefaultMaxFrame - 64<<10

// Node is one broker's part of every shard group it belongs to.
type Node struct {
	cfg    Config
	logger raft.Logger

	mu     sync.Mutex
	shards map[uint32]*Shard
	order  []*Shard // by id: Process visits groups in a fixed order

	wake chan struct{}
	// ticks counts Tick calls; heard holds, per peer, the tick its last
	// message came at (*atomic.Int64): the groups' logs stop keeping what
	// a peer unheard for DownTicks lacks (down).
	ticks atomic.Int64
	heard sync.Map
	// async builds and closes engines on goroutines of their own (Run): a
	// replay must not hold back the heartbeats of the other groups. Set
	// before Run starts its loop and never changed after.
	async atomic.Bool
}

// NewNode returns a Node with no shard.
func NewNode(cfg Config) (*Node, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	return &Node{
		cfg:    cfg,
		logger: raftLogger{cfg.Logger},
		shards: make(map[uint32]*Shard),
		wake:   make(chan struct{}, 1),
	}, nil
}

// AddShard makes this broker a member of shard's group over log, which
// holds the group's state so far: a new group's log holds a snapshot
// naming its voters (Bootstrap).
func (n *Node) AddShard(shard uint32, log Log) (*Shard, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.shards[shard]; ok {
		return nil, fmt.Errorf("replica: shard %d is already on this node", shard)
	}
	c := &raft.Config{
		ID:                        n.cfg.ID,
		ElectionTick:              n.cfg.ElectionTicks,
		HeartbeatTick:             n.cfg.HeartbeatTicks,
		Storage:                   log,
		MaxSizePerMsg:             n.cfg.MaxMsgBytes,
		MaxInflightMsgs:           n.cfg.MaxInflightMsgs,
		MaxInflightBytes:          n.cfg.MaxInflightBytes,
		MaxUncommittedEntriesSize: n.cfg.MaxUncommittedBytes,
		CheckQuorum:               true,
		PreVote:                   true,
		// Only the engine of the leader proposes: a follower's proposal
		// is refused at once rather than forwarded (Append knows the
		// index it gets).
		DisableProposalForwarding: true,
		// Writes go through MsgStorageAppend and MsgStorageApply: see
		// process.
		AsyncStorageWrites: true,
		Logger:             n.logger,
	}
	applied, appliedTerm, snap, err := restartPoint(log)
	if err != nil {
		return nil, fmt.Errorf("replica: shard %d: %w", shard, err)
	}
	c.Applied = applied
	log.Applied(applied) // where the apply starts again (DiskLog.trim)
	rn, err := raft.NewRawNode(c)
	if err != nil {
		return nil, fmt.Errorf("replica: shard %d: %w", shard, err)
	}
	s := &Shard{id: shard, n: n, log: log, rn: rn, applied: applied, appliedTerm: appliedTerm, snapIndex: snap}
	n.shards[shard] = s
	n.order = append(n.order, s)
	slices.SortFunc(n.order, func(a, b *Shard) int { return int(a.id) - int(b.id) })
	return s, nil
}

// restartPoint is where applying log starts: after its committed entries.
// A follower applies nothing but configuration changes and the index of
// the newest snapshot entry (the engine exists on the leader only, and is
// built from the log when the lead comes), so what is committed needs no
// applying again when a broker starts, except from the oldest
// configuration change on (Raft rebuilds the group's configuration from
// them); the newest snapshot entry up to there is told by the log. Before,
// a broker that started again read its whole log back to apply it, and a
// candidate reads what lies between applied and committed at each
// campaign: a broker that had run a minute under load took 15 s and more to
// serve a shard it was elected to lead.
func restartPoint(log Log) (applied, appliedTerm, snap uint64, err error) {
	first, err := log.FirstIndex()
	if err != nil {
		return 0, 0, 0, err
	}
	hs, _, err := log.InitialState()
	if err != nil {
		return 0, 0, 0, err
	}
	applied = max(hs.GetCommit(), first-1)
	if _, conf := log.Marks(0); conf != 0 && conf <= applied {
		applied = max(conf-1, first-1)
	}
	if applied == 0 {
		return 0, 0, 0, nil
	}
	if appliedTerm, err = log.Term(applied); err != nil {
		return 0, 0, 0, err
	}
	snap, _ = log.Marks(applied)
	return applied, appliedTerm, snap, nil
}

// Shard returns the shard of that id, or nil.
func (n *Node) Shard(id uint32) *Shard {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.shards[id]
}

func (n *Node) list() []*Shard {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.order)
}

// Close stops serving every shard: the proposals still waiting are
// answered ErrClosed and the engines closed. Stop Run first.
func (n *Node) Close() {
	for _, s := range n.list() {
		s.close(ErrClosed)
	}
}

// kick wakes Run for a Process.
func (n *Node) kick() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// Tick advances every group by one tick.
func (n *Node) Tick() {
	n.ticks.Add(1)
	for _, s := range n.list() {
		s.mu.Lock()
		s.rn.Tick()
		if s.stand > 0 {
			s.stand--
			// A pre-candidate stands again too: its pre-vote may have been
			// refused by a replica that had not learnt of the death yet
			// (PeerDown), and a refused pre-vote waits out the election
			// timeout. A pre-vote still in flight is restarted, which costs
			// a round trip when one is longer than a tick.
			if st := s.rn.BasicStatus(); st.Lead == raft.None && st.RaftState != raft.StateCandidate {
				_ = s.rn.Campaign() // see PeerDown
			} else {
				s.stand = 0
			}
		}
		s.handBackLocked()
		d := s.checkLeadLocked()
		s.mu.Unlock()
		d.run()
	}
}

// handBackTicks is how long a leader that is not its shard's preferred
// leader keeps the lead, from taking the shard over, before it hands it to
// the preferred one (caught up and heard from): time for a returning
// broker to settle, and no lead ping-ponging while a broker comes and
// goes.
const handBackTicks = 30

// maxHandBackDoublings caps the doublings of handBackTicks for a preferred
// leader that keeps giving the lead away (noteGivenUpLocked): 64 × 30
// ticks, 3.2 minutes in Run.
const maxHandBackDoublings = 6

// givenUpForgetTicks is how long after the last time the preferred leader
// gave the lead away the count starts again (10 minutes in Run).
const givenUpForgetTicks = 6000

// noteGivenUpLocked notes a leadership transfer from peer to this broker:
// when peer is the shard's preferred leader, it gave the lead away because
// it could not serve the shard (its engine could not be built: Shard.build;
// a preferred leader hands the lead on for no other reason), and the lead
// waits twice as long before going back to it. A lead that moves because
// its broker died moves by an election, not a transfer, and the next
// hand-back waits as usual: the returning broker must get its shards back
// soon (a wait for every death kept leads away from a broker that came
// back, and doubled the failover times of the kill -9 checker). Caller
// holds s.mu.
func (s *Shard) noteGivenUpLocked(peer uint64) {
	if s.n.cfg.Preferred == nil || peer != s.n.cfg.Preferred(s.id) {
		return
	}
	now := s.n.ticks.Load()
	if now-s.givenUpAt > givenUpForgetTicks {
		s.givenUp = 0
	}
	s.givenUp++
	s.givenUpAt = now
}

// handBackLocked hands the lead to the shard's preferred leader when this
// broker has led it long enough without being that one, and the preferred
// one holds the whole log and answers (Raft's leadership transfer: the
// lead moves within a round trip or two, proposals meanwhile are refused
// and answered not_leader, which clients follow). Caller holds s.mu.
func (s *Shard) handBackLocked() {
	if s.n.cfg.Preferred == nil || s.j == nil || s.eng == nil {
		s.ledTicks = 0
		return
	}
	wait := handBackTicks
	if s.n.ticks.Load()-s.givenUpAt <= givenUpForgetTicks {
		wait <<= min(s.givenUp, maxHandBackDoublings)
	}
	if s.ledTicks++; s.ledTicks < wait {
		return
	}
	to := s.n.cfg.Preferred(s.id)
	if to == 0 || to == s.n.cfg.ID {
		return
	}
	if s.rn.BasicStatus().LeadTransferee != raft.None {
		return
	}
	follows := false // (Raft itself sends what the preferred one lacks before the lead moves)
	s.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == to {
			follows = pr.RecentActive && pr.State == tracker.StateReplicate
		}
	})
	if !follows {
		return
	}
	s.n.cfg.Logger.Info("shard lead handed back to its preferred leader", "shard", s.id, "to", to, "term", s.j.term)
	s.ledTicks = 0
	s.rn.TransferLeader(to)
}

// Receive steps messages from another broker into their groups. A message
// for a shard this broker does not hold is dropped.
func (n *Node) Receive(envs []Envelope) {
	var from uint64
	for _, env := range envs {
		if f := env.Msg.GetFrom(); f != from {
			from = f
			n.heardFrom(f)
		}
		s := n.Shard(env.Shard)
		if s == nil || env.Msg == nil {
			continue
		}
		m := env.Msg
		var lost *pb.Message
		var err error
		s.mu.Lock()
		switch {
		case m.GetType() == pb.MsgAppResp && m.GetReject():
			s.noteLostLogLocked(m)
		case m.GetType() == pb.MsgHeartbeat:
			lost = s.lostLogLocked(m)
		case m.GetType() == pb.MsgTimeoutNow:
			s.noteGivenUpLocked(m.GetFrom())
		}
		if lost == nil {
			err = s.rn.Step(m)
		}
		d := s.checkLeadLocked()
		s.mu.Unlock()
		d.run()
		if lost != nil {
			n.cfg.Transport.Send(lost.GetTo(), []Envelope{{Shard: s.id, Msg: lost}})
		}
		if err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) {
			n.cfg.Logger.Debug("raft message refused", "shard", env.Shard, "type", env.Msg.GetType().String(), "err", err)
		}
	}
	n.kick()
}

// PeerDown tells the node that its connection to broker peer broke: the
// peer's process died (its kernel closed the connection), or the network
// between them failed. Every group that followed peer forgets it (Raft's
// ForgetLeader: a leaderless follower grants pre-votes at once, where
// CheckQuorum has it refuse them for an election timeout after it last
// heard a leader), and the group's lowest voter other than peer stands for
// election now and at each of the next standTicks ticks while the group
// has no leader. So a leader whose process died is replaced within a few
// round trips instead of an election timeout. A leader that is alive
// keeps its lead: the replicas that still hear it refuse the pre-vote,
// and its next heartbeat makes the others its followers again.
func (n *Node) PeerDown(peer uint64) {
	for _, s := range n.list() {
		s.mu.Lock()
		st := s.rn.BasicStatus()
		if st.RaftState == raft.StateFollower && st.Lead == peer {
			_ = s.rn.ForgetLeader()
			if lowestVoter(s.rn, peer) == n.cfg.ID {
				s.stand = standTicks
				_ = s.rn.Campaign()
			}
		}
		d := s.checkLeadLocked()
		s.mu.Unlock()
		d.run()
	}
	n.kick()
}

// standTicks is how many ticks after PeerDown a replica keeps standing
// for election while its group has no leader (a pre-vote asked before the
// other replicas learnt of the death is refused).
const standTicks = 5

// lowestVoter is the lowest voter of rn's group other than not.
func lowestVoter(rn *raft.RawNode, not uint64) uint64 {
	low := uint64(0)
	for id := range rn.Status().Config.Voters.IDs() {
		if id != not && (low == 0 || id < low) {
			low = id
		}
	}
	return low
}

// stored is what a Process leaves to do once the Saves it made are
// durable: the responses of one group's storage appends (Raft's
// AsyncStorageWrites), which tell Raft its entries are stable and carry
// the messages that must wait for them (a follower's append responses, a
// vote, the leader's own count toward a commit).
type stored struct {
	s    *Shard
	msgs []*pb.Message
}

// Process moves every group on and makes what it saved durable: it is
// process followed by flush, as a test steps a Node; Run does the two on
// goroutines of their own.
func (n *Node) Process() error {
	out, err := n.process()
	if err != nil {
		return err
	}
	return n.flush(out)
}

// process takes every group's Ready, sends its messages to the other
// brokers batched per peer, saves what it holds to the groups' Logs
// without waiting for them to be durable, applies what was committed and
// builds the engine of a shard just taken over. It returns what waits for
// the Saves to be durable (flush).
//
// Raft runs with AsyncStorageWrites: what a Ready asks written comes as a
// MsgStorageAppend whose responses go once it is durable, and nothing
// waits for an Advance. So the loop goes on while the journal fsyncs: a
// leader sends its followers the entries proposed meanwhile, and a
// follower saves the next append it receives, and one fsync makes the
// Saves of every round since the last durable (Raft thesis, 10.2.1: a
// leader's append and its followers' run at once; the leader counts
// itself toward a commit once its own is durable). Before, the loop waited
// for each round's fsync, and a push waited for up to four of them.
func (n *Node) process() ([]stored, error) {
	type ready struct {
		s  *Shard
		rd raft.Ready
	}
	var rs []ready
	for _, s := range n.list() {
		s.mu.Lock()
		if s.rn.HasReady() {
			rs = append(rs, ready{s: s, rd: s.rn.Ready()})
		}
		s.mu.Unlock()
	}
	if len(rs) == 0 {
		return nil, nil
	}
	var peers []uint64
	out := make(map[uint64][]Envelope)
	for _, r := range rs {
		for _, m := range r.rd.Messages {
			if to := m.GetTo(); to != raft.LocalAppendThread && to != raft.LocalApplyThread {
				peers = addEnvelope(out, peers, to, Envelope{Shard: r.s.id, Msg: m})
			}
		}
	}
	n.sendAll(out, peers)
	for _, r := range rs {
		r.s.snapshotsSent(r.rd.Messages)
	}
	var waits []stored
	for _, r := range rs {
		for _, m := range r.rd.Messages {
			if m.GetTo() != raft.LocalAppendThread {
				continue
			}
			if err := r.s.log.Save(storageHardState(m), m.GetEntries(), m.GetSnapshot()); err != nil {
				return nil, fmt.Errorf("replica: saving shard %d: %w", r.s.id, err)
			}
			if snap := m.GetSnapshot(); !raft.IsEmptySnap(snap) {
				r.s.installed(snap)
			}
			if len(m.GetResponses()) > 0 {
				waits = append(waits, stored{s: r.s, msgs: m.GetResponses()})
			}
		}
	}
	for _, r := range rs {
		for _, m := range r.rd.Messages {
			if m.GetTo() == raft.LocalApplyThread {
				r.s.apply(m.GetEntries(), m.GetResponses())
			}
		}
	}
	return waits, nil
}

// storageHardState is the hard state a MsgStorageAppend asks saved: empty
// when it carries none.
func storageHardState(m *pb.Message) *pb.HardState {
	if m.Term == nil && m.Vote == nil && m.Commit == nil {
		return nil
	}
	return &pb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}
}

// flush makes every Save made before it durable (Config.Sync), then
// delivers what waited for it in order: this broker's own responses are
// stepped into their groups, the others sent, batched per peer.
func (n *Node) flush(waits []stored) error {
	if len(waits) == 0 {
		return nil
	}
	if n.cfg.Sync != nil {
		if err := n.cfg.Sync(); err != nil {
			return fmt.Errorf("replica: sync: %w", err)
		}
	}
	var peers []uint64
	out := make(map[uint64][]Envelope)
	for _, w := range waits {
		stepped := false
		for _, m := range w.msgs {
			if to := m.GetTo(); to != n.cfg.ID {
				peers = addEnvelope(out, peers, to, Envelope{Shard: w.s.id, Msg: m})
				continue
			}
			if !stepped {
				w.s.mu.Lock()
				stepped = true
			}
			if err := w.s.rn.Step(m); err != nil {
				n.cfg.Logger.Debug("raft storage response refused", "shard", w.s.id, "type", m.GetType().String(), "err", err)
			}
		}
		if stepped {
			d := w.s.checkLeadLocked()
			w.s.mu.Unlock()
			d.run()
		}
	}
	n.sendAll(out, peers)
	n.kick()
	return nil
}

// addEnvelope adds env to what goes to peer to; peers lists the peers in
// the order they were first added.
func addEnvelope(out map[uint64][]Envelope, peers []uint64, to uint64, env Envelope) []uint64 {
	if _, ok := out[to]; !ok {
		peers = append(peers, to)
	}
	out[to] = append(out[to], env)
	return peers
}

// sendAll hands the transport each peer's messages in one call.
func (n *Node) sendAll(out map[uint64][]Envelope, peers []uint64) {
	for _, to := range peers {
		n.cfg.Transport.Send(to, out[to])
	}
}

// Run drives the node until ctx ends: a Tick every tick, and a process
// after each tick and whenever a message or a proposal arrives, while a
// syncer goroutine flushes what the rounds saved, as many rounds at once
// as came while the last fsync ran.
func (n *Node) Run(ctx context.Context, tick time.Duration) error {
	n.async.Store(true)
	ctx, cancel := context.WithCancel(ctx)
	q := &syncQueue{ready: make(chan struct{}, 1)}
	failed := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := n.syncLoop(ctx, q); err != nil {
			failed <- err
		}
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-failed:
			return err
		case <-t.C:
			n.Tick()
			waits, err := n.process()
			if err != nil {
				return err
			}
			q.put(waits)
			if err := n.maintain(); err != nil {
				return err
			}
			continue
		case <-n.wake:
		}
		waits, err := n.process()
		if err != nil {
			return err
		}
		q.put(waits)
	}
}

// syncQueue passes what the node loop's rounds leave to the syncer.
type syncQueue struct {
	mu    sync.Mutex
	waits []stored
	ready chan struct{}
}

func (q *syncQueue) put(waits []stored) {
	if len(waits) == 0 {
		return
	}
	q.mu.Lock()
	q.waits = append(q.waits, waits...)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *syncQueue) take() []stored {
	q.mu.Lock()
	defer q.mu.Unlock()
	w := q.waits
	q.waits = nil
	return w
}

// syncLoop flushes what the node loop queues until ctx ends.
func (n *Node) syncLoop(ctx context.Context, q *syncQueue) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-q.ready:
		}
		if err := n.flush(q.take()); err != nil {
			return err
		}
	}
}

// maintain runs Config.Maintain (its error stops Run, as a Process's
// does), and has the engines of the shards it names that this broker leads
// snapshot (each on a goroutine of its own:
// a snapshot waits for its records to be committed, which takes the loop).
func (n *Node) maintain() error {
	if n.cfg.Maintain == nil {
		return nil
	}
	pinned, err := n.cfg.Maintain()
	if err != nil {
		return fmt.Errorf("replica: maintaining the journal: %w", err)
	}
	now := time.Now()
	for _, id := range pinned {
		s := n.Shard(id)
		if s == nil {
			continue
		}
		e, _, _ := s.Engine()
		if e == nil || now.Before(s.pinNext) || !s.pinSnapping.CompareAndSwap(false, true) {
			continue
		}
		// A snapshot compacts the shard only when what pins the front
		// is not messages the engine keeps (a queue without retention
		// keeps them all, and then every snapshot is in vain): while
		// the shard stays pinned, the next one waits twice as long.
		s.pinWait = min(max(2*s.pinWait, maintainEvery), maxPinWait)
		s.pinNext = now.Add(s.pinWait)
		go func() {
			defer s.pinSnapping.Store(false)
			if err := e.Snapshot(); err != nil && !errors.Is(err, engine.ErrClosed) && !errors.Is(err, engine.ErrDeposed) {
				n.cfg.Logger.Warn("replica: a snapshot to compact the shard's log", "shard", id, "err", err)
			}
		}()
	}
	return nil
}

// maxPinWait bounds the wait between two snapshots maintain asks of a
// shard that keeps pinning the journal's front.
const maxPinWait = 5 * time.Minute

// raftLogger passes Raft's messages to slog: its warnings and errors as
// such, its chatter at debug.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(v ...any)              { r.l.Debug(fmt.Sprint(v...), "part", "raft") }
func (r raftLogger) Debugf(f string, v ...any)   { r.l.Debug(fmt.Sprintf(f, v...), "part", "raft") }
func (r raftLogger) Info(v ...any)               { r.l.Debug(fmt.Sprint(v...), "part", "raft") }
func (r raftLogger) Infof(f string, v ...any)    { r.l.Debug(fmt.Sprintf(f, v...), "part", "raft") }
func (r raftLogger) Warning(v ...any)            { r.l.Warn(fmt.Sprint(v...), "part", "raft") }
func (r raftLogger) Warningf(f string, v ...any) { r.l.Warn(fmt.Sprintf(f, v...), "part", "raft") }
func (r raftLogger) Error(v ...any)              { r.l.Error(fmt.Sprint(v...), "part", "raft") }
func (r raftLogger) Errorf(f string, v ...any)   { r.l.Error(fmt.Sprintf(f, v...), "part", "raft") }
func (r raftLogger) Fatal(v ...any)              { r.Panic(v...) }
func (r raftLogger) Fatalf(f string, v ...any)   { r.Panicf(f, v...) }
func (r raftLogger) Panic(v ...any)              { panic(fmt.Sprint(v...)) }
func (r raftLogger) Panicf(f string, v ...any)   { panic(fmt.Sprintf(f, v...)) }

// Bootstrap returns what every replica's log of a new group starts from: a
// snapshot at index 1 in term 1 with voters as the group and no engine
// state, and the hard state of term 1 (so the first election is for term
// 2, and no leader shares the bootstrap's term).
func Bootstrap(voters []uint64) (*pb.Snapshot, *pb.HardState) {
	return &pb.Snapshot{Metadata: &pb.SnapshotMetadata{
			Index:     new(uint64(1)),
			Term:      new(uint64(1)),
			ConfState: &pb.ConfState{Voters: slices.Clone(voters)},
		}}, &pb.HardState{
			Term:   new(uint64(1)),
			Commit: new(uint64(1)),
		}
}

// hasReady reports whether some group has a Ready to process.
func (n *Node) hasReady() bool {
	for _, s := range n.list() {
		s.mu.Lock()
		r := s.rn.HasReady()
		s.mu.Unlock()
		if r {
			return true
		}
	}
	return false
}

// heardFrom notes that a message of peer came now.
func (n *Node) heardFrom(peer uint64) {
	at, ok := n.heard.Load(peer)
	if !ok {
		at, _ = n.heard.LoadOrStore(peer, new(atomic.Int64))
	}
	at.(*atomic.Int64).Store(n.ticks.Load())
}

// down reports whether peer has been unheard for Config.DownTicks (never
// heard counts from the node's start).
func (n *Node) down(peer uint64) bool {
	var last int64
	if at, ok := n.heard.Load(peer); ok {
		last = at.(*atomic.Int64).Load()
	}
	return n.ticks.Load()-last >= int64(n.cfg.DownTicks)
}
