package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/regentmq/regent/engine"
	rlog "github.com/regentmq/regent/log"
)

var voters3 = []uint64{1, 2, 3}

// settled settles c's network; true, for use inside a condition.
func settled(c *testCluster) bool { c.net.settle(); return true }

func push(e *engine.Engine, queue, partition, txn string) *outcome {
	o := &outcome{}
	res := make([]engine.PushResult, 1)
	e.PushAsync([]engine.PushItem{{Queue: queue, Partition: partition, TransactionID: txn, Payload: []byte(txn)}}, res, o.done)
	return o
}

// held pops (leased, no wait) everything partition holds for group and
// returns the transactionIds.
func held(t *testing.T, c *testCluster, e *engine.Engine, queue, partition, group string) []string {
	t.Helper()
	ms, err := c.pop(e, engine.PopRequest{Queue: queue, Partition: partition, Group: group, Batch: 1000})
	if err != nil && !errors.Is(err, engine.ErrQueueNotFound) {
		t.Fatalf("pop %s/%s: %v", queue, partition, err)
	}
	var txns []string
	for _, m := range ms {
		txns = append(txns, m.TransactionID)
	}
	return txns
}

// A push is answered only once a majority has its record: when every
// append response to the leader is lost, the followers hold the entry and
// the push stays unanswered, and its message is not delivered either.
func TestLostAppendResponseNeverAcknowledgesAPush(t *testing.T) {
	c := newTestCluster(t, voters3, nil)
	c.elect(1)
	e := c.engine(1)
	o := push(e, "q", "p", "first")
	if c.net.settle(); o.n != 1 || o.err != nil {
		t.Fatalf("a push with the network whole: %v", o)
	}

	c.net.drop = func(from, to uint64, m *pb.Message) bool { return to == 1 && m.GetType() == pb.MsgAppResp }
	o = push(e, "q", "p", "second")
	for i := 0; i < 30; i++ { // three election timeouts of heartbeats
		c.net.tick()
	}
	if o.n != 0 {
		t.Fatalf("the push was %s without one append response reaching the leader", o)
	}
	last1, _ := c.shard(1).log.LastIndex()
	for _, id := range []uint64{2, 3} {
		if last, _ := c.shard(id).log.LastIndex(); last != last1 {
			t.Fatalf("follower %d holds up to %d, the leader %d: the entry did not reach it, the test proves nothing", id, last, last1)
		}
	}
	// A pop now is granted "first" only (what is committed), and the grant
	// itself cannot commit: the pop waits too.
	var popped []engine.Message
	answered := false
	e.PopAsync(engine.PopRequest{Queue: "q", Partition: "p", Group: "g1", Batch: 10}, func(ms []engine.Message, _ bool, err error) {
		popped, answered = append(popped, ms...), true
	})
	c.net.tick()
	if answered {
		t.Fatalf("a pop was answered (%d messages) while its grant could not commit", len(popped))
	}

	c.net.drop = nil
	c.net.tick()
	if o.n != 1 || o.err != nil {
		t.Fatalf("once the responses arrive the push is %s", o)
	}
	if !answered || len(popped) != 1 || popped[0].TransactionID != "first" {
		t.Fatalf("once the responses arrive the pop has %d messages (answered %v), want [first]", len(popped), answered)
	}
	if got := held(t, c, e, "q", "p", "g2"); !slices.Equal(got, []string{"first", "second"}) {
		t.Fatalf("after the commit a consumer got %q", got)
	}
}

// A leader cut off from the others (a pause, a partition) completes nothing
// it did not see committed: its push, its ack and its pop's lease grant stay unanswered while it is
// cut off, are refused once it learns of the new term, and its engine
// refuses everything after. The new leader holds what was committed and
// nothing else.
func TestDeposedLeaderCompletesNothing(t *testing.T) {
	c := newTestCluster(t, voters3, nil)
	c.elect(1)
	old := c.engine(1)
	if o := push(old, "q", "p", "a"); settled(c) && (o.err != nil || o.n != 1) {
		t.Fatalf("push a: %v", o)
	}
	ms, err := c.pop(old, engine.PopRequest{Queue: "q", Partition: "p", Group: "g"})
	if err != nil || len(ms) != 1 {
		t.Fatalf("pop: %v, %d messages", err, len(ms))
	}

	c.net.isolate(1, true)
	c.net.paused[1] = true // stopped: it neither ticks nor hears anything
	pushB := push(old, "q", "p", "b")
	ack := &outcome{}
	ackRes := make([]engine.AckResult, 1)
	old.AckAsync([]engine.AckItem{{PartitionID: ms[0].PartitionID, Group: "g", LeaseID: ms[0].LeaseID, MessageID: ms[0].ID, Status: engine.Completed}}, ackRes, ack.done)

	pop := &outcome{}
	old.PopAsync(engine.PopRequest{Queue: "q", Partition: "p", Group: "g3"}, func(ms []engine.Message, _ bool, err error) {
		if err == nil && len(ms) == 0 {
			err = errors.New("an empty answer")
		}
		pop.done(err)
	})

	next := c.leader(2, 3)
	// The old leader runs again, still cut off: it goes on believing it
	// leads until CheckQuorum steps it down; nothing it holds commits.
	c.net.paused[1] = false
	for i := 0; i < 5; i++ {
		c.net.tick()
	}
	if pushB.n != 0 || ack.n != 0 || pop.n != 0 {
		t.Fatalf("cut off, the old leader answered: push %s, ack %s, pop %s", pushB, ack, pop)
	}
	c.net.isolate(1, false)
	for i := 0; i < 30; i++ {
		c.net.tick()
	}
	for name, o := range map[string]*outcome{"push": pushB, "ack": ack, "pop": pop} {
		if o.n != 1 || !errors.Is(o.err, ErrNotLeader) {
			t.Errorf("the deposed leader's %s: %v (want one answer, not_leader)", name, o)
		}
	}
	if o := push(old, "q", "p", "c"); o.n != 0 {
		// a refusal comes back through done or at once; either way no success
		if o.err == nil {
			t.Errorf("the deposed engine took a push: %v", o)
		}
	}

	e := c.engine(next)
	// a is there and, its ack never committed, still leased to group g
	// (the grant was committed); b never reached a majority.
	if got := held(t, c, e, "q", "p", "g2"); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("the new leader holds %q, want [a]", got)
	}
	if got := held(t, c, e, "q", "p", "g"); len(got) != 0 {
		t.Fatalf("group g gets %q from the new leader while its lease of a is live", got)
	}
}

// A leader that dies in the middle of a batch: one push of four
// partitions (four records); two of its entries reach one follower, none
// reaches the other, and no response comes back. The push is never
// answered as a success. The new leader commits the two entries its log
// holds, and a client that sends the whole batch again, with its
// transactionIds, finds two stored and two taken: every message once.
func TestLeaderChangeMidBatch(t *testing.T) {
	c := newTestCluster(t, voters3, func(cfg *Config) { cfg.MaxMsgBytes = 1 }) // one entry per append message
	c.elect(1)
	old := c.engine(1)
	if o := push(old, "q", "warm", "w"); settled(c) && (o.err != nil || o.n != 1) {
		t.Fatalf("push: %v", o)
	}

	items := make([]engine.PushItem, 4)
	for i := range items {
		items[i] = engine.PushItem{Queue: "q", Partition: fmt.Sprint("p", i), TransactionID: fmt.Sprint("m", i), Payload: []byte{byte(i)}}
	}
	batch := &outcome{}
	old.PushAsync(items, make([]engine.PushResult, 4), batch.done)

	apps := 0
	c.net.drop = func(from, to uint64, m *pb.Message) bool {
		switch {
		case to == 1:
			return true // no response reaches the leader
		case m.GetType() == pb.MsgApp && to == 2 && len(m.GetEntries()) > 0:
			apps++
			return apps > 2 // the first two entries reach follower 2
		case m.GetType() == pb.MsgApp:
			return true // none reaches follower 3
		}
		return false
	}
	if err := c.net.nodes[1].Process(); err != nil {
		t.Fatal(err)
	}
	c.net.deliver()
	c.net.settle()
	if apps < 3 {
		t.Fatalf("the leader sent %d append messages with entries to follower 2; the test needs 4", apps)
	}
	c.net.drop = nil
	c.net.isolate(1, true)
	c.net.paused[1] = true // dead
	if batch.n != 0 {
		t.Fatalf("the batch was %s before any response reached the leader", batch)
	}

	next := c.leader(2, 3)
	if next != 2 {
		t.Fatalf("node %d took over; only node 2 holds the batch's first entries", next)
	}
	e := c.engine(next)
	var stored []string
	for i := range items {
		stored = append(stored, held(t, c, e, "q", items[i].Partition, "before")...)
	}
	if !slices.Equal(stored, []string{"m0", "m1"}) {
		t.Fatalf("the new leader holds %q of the batch, want [m0 m1]: the entries a majority holds, no more", stored)
	}

	res := make([]engine.PushResult, len(items))
	again := &outcome{}
	e.PushAsync(items, res, again.done)
	if c.net.settle(); again.n != 1 || again.err != nil {
		t.Fatalf("the batch sent again: %v", again)
	}
	for i, r := range res {
		want := engine.Duplicate
		if i >= 2 {
			want = engine.Queued
		}
		if r.Status != want {
			t.Errorf("the batch sent again, item %d: %v, want %v", i, r.Status, want)
		}
	}
	stored = nil
	for i := range items {
		stored = append(stored, held(t, c, e, "q", items[i].Partition, "after")...)
	}
	if !slices.Equal(stored, []string{"m0", "m1", "m2", "m3"}) {
		t.Fatalf("after the batch was sent again: %q", stored)
	}

	// The old leader comes back: its batch is answered not_leader, never
	// success, and its engine is gone.
	c.net.paused[1] = false
	c.net.isolate(1, false)
	for i := 0; i < 30; i++ {
		c.net.tick()
	}
	if batch.n != 1 || !errors.Is(batch.err, ErrNotLeader) {
		t.Fatalf("the old leader's batch: %v", batch)
	}
	if e, _, _ := c.shard(1).Engine(); e != nil {
		t.Fatal("the old leader still serves an engine")
	}
}

// A consumer's lease outlives its leader: the grant was committed, so the
// next leader knows it, accepts the consumer's acks under it, holds its
// messages back until it expires (at its time, not before), and refuses an
// ack under a lease it never granted. Completed messages never come back.
func TestLeaseContinuesOnTheNextLeader(t *testing.T) {
	c := newTestCluster(t, voters3, nil)
	c.elect(1)
	old := c.engine(1)
	for _, m := range []string{"a", "b", "c"} {
		push(old, "q", "p", m)
	}
	c.net.settle()
	ms, err := c.pop(old, engine.PopRequest{Queue: "q", Partition: "p", Group: "g", Batch: 3})
	if err != nil || len(ms) != 3 {
		t.Fatalf("pop: %v, %d messages", err, len(ms))
	}
	ackOf := func(m engine.Message) engine.AckItem {
		return engine.AckItem{PartitionID: m.PartitionID, Group: "g", LeaseID: m.LeaseID, MessageID: m.ID, Status: engine.Completed}
	}
	if res, err := c.ack(old, ackOf(ms[1])); err != nil || res[0].Err != nil {
		t.Fatalf("ack b: %v %v", err, res[0].Err)
	}

	c.net.isolate(1, true)
	c.net.paused[1] = true
	next := c.leader(2, 3)
	e := c.engine(next)

	if got := held(t, c, e, "q", "p", "g"); len(got) != 0 {
		t.Fatalf("the new leader gave group g %q while its lease is live", got)
	}
	bogus := ackOf(ms[2])
	bogus.LeaseID = engine.UUID{9, 9, 9}
	if res, err := c.ack(e, bogus); err != nil || !errors.Is(res[0].Err, engine.ErrLeaseInvalid) {
		t.Fatalf("an ack under a lease never granted: %v, %v (want lease invalid)", err, res[0].Err)
	}
	if res, err := c.ack(e, ackOf(ms[0])); err != nil || res[0].Err != nil {
		t.Fatalf("the consumer's ack of a under its lease, on the new leader: %v, %v", err, res[0].Err)
	}
	if res, err := c.ack(e, ackOf(ms[1])); err != nil || res[0].Err != nil {
		t.Fatalf("b's ack repeated on the new leader: %v, %v (want the first answer again)", err, res[0].Err)
	}

	// The lease expires at its time (300 s after the pop), not before.
	c.clock.Advance(299 * time.Second)
	e.Tick()
	if got := held(t, c, e, "q", "p", "g"); len(got) != 0 {
		t.Fatalf("a second before the lease's expiry group g got %q", got)
	}
	c.clock.Advance(2 * time.Second)
	e.Tick()
	if got := held(t, c, e, "q", "p", "g"); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("after the lease expired group g got %q, want [c]: a and b were completed", got)
	}
}

// A leader that cannot build the shard's engine (its disk, its keys) does
// not keep the shard unserved: it hands the lead to another replica, which
// serves it.
func TestALeaderThatCannotServeHandsTheLeadOver(t *testing.T) {
	c := newTestCluster(t, voters3, nil)
	c.failBuild[1] = true
	if err := c.shard(1).Campaign(); err != nil {
		t.Fatal(err)
	}
	c.net.settle()
	next := c.leader(1, 2, 3)
	if next == 1 {
		t.Fatal("node 1 serves the shard although its engine cannot be built")
	}
	if o := push(c.engine(next), "q", "p", "x"); settled(c) && (o.n != 1 || o.err != nil) {
		t.Fatalf("a push to the new leader: %v", o)
	}
}

// ticksToLeader ticks until one of among serves the shard, and says how
// many ticks it took (failing past limit).
func ticksToLeader(c *testCluster, limit int, among ...uint64) (uint64, int) {
	c.t.Helper()
	for i := 0; i <= limit; i++ {
		for _, id := range among {
			if e, _, _ := c.shard(id).Engine(); e != nil {
				return id, i
			}
		}
		c.net.tick()
	}
	c.t.Fatalf("none of %v took the shard over in %d ticks", among, limit)
	return 0, 0
}

// TestPeerDownElectsWithoutWaiting: when the replicas learn that the
// leader's connection broke (its process died), a new leader is elected
// within a few round trips, not an election timeout (10 ticks here), even
// when one replica learns it after the other stood.
func TestPeerDownElectsWithoutWaiting(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprint("late=", late), func(t *testing.T) {
			c := newTestCluster(t, voters3, nil)
			c.elect(1)
			c.net.isolate(1, true)
			c.net.paused[1] = true
			c.net.nodes[2].PeerDown(1)
			if late {
				c.net.settle() // 2's pre-vote reaches 3, which still follows 1
			}
			c.net.nodes[3].PeerDown(1)
			c.net.settle()
			id, ticks := ticksToLeader(c, 20, 2, 3)
			if ticks > 2 {
				t.Fatalf("node %d took the shard over %d ticks after the replicas learnt the leader's death", id, ticks)
			}
		})
	}
}

// TestPeerDownKeepsALiveLeader: a replica whose connection to a leader
// that is alive broke does not take the lead away: the other replica still
// hears the leader and refuses the pre-vote.
func TestPeerDownKeepsALiveLeader(t *testing.T) {
	c := newTestCluster(t, voters3, nil)
	c.elect(1)
	_, _, term := c.shard(1).Engine()
	c.net.nodes[2].PeerDown(1)
	for range 8 {
		c.net.tick()
	}
	if e, _, now := c.shard(1).Engine(); e == nil || now != term {
		t.Fatalf("the live leader lost its lead (serving %v, term %d, was %d)", e != nil, now, term)
	}
}

// A leader that is not its shard's preferred leader hands the lead back to
// it once it has led a while and the preferred one follows: leadership
// spreads again after a failover, and nothing answered is lost.
func TestLeadGoesBackToThePreferredLeader(t *testing.T) {
	c := newTestCluster(t, voters3, func(cfg *Config) { cfg.Preferred = func(uint32) uint64 { return 1 } })
	c.elect(2)
	e := c.engine(2)
	for _, m := range []string{"a", "b"} {
		if o := push(e, "q", "p", m); !settled(c) || o.n != 1 || o.err != nil {
			t.Fatalf("push %s: %v", m, o)
		}
	}
	for range handBackTicks - 2 {
		c.net.tick()
	}
	if l, _ := ticksToLeader(c, 0, 1, 2, 3); l != 2 {
		t.Fatalf("the lead moved to %d before broker 2 had led %d ticks", l, handBackTicks)
	}
	n, _ := ticksToLeaderChange(c, 2, 10)
	if n != 1 {
		t.Fatalf("after %d ticks the shard is led by %d, want the preferred leader 1", handBackTicks+10, n)
	}
	if got := held(t, c, c.engine(1), "q", "p", "g"); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("the preferred leader holds %q", got)
	}
	// It keeps the lead: the preferred leader hands nothing on.
	for range 2 * handBackTicks {
		c.net.tick()
	}
	if e, _, _ := c.shard(1).Engine(); e == nil {
		t.Fatal("the preferred leader gave the lead away")
	}
}

// ticksToLeaderChange ticks until a broker other than from serves the
// shard (at most limit ticks) and returns it (0: none did).
func ticksToLeaderChange(c *testCluster, from uint64, limit int) (uint64, int) {
	for i := 0; i <= limit; i++ {
		for _, id := range c.ids {
			if id == from {
				continue
			}
			if e, _, _ := c.shard(id).Engine(); e != nil {
				return id, i
			}
		}
		c.net.tick()
	}
	return 0, limit
}

// The snapshots maintain asks of a shard that keeps pinning the journal's
// front are paced: one at first, the next only after maintainEvery, and
// longer while it stays pinned (a queue without retention pins it for
// ever, and every snapshot is then in vain).
func TestPinnedShardSnapshotsArePaced(t *testing.T) {
	c := newTestCluster(t, voters3, func(cfg *Config) {
		cfg.Maintain = func() ([]uint32, error) { return []uint32{testShard}, nil }
	})
	c.elect(1)
	e := c.engine(1)
	if o := push(e, "q", "p", "a"); !settled(c) || o.n != 1 || o.err != nil {
		t.Fatalf("push: %v", o)
	}
	s := c.shard(1)
	for range 20 {
		must(t, c.net.nodes[1].maintain())
		for s.pinSnapping.Load() {
			c.net.settle()
			time.Sleep(time.Millisecond)
		}
		c.net.settle()
	}
	last, _ := s.log.LastIndex()
	first, _ := s.log.FirstIndex()
	ents, err := s.log.Entries(first, last+1, 1<<30)
	must(t, err)
	n := 0
	for _, e := range ents {
		if isSnapshot(e) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("20 rounds of maintain within %v wrote %d snapshots, want 1", maintainEvery, n)
	}
	if s.pinWait != maintainEvery {
		t.Fatalf("the next snapshot waits %v, want %v", s.pinWait, maintainEvery)
	}
}

// A push's record is compressed once, by the leader that proposes it: every
// replica's log holds the compressed entry (no replica compresses it
// again), and the next leader reads the messages back whole from it.
func TestRecordsAreCompressedOnceByTheLeader(t *testing.T) {
	c := newTestCluster(t, voters3, nil)
	c.elect(1)
	e := c.engine(1)
	items := make([]engine.PushItem, 200)
	for i := range items {
		items[i] = engine.PushItem{Queue: "q", Partition: "p", TransactionID: fmt.Sprint("t", i),
			Payload: fmt.Appendf(nil, `{"order":%d,"status":"paid","customer":"someone@example.com","items":["apple","pear"]}`, i)}
	}
	o := &outcome{}
	e.PushAsync(items, make([]engine.PushResult, len(items)), o.done)
	if c.net.settle(); o.n != 1 || o.err != nil {
		t.Fatalf("the push: %v", o)
	}
	raw := 0
	for _, it := range items {
		raw += len(it.Payload) + len(it.TransactionID)
	}
	for _, id := range voters3 {
		l := c.shard(id).log
		last, _ := l.LastIndex()
		first, _ := l.FirstIndex()
		ents, err := l.Entries(first, last+1, math.MaxUint64)
		if err != nil {
			t.Fatal(err)
		}
		var packed []*pb.Entry
		for _, en := range ents {
			if isRecord(en) && en.GetData()[0] == s2Mark {
				packed = append(packed, en)
			}
		}
		if len(packed) != 1 || len(packed[0].GetData()) > raw/3 {
			t.Fatalf("replica %d holds %d compressed records (want the push's, under %d bytes)", id, len(packed), raw/3)
		}
	}

	c.net.isolate(1, true)
	c.net.paused[1] = true
	next := c.engine(c.leader(2, 3))
	ms, err := c.pop(next, engine.PopRequest{Queue: "q", Partition: "p", Group: "g", Batch: 1000})
	if err != nil || len(ms) != len(items) {
		t.Fatalf("the next leader's pop: %v, %d messages of %d", err, len(ms), len(items))
	}
	for i, m := range ms {
		if m.TransactionID != items[i].TransactionID || string(m.Payload) != string(items[i].Payload) {
			t.Fatalf("message %d on the next leader: %q %q, want %q %q", i, m.TransactionID, m.Payload, items[i].TransactionID, items[i].Payload)
		}
	}
}

// packRecord leaves small and dense records as they are (a copy), and
// unpackRecord refuses a compressed record longer than it allows, and
// still reads the records brokers compressed with zstd before S2.
func TestPackRecord(t *testing.T) {
	small := []byte{3, 1, 2, 3}
	if got := packRecord(nil, small); string(got) != string(small) || &got[0] == &small[0] {
		t.Fatalf("a small record: %v (want a copy of itself)", got)
	}
	dense := noise(5, 8<<10)
	if got := packRecord(nil, dense); string(got) != string(dense) {
		t.Fatal("a record that does not compress was changed")
	}
	rec := append([]byte{3}, []byte(strings.Repeat("the same words again ", 500))...)
	p := packRecord(nil, rec)
	if p[0] != s2Mark || len(p) >= len(rec)/4 {
		t.Fatalf("a compressible record of %d bytes packed to %d (mark %#x)", len(rec), len(p), p[0])
	}
	if got, err := unpackRecord(p, len(rec)); err != nil || string(got) != string(rec) {
		t.Fatalf("unpack: %v", err)
	}
	if _, err := unpackRecord(p, len(rec)-1); err == nil {
		t.Fatal("a record past the entry limit was unpacked")
	}
	if _, err := unpackRecord([]byte{s2Mark, 0x80}, 1<<20); err == nil {
		t.Fatal("a truncated length was unpacked")
	}
	if _, err := unpackRecord(p[:len(p)-3], len(rec)); err == nil {
		t.Fatal("a cut S2 block was unpacked")
	}
	// Records of the largest sizes: a 1 MiB message of noise is stored as
	// it is, 4 MiB of clear text is packed and comes back whole.
	big := append([]byte{3}, noise(6, 1<<20)...)
	if got := packRecord(nil, big); string(got) != string(big) {
		t.Fatal("a 1 MiB record that does not compress was changed")
	}
	large := append([]byte{3}, []byte(strings.Repeat(`{"order":1234,"status":"paid"}`, 4<<20/30))...)
	lp := packRecord(nil, large)
	if lp[0] != s2Mark || len(lp) >= len(large)/4 {
		t.Fatalf("a compressible record of %d bytes packed to %d", len(large), len(lp))
	}
	if got, err := unpackRecord(lp, len(large)); err != nil || string(got) != string(large) {
		t.Fatalf("unpack of %d bytes: %v", len(large), err)
	}

	// The zstd form an older leader wrote.
	old, ok := rlog.CompressRecord(binary.AppendUvarint([]byte{packedMark}, uint64(len(rec))), rec)
	if !ok {
		t.Fatal("zstd did not compress the record")
	}
	if got, err := unpackRecord(old, len(rec)); err != nil || string(got) != string(rec) {
		t.Fatalf("unpack of a zstd record: %v", err)
	}
	if _, err := unpackRecord(old, len(rec)-1); err == nil {
		t.Fatal("a zstd record past the entry limit was unpacked")
	}
	if _, err := unpackRecord([]byte{packedMark, 0x80}, 1<<20); err == nil {
		t.Fatal("a zstd record's truncated length was unpacked")
	}
}

// A preferred leader that cannot serve the shard (its engine cannot be
// built) gives the lead away, and gets it back less and less often: each
// time it gives the lead away doubles the wait before the next hand-back,
// where the lead used to bounce every handBackTicks for as long as the
// fault lasted. A lead that moves because its broker died is not that:
// TestLeadGoesBackToThePreferredLeader keeps its wait.
func TestLeadHandBackBacksOffWhileThePreferredCannotServe(t *testing.T) {
	c := newTestCluster(t, voters3, func(cfg *Config) { cfg.Preferred = func(uint32) uint64 { return 1 } })
	c.failBuild[1] = true
	c.elect(2)
	for range 20 * handBackTicks {
		c.net.tick()
	}
	takeovers := len(c.built[2]) + len(c.built[3])
	t.Logf("%d takeovers by brokers 2 and 3 in %d ticks", takeovers, 20*handBackTicks)
	// Waits of 30, 60, 120 and 240 ticks fit in 600: five takeovers at
	// most, where a fixed wait made about twenty.
	if takeovers > 6 {
		t.Fatalf("in %d ticks the shard was taken over %d times by the brokers that can serve it", 20*handBackTicks, takeovers)
	}
	if l, _ := ticksToLeader(c, 20, 2, 3); l == 0 {
		t.Fatal("no broker serves the shard")
	}
	// Once the preferred leader can serve again, it gets the lead back.
	c.failBuild[1] = false
	if n, _ := ticksToLeaderChangeTo(c, 1, 40*handBackTicks); n != 1 {
		t.Fatal("the preferred leader never got the lead back once it could serve it")
	}
}

// ticksToLeaderChangeTo ticks until broker to serves the shard (at most
// limit ticks) and returns it (0: it did not).
func ticksToLeaderChangeTo(c *testCluster, to uint64, limit int) (uint64, int) {
	for i := 0; i <= limit; i++ {
		if e, _, _ := c.shard(to).Engine(); e != nil {
			return to, i
		}
		c.net.tick()
	}
	return 0, limit
}
