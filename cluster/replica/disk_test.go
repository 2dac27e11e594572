package replica

import (
	"bytes"
	"fmt"
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	rlog "github.com/regentmq/regent/log"
)

func openDisk(t *testing.T, dir string, keep int) (*rlog.Log, *Disk) {
	t.Helper()
	j, err := rlog.Open(rlog.Config{Dir: dir})
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

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Three brokers whose Raft logs are journals on disk: every push answered
// before the whole group restarts is served after it, by whichever broker
// leads then.
func TestAnsweredPushesSurviveARestartOfEveryBroker(t *testing.T) {
	dirs := map[uint64]string{1: t.TempDir(), 2: t.TempDir(), 3: t.TempDir()}
	open := map[uint64]*rlog.Log{}
	t.Cleanup(func() {
		for _, j := range open {
			_ = j.Close()
		}
	})
	logFor := func(id uint64) (Log, func() error) {
		if j := open[id]; j != nil {
			_ = j.Close()
		}
		j, d := openDisk(t, dirs[id], 1<<10)
		open[id] = j
		l := d.Log(testShard)
		must(t, l.Bootstrap(voters3))
		return l, d.Sync
	}
	c := newTestClusterOn(t, voters3, nil, logFor)
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
