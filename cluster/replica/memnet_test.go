package replica

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/regentmq/regent/engine"
)

// memLog is a Log in memory: the tests' stand-in for the broker's WAL.
type memLog struct{ *raft.MemoryStorage }

func newMemLog(t *testing.T, voters []uint64) *memLog {
	ms := raft.NewMemoryStorage()
	snap, hs := Bootstrap(voters)
	if err := ms.ApplySnapshot(snap); err != nil {
		t.Fatal(err)
	}
	if err := ms.SetHardState(hs); err != nil {
		t.Fatal(err)
	}
	return &memLog{ms}
}

func (l *memLog) Save(hs *pb.HardState, ents []*pb.Entry, snap *pb.Snapshot) error {
	if !raft.IsEmptySnap(snap) {
		if err := l.ApplySnapshot(snap); err != nil {
			return err
		}
	}
	if !raft.IsEmptyHardState(hs) {
		if err := l.SetHardState(hs); err != nil {
			return err
		}
	}
	return l.Append(ents)
}

func (l *memLog) Applied(uint64) {}

func (l *memLog) Compact(keep uint64) error {
	if first, _ := l.FirstIndex(); keep <= first {
		return nil
	}
	return l.MemoryStorage.Compact(keep - 1)
}

func (l *memLog) Marks(upTo uint64) (snapshot, confChange uint64) {
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	if first > last {
		return 0, 0
	}
	es, err := l.Entries(first, last+1, math.MaxUint64)
	if err != nil {
		panic(err)
	}
	for _, e := range es {
		switch {
		case e.GetType() != pb.EntryNormal:
			if confChange == 0 {
				confChange = e.GetIndex()
			}
		case isSnapshot(e) && (upTo == 0 || e.GetIndex() <= upTo):
			snapshot = e.GetIndex()
		}
	}
	return snapshot, confChange
}

// memNet carries the messages of several Nodes in memory, in the order
// they were sent, when the test says so; it can cut links and drop
// messages of its choosing. Every message goes through its wire form.
type memNet struct {
	t      *testing.T
	nodes  map[uint64]*Node
	queue  []flight
	cut    map[[2]uint64]bool // {from, to}
	drop   func(from, to uint64, m *pb.Message) bool
	paused map[uint64]bool // a paused node neither ticks, processes nor receives
}

type flight struct {
	from, to uint64
	envs     []Envelope
}

type memPort struct {
	net  *memNet
	from uint64
}

func (p memPort) Send(to uint64, envs []Envelope) {
	wire := make([]Envelope, 0, len(envs))
	for _, e := range envs {
		b, err := proto.Marshal(e.Msg)
		if err != nil {
			p.net.t.Errorf("marshal %v: %v", e.Msg.GetType(), err)
			continue
		}
		var m pb.Message
		if err := proto.Unmarshal(b, &m); err != nil {
			p.net.t.Errorf("unmarshal: %v", err)
			continue
		}
		wire = append(wire, Envelope{Shard: e.Shard, Msg: &m})
	}
	p.net.queue = append(p.net.queue, flight{from: p.from, to: to, envs: wire})
}

// deliver hands over what is queued now; it reports how many messages
// arrived.
func (n *memNet) deliver() int {
	q := n.queue
	n.queue = nil
	count := 0
	for _, f := range q {
		if n.cut[[2]uint64{f.from, f.to}] || n.paused[f.to] || n.nodes[f.to] == nil {
			continue
		}
		var envs []Envelope
		for _, e := range f.envs {
			if n.drop != nil && n.drop(f.from, f.to, e.Msg) {
				continue
			}
			envs = append(envs, e)
		}
		if len(envs) > 0 {
			n.nodes[f.to].Receive(envs)
			count += len(envs)
		}
	}
	return count
}

// isolate cuts every link to and from id (or mends them).
func (n *memNet) isolate(id uint64, cut bool) {
	for other := range n.nodes {
		if other != id {
			n.cut[[2]uint64{id, other}] = cut
			n.cut[[2]uint64{other, id}] = cut
		}
	}
}

func (n *memNet) ids() []uint64 {
	var ids []uint64
	for id := range n.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// settle processes and delivers until every node is quiet.
func (n *memNet) settle() {
	n.t.Helper()
	for round := 0; round < 200; round++ {
		busy := false
		for _, id := range n.ids() {
			if n.paused[id] {
				continue
			}
			node := n.nodes[id]
			if node.hasReady() {
				busy = true
				if err := node.Process(); err != nil {
					n.t.Fatalf("node %d: %v", id, err)
				}
			}
		}
		if n.deliver() > 0 {
			busy = true
		}
		if !busy {
			return
		}
	}
	n.t.Fatal("the network did not settle in 200 rounds")
}

// tick ticks every node that is not paused once, then settles.
func (n *memNet) tick() {
	for _, id := range n.ids() {
		if !n.paused[id] {
			n.nodes[id].Tick()
		}
	}
	n.settle()
}

// testCluster is three (or more) brokers holding shard 1.
type testCluster struct {
	t     *testing.T
	net   *memNet
	clock *engine.FakeClock
	built map[uint64][]*engine.Engine // every engine each node built
	// replayed is how many records each node's last engine replayed when
	// it was built.
	replayed map[uint64]int

	tune      func(*Config)
	logFor    func(id uint64) (Log, func() error)
	failBuild map[uint64]bool // NewEngine fails on these nodes
	ids       []uint64
}

const testShard = 1

func newTestCluster(t *testing.T, ids []uint64, tune func(*Config)) *testCluster {
	return newTestClusterOn(t, ids, tune, nil)
}

// newTestClusterOn is newTestCluster with each node's log from logFor (nil:
// in memory), which also gives the node's Config.Sync.
func newTestClusterOn(t *testing.T, ids []uint64, tune func(*Config), logFor func(id uint64) (Log, func() error)) *testCluster {
	c := &testCluster{
		t:         t,
		clock:     engine.NewFakeClock(time.Unix(1_800_000_000, 0)),
		built:     map[uint64][]*engine.Engine{},
		replayed:  map[uint64]int{},
		failBuild: map[uint64]bool{},
		tune:      tune,
		logFor:    logFor,
		ids:       ids,
	}
	c.net = &memNet{t: t, nodes: map[uint64]*Node{}, cut: map[[2]uint64]bool{}, paused: map[uint64]bool{}}
	for _, id := range ids {
		c.start(id)
	}
	t.Cleanup(func() {
		for _, n := range c.net.nodes {
			n.Close()
		}
	})
	return c
}

// start (re)starts node id over its log.
func (c *testCluster) start(id uint64) {
	t := c.t
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("REPLICA_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	cfg := Config{
		ID:        id,
		Transport: memPort{net: c.net, from: id},
		Logger:    logger.With("node", id),
		NewEngine: func(shard uint32, j engine.Journal) (*engine.Engine, error) {
			if c.failBuild[id] {
				return nil, errors.New("the engine could not be built (test)")
			}
			c.replayed[id] = 0
			j = countReplay{Journal: j, n: func() { c.replayed[id]++ }}
			e, err := engine.New(engine.Config{Clock: c.clock, NoTicker: true, JournalLeases: true, Logger: slog.New(slog.DiscardHandler)}, j)
			if err == nil {
				c.built[id] = append(c.built[id], e)
			}
			return e, err
		},
	}
	var log Log = newMemLog(t, c.ids)
	if c.logFor != nil {
		log, cfg.Sync = c.logFor(id)
	}
	if c.tune != nil {
		c.tune(&cfg)
	}
	n, err := NewNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.AddShard(testShard, log); err != nil {
		t.Fatal(err)
	}
	if old := c.net.nodes[id]; old != nil {
		old.Close()
	}
	c.net.nodes[id] = n
}

// wait runs fn, which waits for records to be committed, settling the
// network until it returns.
func (c *testCluster) wait(fn func() error) error {
	errc := make(chan error, 1)
	go func() { errc <- fn() }()
	for {
		select {
		case err := <-errc:
			c.net.settle()
			return err
		default:
			c.net.settle()
			time.Sleep(time.Millisecond)
		}
	}
}

// countReplay counts the records an engine replays.
type countReplay struct {
	engine.Journal
	n func()
}

func (j countReplay) Replay(after uint64, fn func(pos uint64, rec []byte) error) error {
	return j.Journal.Replay(after, func(pos uint64, rec []byte) error {
		j.n()
		return fn(pos, rec)
	})
}

func (c *testCluster) shard(id uint64) *Shard { return c.net.nodes[id].Shard(testShard) }

// engine returns node id's engine of the shard, failing when it has none.
func (c *testCluster) engine(id uint64) *engine.Engine {
	c.t.Helper()
	e, lead, term := c.shard(id).Engine()
	if e == nil {
		c.t.Fatalf("node %d serves no engine (leader %d, term %d)", id, lead, term)
	}
	return e
}

// elect makes id the leader and waits until it has taken the shard over.
func (c *testCluster) elect(id uint64) {
	c.t.Helper()
	if err := c.shard(id).Campaign(); err != nil {
		c.t.Fatal(err)
	}
	c.net.settle()
	c.engine(id)
}

// leader ticks the unpaused nodes until one of them has taken the shard
// over, and returns it.
func (c *testCluster) leader(among ...uint64) uint64 {
	c.t.Helper()
	for i := 0; i < 200; i++ {
		for _, id := range among {
			if e, _, _ := c.shard(id).Engine(); e != nil {
				return id
			}
		}
		c.net.tick()
	}
	c.t.Fatalf("none of %v took the shard over in 200 ticks", among)
	return 0
}

// outcome records how an asynchronous call was answered.
type outcome struct {
	n   int
	err error
}

func (o *outcome) done(err error) { o.n++; o.err = err }

func (o *outcome) String() string {
	if o.n == 0 {
		return "unanswered"
	}
	return fmt.Sprintf("answered %d time(s), last with %v", o.n, o.err)
}

// pop pops from e and settles the network until the pop is answered (a
// leased pop is answered once its grant is committed).
func (c *testCluster) pop(e *engine.Engine, req engine.PopRequest) ([]engine.Message, error) {
	c.t.Helper()
	var got []engine.Message
	var gerr error
	answered := false
	e.PopAsync(req, func(ms []engine.Message, _ bool, err error) {
		got, gerr, answered = append([]engine.Message(nil), ms...), err, true
	})
	c.net.settle()
	if !answered {
		c.t.Fatalf("pop %+v: unanswered with the network settled", req)
	}
	return got, gerr
}

// ack acks on e and settles the network until it is answered.
func (c *testCluster) ack(e *engine.Engine, items ...engine.AckItem) ([]engine.AckResult, error) {
	c.t.Helper()
	res := make([]engine.AckResult, len(items))
	o := &outcome{}
	e.AckAsync(items, res, o.done)
	c.net.settle()
	if o.n != 1 {
		c.t.Fatalf("ack: %v with the network settled", o)
	}
	return res, o.err
}
