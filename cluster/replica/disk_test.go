package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/regentmq/regent/engine"
	rlog "github.com/regentmq/regent/log"
)

func openDisk(t *testing.T, dir string, keep int) (*rlog.Log, *Disk) {
	return openDiskWith(t, rlog.Config{Dir: dir}, keep)
}

func openDiskWith(t *testing.T, cfg rlog.Config, keep int) (*rlog.Log, *Disk) {
	t.Helper()
	j, err := rlog.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d, err := OpenDisk(j, keep)
	if err != nil {
		_ = j.Close()
		t.Fatal(err)
	}
	return j, d
}

func ents(term uint64, from, to uint64, tag string) []*pb.Entry {
	var es []*pb.Entry
	for i := from; i <= to; i++ {
		es = append(es, &pb.Entry{Term: new(term), Index: new(i), Type: pb.EntryNormal.Enum(), Data: []byte(fmt.Sprintf("%s-%d", tag, i))})
	}
	return es
}

func checkLog(t *testing.T, l *DiskLog, want []*pb.Entry, hs *pb.HardState) {
	t.Helper()
	last, _ := l.LastIndex()
	if wantLast := want[len(want)-1].GetIndex(); last != wantLast {
		t.Fatalf("last index %d, want %d", last, wantLast)
	}
	got, err := l.Entries(want[0].GetIndex(), last+1, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	var scanned []*pb.Entry
	must(t, l.Scan(want[0].GetIndex(), last+1, func(e *pb.Entry) error {
		e.Data = bytes.Clone(e.GetData())
		scanned = append(scanned, e)
		return nil
	}))
	if len(scanned) != len(got) {
		t.Fatalf("Scan gave %d entries, Entries %d", len(scanned), len(got))
	}
	for i := range got {
		if !proto.Equal(scanned[i], got[i]) {
			t.Fatalf("Scan's entry %d is %v, Entries' %v", i, scanned[i], got[i])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].GetIndex() != want[i].GetIndex() || got[i].GetTerm() != want[i].GetTerm() || !bytes.Equal(got[i].GetData(), want[i].GetData()) {
			t.Fatalf("entry %d: index %d term %d %q, want index %d term %d %q", i, got[i].GetIndex(), got[i].GetTerm(), got[i].GetData(),
				want[i].GetIndex(), want[i].GetTerm(), want[i].GetData())
		}
		if term, err := l.Term(want[i].GetIndex()); err != nil || term != want[i].GetTerm() {
			t.Fatalf("Term(%d) = %d, %v; want %d", want[i].GetIndex(), term, err, want[i].GetTerm())
		}
	}
	st, cs, _ := l.InitialState()
	if st.GetTerm() != hs.GetTerm() || st.GetVote() != hs.GetVote() || st.GetCommit() != hs.GetCommit() {
		t.Fatalf("hard state %v, want %v", st, hs)
	}
	if len(cs.GetVoters()) != 3 {
		t.Fatalf("voters %v", cs.GetVoters())
	}
}

// The Raft logs of several shards share one journal and come back whole
// after a restart, with a follower's replaced tail replaced, and entries
// whose data left memory read back from the journal.
func TestDiskKeepsRaftLogsAcrossARestart(t *testing.T) {
	for _, keep := range []int{0, 1} { // default budget; one byte: every read goes to the journal
		t.Run(fmt.Sprint("keep=", keep), func(t *testing.T) {
			dir := t.TempDir()
			j, d := openDisk(t, dir, keep)
			a, b := d.Log(1), d.Log(2)
			for _, l := range []*DiskLog{a, b} {
				if err := l.Bootstrap([]uint64{1, 2, 3}); err != nil {
					t.Fatal(err)
				}
			}
			hsA := &pb.HardState{Term: new(uint64(3)), Vote: new(uint64(2)), Commit: new(uint64(4))}
			hsB := &pb.HardState{Term: new(uint64(2)), Vote: new(uint64(1)), Commit: new(uint64(3))}
			// interleaved, as one Process saves several groups
			must(t, a.Save(nil, ents(2, 2, 6, "a"), nil))
			must(t, b.Save(hsB, ents(2, 2, 3, "b"), nil))
			// a's tail from 5 on is replaced by a leader of term 3
			must(t, a.Save(hsA, ents(3, 5, 5, "a3"), nil))
			must(t, d.Sync())
			a.Applied(4) // what is applied may leave memory (trim)
			b.Applied(3)
			wantA := append(ents(2, 2, 4, "a"), ents(3, 5, 5, "a3")...)
			checkLog(t, a, wantA, hsA)
			checkLog(t, b, ents(2, 2, 3, "b"), hsB)
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}

			j, d = openDisk(t, dir, keep)
			defer j.Close()
			checkLog(t, d.Log(1), wantA, hsA)
			checkLog(t, d.Log(2), ents(2, 2, 3, "b"), hsB)
			if _, err := d.Log(1).Entries(1, 3, 1<<20); err != raft.ErrCompacted {
				t.Fatalf("entries before the bootstrap: %v, want ErrCompacted", err)
			}
			if _, err := d.Log(1).Entries(2, 7, 1<<20); err != raft.ErrUnavailable {
				t.Fatalf("entries past the last: %v, want ErrUnavailable", err)
			}
			// An entry that does not follow the log is refused, not kept.
			if err := d.Log(2).Save(nil, ents(2, 9, 9, "gap"), nil); err == nil {
				t.Fatal("an entry past the end of the log was taken")
			}
		})
	}
}

// Marks names the newest snapshot entry and the oldest configuration
// change, forgets those a new leader's entries replaced, and tells the
// same after a restart.
func TestDiskMarks(t *testing.T) {
	dir := t.TempDir()
	j, d := openDisk(t, dir, 0)
	l := d.Log(1)
	must(t, l.Bootstrap(voters3))
	snapAt := func(term, index uint64) *pb.Entry {
		return &pb.Entry{Term: new(term), Index: new(index), Type: pb.EntryNormal.Enum(), Data: []byte{snapshotMark, 1, 'x'}}
	}
	es := ents(2, 2, 3, "a")
	es = append(es, snapAt(2, 4))
	es = append(es, ents(2, 5, 6, "a")...)
	es = append(es, snapAt(2, 7), &pb.Entry{Term: new(uint64(2)), Index: new(uint64(8)), Type: pb.EntryConfChange.Enum()})
	must(t, l.Save(nil, es, nil))
	check := func(l *DiskLog, upTo, snap, conf uint64) {
		t.Helper()
		if s, c := l.Marks(upTo); s != snap || c != conf {
			t.Fatalf("Marks(%d) = %d, %d; want %d, %d", upTo, s, c, snap, conf)
		}
	}
	check(l, 0, 7, 8)
	check(l, 6, 4, 8)
	check(l, 3, 0, 8)
	// A leader of term 3 replaces the log from 6 on.
	must(t, l.Save(nil, ents(3, 6, 9, "b"), nil))
	check(l, 0, 4, 0)
	must(t, d.Sync())
	must(t, j.Close())
	j, d = openDisk(t, dir, 0)
	defer j.Close()
	check(d.Log(1), 0, 4, 0)
	check(d.Log(1), 3, 0, 0)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// diskCluster is a test cluster of three brokers whose Raft logs are
// journals on disk (cfg's, in a directory each, keeping keep bytes of
// entries in memory); a broker started again opens its journal again.
func diskCluster(t *testing.T, cfg rlog.Config, keep int) (*testCluster, map[uint64]*rlog.Log, map[uint64]*Disk) {
	return diskClusterIn(t, map[uint64]string{1: t.TempDir(), 2: t.TempDir(), 3: t.TempDir()}, cfg, keep, nil)
}

// diskClusterIn is diskCluster with the brokers' journals in dirs, which a
// test may change before starting a broker again (a new disk).
func diskClusterIn(t *testing.T, dirs map[uint64]string, cfg rlog.Config, keep int, tune func(*Config)) (*testCluster, map[uint64]*rlog.Log, map[uint64]*Disk) {
	open := map[uint64]*rlog.Log{}
	disks := map[uint64]*Disk{}
	t.Cleanup(func() {
		for _, j := range open {
			_ = j.Close()
		}
	})
	logFor := func(id uint64) (Log, func() error) {
		if j := open[id]; j != nil {
			_ = j.Close()
		}
		cfg.Dir = dirs[id]
		j, d := openDiskWith(t, cfg, keep)
		open[id], disks[id] = j, d
		l := d.Log(testShard)
		must(t, l.Bootstrap(voters3))
		return l, d.Sync
	}
	return newTestClusterOn(t, voters3, tune, logFor), open, disks
}

// Three brokers whose Raft logs are journals on disk: every push answered
// before the whole group restarts is served after it, by whichever broker
// leads then.
func TestAnsweredPushesSurviveARestartOfEveryBroker(t *testing.T) {
	c, _, _ := diskCluster(t, rlog.Config{}, 1<<10)
	c.elect(1)
	e := c.engine(1)
	var before []string
	for i := range 50 {
		txn := fmt.Sprint("m", i)
		o := push(e, "q", "p", txn)
		c.net.settle()
		if o.n != 1 || o.err != nil {
			t.Fatalf("push %s: %v", txn, o)
		}
		before = append(before, txn)
	}

	for _, id := range voters3 {
		c.start(id) // the node and its journal start again from disk
	}
	next := c.leader(1, 2, 3)
	got := held(t, c, c.engine(next), "q", "p", "g")
	if len(got) != len(before) {
		t.Fatalf("after the restart the leader holds %d messages, want %d", len(got), len(before))
	}
	for i := range before {
		if got[i] != before[i] {
			t.Fatalf("message %d is %s, want %s", i, got[i], before[i])
		}
	}
}

// A snapshot one leader's engine wrote is an entry of the shard's log:
// the next leader, on another broker, loads it and replays only what
// follows it, and so does a leader after every broker started again
// (which learns of the snapshot without applying the log again).
func TestTheNextLeaderStartsFromTheGroupsSnapshot(t *testing.T) {
	c, _, _ := diskCluster(t, rlog.Config{}, 1<<10)
	c.elect(1)
	e := c.engine(1)
	var want []string
	for i := range 40 {
		txn := fmt.Sprint("a", i)
		if o := push(e, "q", "p", txn); !settled(c) || o.n != 1 || o.err != nil {
			t.Fatalf("push %s: %v", txn, o)
		}
		want = append(want, txn)
	}
	ms, err := c.pop(e, engine.PopRequest{Queue: "q", Partition: "p", Group: "g", Batch: 5})
	if err != nil || len(ms) != 5 {
		t.Fatalf("pop: %v, %d messages", err, len(ms))
	}
	for _, m := range ms {
		it := engine.AckItem{PartitionID: m.PartitionID, Group: "g", LeaseID: m.LeaseID, MessageID: m.ID, Status: engine.Completed}
		if res, err := c.ack(e, it); err != nil || res[0].Err != nil {
			t.Fatalf("ack: %v %v", err, res)
		}
	}
	// The engine's snapshot waits for its barrier to be committed.
	must(t, c.wait(e.Snapshot))
	for _, id := range voters3 {
		if c.shard(id).snapIndex == 0 {
			t.Fatalf("broker %d applied no snapshot entry", id)
		}
	}
	for i := range 3 {
		txn := fmt.Sprint("b", i)
		if o := push(e, "q", "p", txn); !settled(c) || o.n != 1 || o.err != nil {
			t.Fatalf("push %s: %v", txn, o)
		}
		want = append(want, txn)
	}

	c.net.isolate(1, true)
	c.net.paused[1] = true
	next := c.leader(2, 3)
	// What follows the snapshot: its barrier and three pushes.
	if n := c.replayed[next]; n > 4 {
		t.Fatalf("broker %d replayed %d records to take the shard over, want at most 4 after the snapshot", next, n)
	}
	if got := held(t, c, c.engine(next), "q", "p", "g"); !slices.Equal(got, want[5:]) {
		t.Fatalf("group g on the next leader: %q, want %q", got, want[5:])
	}

	c.net.isolate(1, false)
	c.net.paused[1] = false
	for _, id := range voters3 {
		c.start(id)
	}
	again := c.leader(1, 2, 3)
	if n := c.replayed[again]; n > 6 {
		t.Fatalf("after every broker started again, broker %d replayed %d records, want at most 6 after the snapshot", again, n)
	}
	if got := held(t, c, c.engine(again), "q", "p", "h"); !slices.Equal(got, want) {
		t.Fatalf("group h after the restart: %q, want %q", got, want)
	}
}

// Once nothing the engine keeps lies before a snapshot, the snapshot entry
// compacts every replica's log, the broker's journal drops the segments no
// shard needs (Disk.Maintain), and a broker whose journal lost its front
// that way starts again from the anchors and entries left.
func TestSnapshotsCompactTheLogsAndTheJournal(t *testing.T) {
	c, open, disks := diskCluster(t, rlog.Config{SegmentBytes: 4 << 10}, 1<<10)
	c.elect(1)
	e := c.engine(1)
	payload := noise(7, 2<<10)
	pushTo := func(queue string, n int) { pushSettled(t, c, e, queue, 0, n, payload) }
	pushTo("old", 30)
	must(t, c.wait(func() error { _, err := e.DeleteQueue(context.Background(), "old"); return err }))
	before, _ := c.shard(1).log.LastIndex()
	pushTo("q", 3)
	// The first snapshot learns what the engine keeps (Release), the
	// second lets the replicas drop what lies before it.
	must(t, c.wait(e.Snapshot))
	must(t, c.wait(e.Snapshot))
	for _, id := range voters3 {
		if first, _ := c.shard(id).log.FirstIndex(); first <= before {
			t.Fatalf("broker %d's log starts at %d: the entries of the deleted queue (up to %d) were not compacted", id, first, before)
		}
		from := open[id].FirstIndex()
		if _, err := disks[id].Maintain(); err != nil {
			t.Fatal(err)
		}
		if open[id].FirstIndex() <= from {
			t.Fatalf("broker %d's journal still starts at entry %d", id, open[id].FirstIndex())
		}
	}
	for _, id := range voters3 {
		c.start(id)
	}
	next := c.leader(1, 2, 3)
	if got := held(t, c, c.engine(next), "q", "p", "g"); !slices.Equal(got, []string{"q0", "q1", "q2"}) {
		t.Fatalf("after the restart: %q", got)
	}
	if got := held(t, c, c.engine(next), "old", "p", "g"); len(got) != 0 {
		t.Fatalf("the deleted queue came back: %q", got)
	}
}

// A broker that comes back with an empty disk, after its group compacted
// the log it would need from the start, is sent the leader's log start (a
// snapshot with no data) and then the entries after it: it catches up, and
// leads with every message the group holds. Before, the leader answered
// that no snapshot was available, for good: the shard ran on two replicas.
func TestAReplicaWithAnEmptyDiskCatchesUp(t *testing.T) {
	dirs := map[uint64]string{1: t.TempDir(), 2: t.TempDir(), 3: t.TempDir()}
	c, open, _ := diskClusterIn(t, dirs, rlog.Config{SegmentBytes: 4 << 10}, 1<<10, nil)
	c.elect(1)
	e := c.engine(1)
	payload := noise(9, 2<<10)
	pushTo := func(e *engine.Engine, queue string, from, n int) {
		t.Helper()
		pushSettled(t, c, e, queue, from, n, payload)
	}
	pushTo(e, "old", 0, 30)
	must(t, c.wait(func() error { _, err := e.DeleteQueue(context.Background(), "old"); return err }))
	pushTo(e, "q", 0, 3)
	must(t, c.wait(e.Snapshot))
	must(t, c.wait(e.Snapshot))
	first, _ := c.shard(1).log.FirstIndex()
	if first <= 2 {
		t.Fatalf("the leader's log was not compacted (it starts at %d)", first)
	}

	// Broker 3's disk is replaced: it starts with an empty journal, and
	// broker 2 is down. The leader sees that 3 lost what it acknowledged,
	// and stands again in a new term: a leader of a new term probes 3 down
	// to its log and sends it the log start, and 1 and 3 commit again.
	must(t, open[3].Close())
	delete(open, 3)
	dirs[3] = t.TempDir()
	c.start(3)
	c.net.isolate(2, true)
	c.net.paused[2] = true
	caughtUp := func() error {
		e, _, _ := c.shard(1).Engine()
		if e == nil {
			return errors.New("broker 1 does not lead")
		}
		last, _ := c.shard(1).log.LastIndex()
		if got, _ := c.shard(3).log.LastIndex(); got != last {
			return fmt.Errorf("the broker with the new disk holds the log up to %d, the leader up to %d", got, last)
		}
		return nil
	}
	var err error
	for range 100 {
		if err = caughtUp(); err == nil {
			break
		}
		c.net.tick()
	}
	if err != nil {
		t.Fatal(err)
	}
	pushTo(c.engine(1), "q", 3, 2) // committed by 1 and 3
	if err := caughtUp(); err != nil {
		t.Fatal(err)
	}

	// It leads with what the group holds, the leader that caught it up
	// gone and 2 back.
	c.net.isolate(1, true)
	c.net.paused[1] = true
	c.net.paused[2] = false
	c.net.isolate(2, false)
	if next := c.leader(2, 3); next != 3 {
		s := c.shard(next)
		s.mu.Lock()
		s.rn.TransferLeader(3)
		s.mu.Unlock()
		c.leader(3)
	}
	if got := held(t, c, c.engine(3), "q", "p", "g"); !slices.Equal(got, []string{"q0", "q1", "q2", "q3", "q4"}) {
		t.Fatalf("the broker with the new disk leads with %q", got)
	}
	if got := held(t, c, c.engine(3), "old", "p", "g"); len(got) != 0 {
		t.Fatalf("the deleted queue came back: %q", got)
	}
	pushTo(c.engine(3), "q", 5, 1)
	c.start(3) // and starts again from its new journal
	c.net.paused[1] = false
	c.net.isolate(1, false)
	for range 3 { // the broker that led hears of the terms since
		c.net.tick()
	}
	again := c.leader(1, 2, 3)
	if got := held(t, c, c.engine(again), "q", "p", "h"); !slices.Equal(got, []string{"q0", "q1", "q2", "q3", "q4", "q5"}) {
		t.Fatalf("after broker 3 started again, broker %d leads with %q", again, got)
	}
}

// A broker that is down for Config.DownTicks no longer holds its groups'
// compaction back: the leader's log passes what it has, and when it returns
// it is sent the log's start and the entries after it, and can lead with
// every message. Before, a log kept everything a down broker lacked, for
// as long as it was down.
func TestADownReplicaDoesNotHoldTheLogBack(t *testing.T) {
	c, _, _ := diskCluster3Down(t)
	c.elect(1)
	e := c.engine(1)
	c.net.isolate(3, true)
	c.net.paused[3] = true
	for range 6 { // past DownTicks
		c.net.tick()
	}
	had, _ := c.shard(3).log.LastIndex()
	payload := noise(11, 2<<10)
	pushTo := func(e *engine.Engine, queue string, from, n int) {
		t.Helper()
		pushSettled(t, c, e, queue, from, n, payload)
	}
	pushTo(e, "old", 0, 30)
	must(t, c.wait(func() error { _, err := e.DeleteQueue(context.Background(), "old"); return err }))
	pushTo(e, "q", 0, 3)
	must(t, c.wait(e.Snapshot))
	must(t, c.wait(e.Snapshot))
	if first, _ := c.shard(1).log.FirstIndex(); first <= had+1 {
		t.Fatalf("the leader's log starts at %d: it kept what the down broker lacks (it has up to %d)", first, had)
	}

	c.net.paused[3] = false
	c.net.isolate(3, false)
	var err error
	for range 50 {
		last, _ := c.shard(1).log.LastIndex()
		if got, _ := c.shard(3).log.LastIndex(); got == last {
			err = nil
			break
		} else {
			err = fmt.Errorf("the broker that was down holds the log up to %d, the leader up to %d", got, last)
		}
		c.net.tick()
	}
	if err != nil {
		t.Fatal(err)
	}
	c.net.isolate(1, true)
	c.net.paused[1] = true
	if next := c.leader(2, 3); next != 3 {
		s := c.shard(next)
		s.mu.Lock()
		s.rn.TransferLeader(3)
		s.mu.Unlock()
		c.leader(3)
	}
	if got := held(t, c, c.engine(3), "q", "p", "g"); !slices.Equal(got, []string{"q0", "q1", "q2"}) {
		t.Fatalf("the broker that was down leads with %q", got)
	}
	if got := held(t, c, c.engine(3), "old", "p", "g"); len(got) != 0 {
		t.Fatalf("the deleted queue came back: %q", got)
	}
}

// diskCluster3Down is diskCluster whose nodes count a peer down after 5
// ticks unheard.
func diskCluster3Down(t *testing.T) (*testCluster, map[uint64]*rlog.Log, map[uint64]*Disk) {
	return diskClusterIn(t, map[uint64]string{1: t.TempDir(), 2: t.TempDir(), 3: t.TempDir()},
		rlog.Config{SegmentBytes: 4 << 10}, 1<<10, func(c *Config) { c.DownTicks = 5 })
}

// pushSettled pushes n messages of payload to queue's partition p through
// e, one push at a time (transactionIds queue+from ... queue+from+n-1),
// settling the network after each and failing unless each is answered
// stored.
func pushSettled(t *testing.T, c *testCluster, e *engine.Engine, queue string, from, n int, payload []byte) {
	t.Helper()
	for i := from; i < from+n; i++ {
		res := make([]engine.PushResult, 1)
		o := &outcome{}
		e.PushAsync([]engine.PushItem{{Queue: queue, Partition: "p", TransactionID: fmt.Sprint(queue, i), Payload: payload}}, res, o.done)
		if c.net.settle(); o.n != 1 || o.err != nil {
			t.Fatalf("push to %s: %v", queue, o)
		}
	}
}

// A shard with nothing new does not hold the journal's front back: its
// anchor, with its hard state, is written again at the tail, and after a
// restart both shards' logs are what they were.
func TestMaintainAnchorsAnIdleShardAgain(t *testing.T) {
	dir := t.TempDir()
	cfg := rlog.Config{Dir: dir, SegmentBytes: 4 << 10}
	j, d := openDiskWith(t, cfg, 0)
	idle, busy := d.Log(1), d.Log(2)
	must(t, idle.Bootstrap(voters3))
	must(t, busy.Bootstrap(voters3))
	hsIdle := &pb.HardState{Term: new(uint64(2)), Vote: new(uint64(3)), Commit: new(uint64(1))}
	must(t, idle.Save(hsIdle, nil, nil))
	var es []*pb.Entry
	for i := uint64(2); i <= 40; i++ {
		es = append(es, &pb.Entry{Term: new(uint64(2)), Index: new(i), Type: pb.EntryNormal.Enum(), Data: noise(i, 1<<10)})
	}
	hsBusy := &pb.HardState{Term: new(uint64(2)), Vote: new(uint64(1)), Commit: new(uint64(40))}
	for i := 0; i < len(es); i += 4 { // a group commit each: entries of the journal apart
		must(t, busy.Save(nil, es[i:min(i+4, len(es))], nil))
		must(t, d.Sync())
	}
	must(t, busy.Save(hsBusy, nil, nil))
	must(t, busy.Compact(36))
	must(t, d.Sync())
	from := j.FirstIndex()
	if _, err := d.Maintain(); err != nil {
		t.Fatal(err)
	}
	must(t, d.Sync())
	if j.FirstIndex() <= from {
		t.Fatalf("the journal still starts at entry %d", j.FirstIndex())
	}
	must(t, j.Close())
	j, d = openDiskWith(t, cfg, 0)
	defer j.Close()
	checkLog(t, d.Log(2), es[34:], hsBusy)
	if first, _ := d.Log(2).FirstIndex(); first != 36 {
		t.Fatalf("the busy shard's log starts at %d, want 36", first)
	}
	st, cs, _ := d.Log(1).InitialState()
	if st.GetTerm() != 2 || st.GetVote() != 3 || st.GetCommit() != 1 || len(cs.GetVoters()) != 3 {
		t.Fatalf("the idle shard's state after the restart: %v %v", st, cs)
	}
	if last, _ := d.Log(1).LastIndex(); last != 1 {
		t.Fatalf("the idle shard's log ends at %d, want 1", last)
	}
}

// noise is n bytes that do not compress, from seed.
func noise(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// A Sync waits for the records appended before it, not for those appended
// while it waits: the node loop goes on saving while its syncer waits
// (Node.Run), and a Sync that waited for the journal to have nothing
// pending would not end while the loop kept it busy.
func TestSyncWaitsOnlyForWhatCameBefore(t *testing.T) {
	j, d := openDisk(t, t.TempDir(), 0)
	defer j.Close()
	l := d.Log(1)
	if err := l.Bootstrap(voters3); err != nil {
		t.Fatal(err)
	}
	// The journal's reports on the next two records wait for the test.
	gates := []chan struct{}{make(chan struct{}), make(chan struct{})}
	var calls atomic.Int32
	d.done = func(err error) {
		if i := int(calls.Add(1)) - 1; i < len(gates) {
			<-gates[i]
		}
		d.recorded(err)
	}
	defer func() {
		for _, g := range gates {
			select {
			case <-g:
			default:
				close(g)
			}
		}
	}()
	if err := l.Save(&pb.HardState{Term: new(uint64(2)), Vote: new(uint64(1)), Commit: new(uint64(1))}, nil, nil); err != nil {
		t.Fatal(err)
	}
	synced := make(chan error, 1)
	go func() { synced <- d.Sync() }()
	for waiting := 0; waiting == 0; time.Sleep(time.Millisecond) {
		d.wmu.Lock()
		waiting = int(d.wake)
		d.wmu.Unlock()
	}
	if err := l.Save(&pb.HardState{Term: new(uint64(3)), Vote: new(uint64(1)), Commit: new(uint64(1))}, nil, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-synced:
		t.Fatalf("Sync ended (%v) before its record was durable", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(gates[0])
	select {
	case err := <-synced:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Sync waited on a record appended after it was called")
	}
	close(gates[1])
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

// Messages of 1 MiB, some that compress and some that do not, pushed to a
// replicated shard whose journals keep little in memory, around a
// snapshot: the next leader, and the leader after every broker started
// again, serve each of them whole.
func TestLargeMessagesSurviveFailoverAndRestart(t *testing.T) {
	c, _, _ := diskCluster(t, rlog.Config{}, 1<<10)
	c.elect(1)
	e := c.engine(1)
	want := map[string][]byte{}
	pushBig := func(i int) {
		t.Helper()
		txn := fmt.Sprint("big", i)
		var payload []byte
		if i%2 == 0 {
			payload = bytes.Repeat(fmt.Appendf(nil, "message %d compresses well; ", i), (1<<20)/28)
		} else {
			payload = noise(uint64(i), 1<<20)
		}
		want[txn] = payload
		o := &outcome{}
		e.PushAsync([]engine.PushItem{{Queue: "q", Partition: "p", TransactionID: txn, Payload: payload}}, make([]engine.PushResult, 1), o.done)
		if c.net.settle(); o.n != 1 || o.err != nil {
			t.Fatalf("push %s: %v", txn, o)
		}
	}
	for i := range 6 {
		pushBig(i)
	}
	must(t, c.wait(e.Snapshot))
	for i := 6; i < 8; i++ {
		pushBig(i)
	}
	check := func(on uint64, group string) {
		t.Helper()
		got := map[string]bool{}
		for {
			ms, err := c.pop(c.engine(on), engine.PopRequest{Queue: "q", Partition: "p", Group: group, Batch: 2})
			if err != nil {
				t.Fatalf("pop on %d: %v", on, err)
			}
			if len(ms) == 0 {
				break
			}
			for _, m := range ms {
				if !bytes.Equal(m.Payload, want[m.TransactionID]) {
					t.Fatalf("broker %d served %s with %d bytes that are not the %d pushed", on, m.TransactionID, len(m.Payload), len(want[m.TransactionID]))
				}
				got[m.TransactionID] = true
				it := engine.AckItem{PartitionID: m.PartitionID, Group: group, LeaseID: m.LeaseID, MessageID: m.ID, Status: engine.Completed}
				if res, err := c.ack(c.engine(on), it); err != nil || res[0].Err != nil {
					t.Fatalf("ack of %s on %d: %v %v", m.TransactionID, on, err, res)
				}
			}
		}
		if len(got) != len(want) {
			t.Fatalf("broker %d served %d of the %d messages", on, len(got), len(want))
		}
	}
	c.net.isolate(1, true)
	c.net.paused[1] = true
	check(c.leader(2, 3), "g1")

	c.net.isolate(1, false)
	c.net.paused[1] = false
	for _, id := range voters3 {
		c.start(id)
	}
	check(c.leader(1, 2, 3), "g2")
}

// An entry with no data (a leader's first entry of its term) is held in
// memory as every new entry is, not taken for one dropped from memory:
// Entries serves it without reading the journal back, whether Save
// wrote it or the journal was replayed at open.
func TestAnEmptyEntryIsHeld(t *testing.T) {
	dir := t.TempDir()
	j, err := rlog.Open(rlog.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	d, err := OpenDisk(j, 0)
	if err != nil {
		t.Fatal(err)
	}
	l := d.Log(1)
	if err := l.Bootstrap([]uint64{1}); err != nil {
		t.Fatal(err)
	}
	ents := []*pb.Entry{{Term: new(uint64(2)), Index: new(uint64(2))}, {Term: new(uint64(2)), Index: new(uint64(3)), Data: []byte("x")}}
	if err := l.Save(nil, ents, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	check := func(l *DiskLog, when string) {
		t.Helper()
		l.mu.Lock()
		held := l.ents[0].data != nil
		l.mu.Unlock()
		if !held {
			t.Fatalf("%s: the empty entry is taken for one dropped from memory", when)
		}
		got, err := l.Entries(2, 4, 1<<20)
		if err != nil || len(got) != 2 || len(got[0].GetData()) != 0 || string(got[1].GetData()) != "x" {
			t.Fatalf("%s: entries %v, %v", when, got, err)
		}
	}
	check(l, "saved")
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, err = rlog.Open(rlog.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	d, err = OpenDisk(j, 0)
	if err != nil {
		t.Fatal(err)
	}
	check(d.Log(1), "replayed")
}

// dataHeld reports which of l's entries [lo, hi] hold their data in memory.
func dataHeld(l *DiskLog, lo, hi uint64) []bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []bool
	for i := lo; i <= hi; i++ {
		out = append(out, l.ents[i-l.snapIndex-1].data != nil)
	}
	return out
}

// TestAnUnappliedEntryStaysInMemory: an entry saved and not yet applied
// keeps its data in memory past the log's budget, as applying reads it
// next (the node loop read every entry larger than the budget back from
// the journal to apply it); once applied it leaves, the newest staying;
// and the log does not keep more than unappliedKeepBytes past its budget
// for entries not applied.
func TestAnUnappliedEntryStaysInMemory(t *testing.T) {
	j, d := openDisk(t, t.TempDir(), 1)
	defer j.Close()
	l := d.Log(1)
	must(t, l.Bootstrap([]uint64{1, 2, 3}))
	must(t, l.Save(nil, ents(2, 2, 4, "x"), nil))
	must(t, d.Sync())
	if got := dataHeld(l, 2, 4); !slices.Equal(got, []bool{true, true, true}) {
		t.Fatalf("entries 2..4 not applied, held %v: want all", got)
	}
	l.Applied(3)
	if got := dataHeld(l, 2, 4); !slices.Equal(got, []bool{false, false, true}) {
		t.Fatalf("entries 2..3 applied, held %v: want 4 alone", got)
	}
	l.Applied(4)
	if got := dataHeld(l, 2, 4); !slices.Equal(got, []bool{false, false, true}) {
		t.Fatalf("every entry applied, held %v: want the newest", got)
	}
	big := func(i uint64) *pb.Entry {
		return &pb.Entry{Term: new(uint64(2)), Index: new(i), Type: pb.EntryNormal.Enum(), Data: bytes.Repeat([]byte{byte(i)}, unappliedKeepBytes/2-8)}
	}
	must(t, l.Save(nil, []*pb.Entry{big(5), big(6), big(7)}, nil))
	must(t, d.Sync())
	if got := dataHeld(l, 5, 7); !slices.Equal(got, []bool{false, true, true}) {
		t.Fatalf("three entries of half the unapplied allowance, none applied, held %v: want the last two", got)
	}
	got, err := l.Entries(5, 8, 1<<30)
	if err != nil || len(got) != 3 || !bytes.Equal(got[0].GetData(), big(5).GetData()) {
		t.Fatalf("reading back the entry dropped: %d entries, %v", len(got), err)
	}
}
