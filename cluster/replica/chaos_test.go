package replica

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/regentmq/regent/engine"
)

// Random faults over the in-memory network (cut links, paused brokers,
// lost messages), with pushes, pops and acks sent to whichever broker
// serves the shard at each step: once the faults heal, the leader holds
// every push that was answered as stored, each once and in order of its
// partition, and nothing that was never pushed; no push is answered twice;
// no message is delivered twice to a group while its lease is live; and no
// message whose completed ack was answered (and that the cursor passed)
// comes back to its group. Each seed replays the
// same faults and pushes (Raft's election timeouts are its own draws).
func TestRandomFaultsKeepTheDeliveryContract(t *testing.T) {
	seeds := 30
	if testing.Short() {
		seeds = 5
	}
	if n, err := strconv.Atoi(os.Getenv("REPLICA_SEEDS")); err == nil && n > 0 {
		seeds = n // the long run: REPLICA_SEEDS=2000 go test -run RandomFaults ./cluster/replica
	}
	var total chaosStats
	for seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			st := chaosRun(t, uint64(seed))
			total.answered += st.answered
			total.completed += st.completed
			total.takeovers += st.takeovers
		})
	}
	// What the runs tested, all together: a run without failover or ack
	// can happen (Raft's timeouts are random); all of them cannot.
	if total.answered == 0 || total.completed == 0 || total.takeovers <= seeds {
		t.Fatalf("the runs tested too little: %+v", total)
	}
}

type chaosStats struct{ answered, completed, takeovers int }

// popped is a consumer's leased pop, and then its ack.
type popped struct {
	ms    []engine.Message
	done  bool // the pop was answered
	acked bool // its ack was sent
	res   []engine.AckResult
	ack   *outcome
}

type sent struct {
	txn, partition string
	o              *outcome
}

func chaosRun(t *testing.T, seed uint64) chaosStats {
	rng := rand.New(rand.NewPCG(seed, 7))
	c := newTestCluster(t, voters3, nil)
	lossy := false
	c.net.drop = func(from, to uint64, m *pb.Message) bool { return lossy && rng.IntN(5) == 0 }
	var pushes []sent
	var pops []*popped
	delivered := map[string]bool{}
	for step := range 600 {
		switch r := rng.IntN(100); {
		case r < 3:
			c.net.isolate(uint64(1+rng.IntN(3)), true)
		case r < 6:
			for _, id := range voters3 {
				c.net.isolate(id, false)
			}
		case r < 8:
			c.net.paused[uint64(1+rng.IntN(3))] = true
		case r < 12:
			clear(c.net.paused)
		case r < 14:
			lossy = !lossy
		}
		for _, id := range voters3 {
			if c.net.paused[id] {
				continue
			}
			e, _, _ := c.shard(id).Engine()
			if e == nil {
				continue
			}
			if rng.IntN(2) == 0 {
				p := fmt.Sprint("p", rng.IntN(3))
				s := sent{txn: fmt.Sprint("s", step, "-", id), partition: p}
				s.o = push(e, "q", p, s.txn)
				pushes = append(pushes, s)
			}
			// A consumer pops from whoever serves, and acks what it got
			// there (or, after a failover, on the next leader).
			if rng.IntN(4) == 0 {
				pp := &popped{}
				e.PopAsync(engine.PopRequest{Queue: "q", Partition: fmt.Sprint("p", rng.IntN(3)), Group: "c", Batch: 3}, func(ms []engine.Message, _ bool, err error) {
					pp.ms, pp.done = append([]engine.Message(nil), ms...), true
					for _, m := range ms {
						if delivered[m.TransactionID] {
							// The clock stands still: no lease expires, and
							// none is released (acks are all completed).
							t.Errorf("%s was delivered to group c twice while its lease was live", m.TransactionID)
						}
						delivered[m.TransactionID] = true
					}
				})
				pops = append(pops, pp)
			}
			for _, pp := range pops {
				if pp.done && !pp.acked && len(pp.ms) > 0 && rng.IntN(2) == 0 {
					// A prefix of them: completed messages the cursor
					// passes, which must never come back (SEMANTICS.md's
					// cursor rule brings back completed messages behind
					// one that comes back).
					ms := pp.ms[:1+rng.IntN(len(pp.ms))]
					items := make([]engine.AckItem, len(ms))
					for i, m := range ms {
						items[i] = engine.AckItem{PartitionID: m.PartitionID, Group: "c", LeaseID: m.LeaseID, MessageID: m.ID, Status: engine.Completed}
					}
					pp.ms, pp.acked, pp.res, pp.ack = ms, true, make([]engine.AckResult, len(items)), &outcome{}
					e.AckAsync(items, pp.res, pp.ack.done)
				}
			}
		}
		c.net.tick()
	}
	lossy = false
	clear(c.net.paused)
	for _, id := range voters3 {
		c.net.isolate(id, false)
	}
	for range 30 {
		c.net.tick()
	}
	e := c.engine(c.leader(voters3...))

	pushed := map[string]sent{}
	answered := 0
	for _, s := range pushes {
		pushed[s.txn] = s
		if s.o.n > 1 {
			t.Fatalf("push %s answered %d times", s.txn, s.o.n)
		}
		if s.o.n == 1 && s.o.err == nil {
			answered++
		}
	}
	for _, p := range []string{"p0", "p1", "p2"} {
		got := held(t, c, e, "q", p, "check")
		seen := map[string]bool{}
		for _, txn := range got {
			s, ok := pushed[txn]
			switch {
			case !ok || s.partition != p:
				t.Fatalf("%s holds %s, which was never pushed there", p, txn)
			case seen[txn]:
				t.Fatalf("%s holds %s twice", p, txn)
			}
			seen[txn] = true
		}
		var want []string
		for _, s := range pushes {
			if s.partition == p && s.o.n == 1 && s.o.err == nil {
				want = append(want, s.txn)
				if !seen[s.txn] {
					t.Fatalf("push %s to %s was answered stored and is lost (the leader holds %d messages there)", s.txn, p, len(got))
				}
			}
		}
		// Answered pushes keep the order they were answered in.
		var order []string
		for _, txn := range got {
			if s := pushed[txn]; s.o.n == 1 && s.o.err == nil {
				order = append(order, txn)
			}
		}
		if !slices.Equal(order, want) {
			t.Fatalf("%s: answered pushes held as %v, want %v", p, order, want)
		}
	}
	// Completed messages never come back: once every lease has expired,
	// group c gets none of them again.
	completed := map[string]bool{}
	for _, pp := range pops {
		if pp.ack != nil && pp.ack.n == 1 && pp.ack.err == nil {
			for i, m := range pp.ms {
				if pp.res[i].Err == nil {
					completed[m.TransactionID] = true
				}
			}
		}
	}
	c.clock.Advance(time.Hour)
	e.Tick()
	for _, p := range []string{"p0", "p1", "p2"} {
		for _, txn := range held(t, c, e, "q", p, "c") {
			if completed[txn] {
				t.Fatalf("%s was completed and came back to its group", txn)
			}
		}
	}
	takeovers := 0
	for _, es := range c.built {
		takeovers += len(es)
	}
	t.Logf("%d pushes sent, %d answered stored, %d completed, %d takeovers", len(pushes), answered, len(completed), takeovers)
	return chaosStats{answered: answered, completed: len(completed), takeovers: takeovers}
}
