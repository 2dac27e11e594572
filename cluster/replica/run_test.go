package replica

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/regentmq/regent/engine"
)

// chanNet carries messages between Nodes driven by Run, each on its own
// goroutines: a message goes through its wire form into the receiver's
// inbox, and is dropped when the inbox is full or either end is down.
type chanNet struct {
	mu    sync.Mutex
	nodes map[uint64]*Node
	inbox map[uint64]chan []Envelope
	down  map[uint64]bool
}

type chanPort struct {
	n    *chanNet
	from uint64
}

func (p chanPort) Send(to uint64, envs []Envelope) {
	p.n.mu.Lock()
	in, down := p.n.inbox[to], p.n.down[to] || p.n.down[p.from]
	p.n.mu.Unlock()
	if down || in == nil {
		return
	}
	wire := make([]Envelope, 0, len(envs))
	for _, e := range envs {
		b, err := proto.Marshal(e.Msg)
		if err != nil {
			panic(err)
		}
		var m pb.Message
		if err := proto.Unmarshal(b, &m); err != nil {
			panic(err)
		}
		wire = append(wire, Envelope{Shard: e.Shard, Msg: &m})
	}
	select {
	case in <- wire:
	default:
	}
}

// shardEngines is the tests' NewEngine: an engine that journals its
// leases, on clock (a fake one: its timers move with Tick) or, nil, the
// real one.
func shardEngines(clock engine.Clock) func(uint32, engine.Journal) (*engine.Engine, error) {
	return func(_ uint32, j engine.Journal) (*engine.Engine, error) {
		cfg := engine.Config{JournalLeases: true, SnapshotEveryBytes: -1, Logger: slog.New(slog.DiscardHandler)}
		if clock != nil {
			cfg.Clock, cfg.NoTicker = clock, true
		}
		return engine.New(cfg, j)
	}
}

// join puts n on the network as id and runs it until ctx ends: its loop
// (Run, 10 ms ticks) and a goroutine stepping what its inbox receives.
func (net *chanNet) join(ctx context.Context, wg *sync.WaitGroup, id uint64, n *Node) {
	in := make(chan []Envelope, 4096)
	net.mu.Lock()
	net.nodes[id], net.inbox[id] = n, in
	net.mu.Unlock()
	wg.Add(2)
	go func() {
		defer wg.Done()
		_ = n.Run(ctx, 10*time.Millisecond)
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case envs := <-in:
				n.Receive(envs)
			}
		}
	}()
}

// Nodes run on their own (Run, 10 ms ticks) with pushes from several
// goroutines at once; the leader dies; a new leader takes the shard over,
// the producers send what failed there, and it holds every push that was
// answered, once.
func TestRunFailsOverUnderConcurrentPushes(t *testing.T) {
	net := &chanNet{nodes: map[uint64]*Node{}, inbox: map[uint64]chan []Envelope{}, down: map[uint64]bool{}}
	clock := engine.NewFakeClock(time.Unix(1_800_000_000, 0))
	stops := map[uint64]context.CancelFunc{}
	var wg sync.WaitGroup
	for _, id := range voters3 {
		n, err := NewNode(Config{ID: id, Transport: chanPort{net, id}, NewEngine: shardEngines(clock)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.AddShard(testShard, newMemLog(t, voters3)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		stops[id] = cancel
		net.join(ctx, &wg, id, n)
	}
	defer func() {
		for _, stop := range stops {
			stop()
		}
		wg.Wait()
		for _, n := range net.nodes {
			n.Close()
		}
	}()

	leader := func(exclude uint64) (uint64, *engine.Engine) {
		for _, id := range voters3 {
			if id == exclude {
				continue
			}
			if e, _, _ := net.nodes[id].Shard(testShard).Engine(); e != nil {
				return id, e
			}
		}
		return 0, nil
	}
	waitLeader := func(exclude uint64, within time.Duration) (uint64, *engine.Engine, time.Duration) {
		start := time.Now()
		for time.Since(start) < within {
			if id, e := leader(exclude); e != nil {
				return id, e, time.Since(start)
			}
			time.Sleep(time.Millisecond)
		}
		t.Fatalf("no broker took the shard over within %s", within)
		return 0, nil, 0
	}
	first, firstEngine, took := waitLeader(0, 10*time.Second)
	t.Logf("broker %d took the shard over %s after start", first, took)

	// Eight producers push through whichever broker serves the shard; one
	// whose push fails (its broker died) sends it again, with its
	// transactionId, to the next leader, as a client following not_leader
	// does.
	var answered sync.Map
	var count atomic.Int64
	var dead atomic.Uint64
	var killedAt atomic.Int64
	var failover atomic.Int64 // the first push answered by the next leader, after the kill
	var pw sync.WaitGroup
	for w := range 8 {
		pw.Add(1)
		go func() {
			defer pw.Done()
			for i := range 50 {
				txn := fmt.Sprint("w", w, "-", i)
				for try := 0; ; try++ {
					if try == 200 {
						t.Errorf("push %s: no broker answered it", txn)
						return
					}
					_, e := leader(dead.Load())
					if e == nil {
						time.Sleep(5 * time.Millisecond)
						continue
					}
					ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
					res, err := e.Push(ctx, []engine.PushItem{{Queue: "q", Partition: fmt.Sprint("p", w%4), TransactionID: txn, Payload: []byte(txn)}})
					cancel()
					if err != nil {
						continue
					}
					if res[0].Status == engine.Queued || res[0].Status == engine.Duplicate {
						answered.Store(txn, true)
						count.Add(1)
						if k := killedAt.Load(); k != 0 && failover.Load() == 0 && e != firstEngine {
							failover.CompareAndSwap(0, time.Now().UnixNano()-k)
						}
						break
					}
				}
				if i == 25 && w == 0 {
					// The leader dies in the middle of the pushes.
					net.mu.Lock()
					net.down[first] = true
					net.mu.Unlock()
					stops[first]()
					dead.Store(first)
					killedAt.Store(time.Now().UnixNano())
				}
			}
		}()
	}
	pw.Wait()
	next, e2, _ := waitLeader(first, 10*time.Second)
	t.Logf("broker %d leads after the kill; the first push it answered came %s after the kill; %d pushes answered",
		next, time.Duration(failover.Load()).Round(time.Millisecond), count.Load())
	if count.Load() != 8*50 {
		t.Fatalf("%d of %d pushes were answered", count.Load(), 8*50)
	}

	var held int
	for p := range 4 {
		var ms []engine.Message
		var err error
		for try := 0; try < 50; try++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			ms, err = e2.Pop(ctx, engine.PopRequest{Queue: "q", Partition: fmt.Sprint("p", p), Group: "check", Batch: 1000})
			cancel()
			if err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("pop p%d on the new leader: %v", p, err)
		}
		seen := map[string]bool{}
		for _, m := range ms {
			seen[m.TransactionID] = true
		}
		held += len(ms)
		answered.Range(func(k, _ any) bool {
			txn := k.(string)
			var w int
			fmt.Sscanf(txn, "w%d-", &w)
			if w%4 == p && !seen[txn] {
				t.Errorf("push %s was answered stored and the new leader does not hold it", txn)
			}
			return true
		})
	}
	if held != 8*50 {
		t.Fatalf("the new leader holds %d messages, want each of the %d pushes once", held, 8*50)
	}
}

// The node loop does not wait for its fsync: while the leader's Sync hangs,
// the entries proposed after the one it waits for still reach the
// followers (and what they answer is counted), and once the Sync returns
// every push is answered. A loop that waited in Sync sent nothing more.
func TestLoopGoesOnWhileItsSyncWaits(t *testing.T) {
	net := &chanNet{nodes: map[uint64]*Node{}, inbox: map[uint64]chan []Envelope{}, down: map[uint64]bool{}}
	var hold atomic.Bool
	release := make(chan struct{})
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	logs := map[uint64]*memLog{}
	for _, id := range voters3 {
		cfg := Config{ID: id, Transport: chanPort{net, id}, NewEngine: shardEngines(nil)}
		if id == 1 {
			cfg.Sync = func() error {
				if hold.Load() {
					<-release
				}
				return nil
			}
		}
		n, err := NewNode(cfg)
		if err != nil {
			t.Fatal(err)
		}
		logs[id] = newMemLog(t, voters3)
		if _, err := n.AddShard(testShard, logs[id]); err != nil {
			t.Fatal(err)
		}
		net.join(ctx, &wg, id, n)
	}
	released := false
	defer func() {
		if !released {
			close(release)
		}
		cancel()
		wg.Wait()
		for _, n := range net.nodes {
			n.Close()
		}
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("5 s without %s", what)
			}
		}
	}
	if err := net.nodes[1].Shard(testShard).Campaign(); err != nil {
		t.Fatal(err)
	}
	var e *engine.Engine
	waitFor("node 1 serving the shard", func() bool { e, _, _ = net.nodes[1].Shard(testShard).Engine(); return e != nil })
	one := func(txn string) []engine.PushItem {
		return []engine.PushItem{{Queue: "q", Partition: "p", TransactionID: txn, Payload: []byte(txn)}}
	}
	if _, err := e.Push(context.Background(), one("a")); err != nil {
		t.Fatal(err)
	}

	hold.Store(true)
	var answered atomic.Int32
	count := func(error) { answered.Add(1) }
	last := func(id uint64) uint64 { i, _ := logs[id].LastIndex(); return i }
	before := last(1)
	e.PushAsync(one("b"), make([]engine.PushResult, 1), count)
	waitFor("b in every replica's log", func() bool { return last(1) > before && last(2) == last(1) && last(3) == last(1) })
	b := last(1)
	// The leader's syncer now waits in Sync for b.
	e.PushAsync(one("c"), make([]engine.PushResult, 1), count)
	waitFor("c in the leader's log", func() bool { return last(1) > b })
	waitFor("c in the followers' logs while the leader's Sync waits", func() bool { return last(2) == last(1) && last(3) == last(1) })

	close(release)
	released = true
	waitFor("b and c answered once the Sync returned", func() bool { return answered.Load() == 2 })
}
