package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
)

// Recovery tests over the real journal: a clean close, an unclean stop (a
// child process that exits without closing anything), snapshots, torn tails
// and corruption.

var rt0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

type node struct {
	t     testing.TB
	dir   string
	j     *log.Log
	e     *engine.Engine
	clock *engine.FakeClock
}

// openNode opens a journal and an engine on dir; automatic snapshots are
// off unless snapEvery says otherwise.
func openNode(t testing.TB, dir string, snapEvery ...int64) *node {
	t.Helper()
	every := int64(-1)
	if len(snapEvery) > 0 {
		every = snapEvery[0]
	}
	n := &node{t: t, dir: dir, clock: engine.NewFakeClock(rt0.Add(time.Hour))}
	j, err := log.Open(log.Config{Dir: dir})
	if err != nil {
		t.Fatalf("log.Open: %v", err)
	}
	e, err := engine.New(engine.Config{Clock: n.clock, NoTicker: true, SnapshotEveryBytes: every}, j)
	if err != nil {
		j.Close()
		t.Fatalf("engine.New: %v", err)
	}
	n.j, n.e = j, e
	return n
}

func (n *node) close() {
	n.e.Close()
	if err := n.j.Close(); err != nil {
		n.t.Fatalf("journal close: %v", err)
	}
}

func (n *node) push(q, p, txn, payload string) engine.PushResult {
	n.t.Helper()
	res, err := n.e.Push(context.Background(), []engine.PushItem{{Queue: q, Partition: p, TransactionID: txn, Payload: []byte(payload)}})
	if err != nil {
		n.t.Fatalf("push: %v", err)
	}
	return res[0]
}

func (n *node) pop(req engine.PopRequest) []engine.Message {
	n.t.Helper()
	m, err := n.e.Pop(context.Background(), req)
	if err != nil {
		n.t.Fatalf("pop: %v", err)
	}
	return m
}

func (n *node) ack(m engine.Message, s engine.AckStatus, errText string) engine.AckResult {
	n.t.Helper()
	res, err := n.e.Ack(context.Background(), []engine.AckItem{{PartitionID: m.PartitionID, HasOffset: true, Offset: m.Offset, LeaseID: m.LeaseID, Group: m.Group, Status: s, Error: errText}})
	if err != nil {
		n.t.Fatalf("ack: %v", err)
	}
	if res[0].Err != nil {
		n.t.Fatalf("ack %s of %s refused: %v", s, m.Payload, res[0].Err)
	}
	return res[0]
}

// buildState drives a node into a state with every kind of thing recovery
// must restore; mid runs halfway (a snapshot, in one variant).
func buildState(n *node, mid func()) {
	if _, err := n.e.Configure(context.Background(), "orders", func() engine.QueueOptions {
		o := engine.DefaultQueueOptions()
		o.RetryLimit, o.RetryDelay = 1, 0
		return o
	}()); err != nil {
		n.t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		n.push("orders", "p1", fmt.Sprint("t", i), fmt.Sprint("m", i))
	}
	for i := 0; i < 5; i++ {
		n.push("orders", "p2", "", fmt.Sprint("n", i))
	}
	for _, m := range n.pop(engine.PopRequest{Queue: "orders", Partition: "p1", Group: "billing", Batch: 5}) {
		n.ack(m, engine.Completed, "")
	}
	if mid != nil {
		mid()
	}
	ms := n.pop(engine.PopRequest{Queue: "orders", Partition: "p1", Group: "billing", Batch: 2})
	n.ack(ms[0], engine.FailedAck, "timeout") // m5: one retry spent
	ms = n.pop(engine.PopRequest{Queue: "orders", Partition: "p2", Group: "audit", Batch: 3})
	n.ack(ms[0], engine.Completed, "")
	n.ack(ms[1], engine.DLQ, "bad payload")
	n.ack(ms[2], engine.Completed, "")
	if got := n.pop(engine.PopRequest{Queue: "orders", Batch: 3}); len(got) != 3 {
		n.t.Fatalf("queue-mode pop got %d", len(got)) // left in flight
	}
	for i := 0; i < 3; i++ {
		n.push("events", "", "", fmt.Sprint("e", i))
	}
	if got := n.pop(engine.PopRequest{Queue: "events", Group: "tail", Batch: 2, AutoAck: true}); len(got) != 2 {
		n.t.Fatalf("autoAck pop got %d", len(got))
	}
}

func payloadsOf(ms []engine.Message) string {
	s := ""
	for i, m := range ms {
		if i > 0 {
			s += ","
		}
		s += string(m.Payload)
	}
	return s
}

// verifyState checks, after a restart, everything buildState left.
func verifyState(n *node) {
	t := n.t
	t.Helper()
	// Stats count since this start: the dead letter recovery brought back
	// was filed before it (it is in the DLQ, not in the count).
	if st := n.e.Stats(); st.DeadLettered != 0 {
		t.Fatalf("Stats().DeadLettered = %d right after recovery, want 0 (filed before this start)", st.DeadLettered)
	}
	billing := n.pop(engine.PopRequest{Queue: "orders", Partition: "p1", Group: "billing", Batch: 10})
	if got := payloadsOf(billing); got != "m5,m6,m7,m8,m9" {
		t.Fatalf("billing resumes with %q, want m5..m9 (cursor and released lease)", got)
	}
	if billing[0].RetryCount != 1 {
		t.Fatalf("retry count of m5 = %d after restart, want 1", billing[0].RetryCount)
	}
	if got := payloadsOf(n.pop(engine.PopRequest{Queue: "orders", Partition: "p2", Group: "audit", Batch: 10})); got != "n3,n4" {
		t.Fatalf("audit resumes with %q, want n3,n4", got)
	}
	dlq, total, _ := n.e.DLQ(engine.DLQFilter{Queue: "orders"})
	if total != 1 || dlq[0].Error != "bad payload" || string(dlq[0].Message.Payload) != "n1" || dlq[0].Message.Group != "audit" {
		t.Fatalf("DLQ after restart = %+v (total %d)", dlq, total)
	}
	// The queue-mode lease did not survive: everything comes back.
	all := n.pop(engine.PopRequest{Queue: "orders", Batch: 100, Partitions: 2})
	if len(all) != 15 {
		t.Fatalf("queue mode got %d messages after restart, want 15 (leases dropped)", len(all))
	}
	sort.Slice(all, func(i, j int) bool {
		return all[i].Partition+fmt.Sprint(all[i].Offset) < all[j].Partition+fmt.Sprint(all[j].Offset)
	})
	if got := n.pop(engine.PopRequest{Queue: "events", Group: "tail", Batch: 10, AutoAck: true}); payloadsOf(got) != "e2" {
		t.Fatalf("autoAck cursor after restart: got %q, want e2", payloadsOf(got))
	}
	// Dedup survives: t3 is a duplicate of the original message.
	orig := n.pop(engine.PopRequest{Queue: "orders", Partition: "p1", Group: "dedupcheck", Batch: 4})
	if r := n.push("orders", "p1", "t3", "again"); r.Status != engine.Duplicate || r.MessageID != orig[3].ID {
		t.Fatalf("push of t3 after restart = %+v, want duplicate of %s", r, orig[3].ID)
	}
	// The retry count is still spent: the second failure dead-letters m5.
	if r := n.ack(billing[0], engine.FailedAck, "again"); !r.DeadLettered {
		t.Fatalf("m5's second failure was not dead-lettered (retry count lost)")
	}
	if st := n.e.Stats(); st.DeadLettered != 1 {
		t.Fatalf("Stats().DeadLettered = %d after one filing since start, want 1", st.DeadLettered)
	}
}

func TestRecoveryAfterCleanClose(t *testing.T) {
	// every=0 is the default: Close writes a snapshot, and the reopen loads it.
	for _, every := range []int64{-1, 0} {
		t.Run(fmt.Sprintf("snapshotEvery=%d", every), func(t *testing.T) {
			dir := t.TempDir()
			n := openNode(t, dir, every)
			buildState(n, nil)
			n.close()
			if every == 0 {
				j, err := log.Open(log.Config{Dir: dir})
				if err != nil {
					t.Fatal(err)
				}
				_, _, ok, err := j.LoadSnapshot()
				j.Close()
				if err != nil || !ok {
					t.Fatalf("Close wrote no snapshot: %v", err)
				}
			}
			n = openNode(t, dir, every)
			defer n.close()
			verifyState(n)
		})
	}
}

func TestRecoveryFromSnapshotAndJournal(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	buildState(n, func() {
		if err := n.e.Snapshot(); err != nil {
			t.Fatalf("snapshot: %v", err)
		}
	})
	n.close()
	n = openNode(t, dir)
	defer n.close()
	verifyState(n)
	// And a snapshot of the recovered state, reopened again.
	if err := n.e.Snapshot(); err != nil {
		t.Fatal(err)
	}
}

const crashEnv = "REGENT_ENGINE_CRASH_CHILD_DIR"

// TestCrashChild is the child half of TestRecoveryAfterUncleanStop: it builds
// the state and exits without closing the engine or the journal.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("child process of TestRecoveryAfterUncleanStop")
	}
	n := openNode(t, dir)
	buildState(n, func() {
		if os.Getenv(crashEnv+"_SNAPSHOT") != "" {
			if err := n.e.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
	})
	os.Exit(0) // no Close: the process dies with whatever it had
}

func TestRecoveryAfterUncleanStop(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		t.Skip("in the child")
	}
	for _, snap := range []bool{false, true} {
		t.Run(fmt.Sprintf("snapshot=%v", snap), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), crashEnv+"="+dir)
			if snap {
				cmd.Env = append(cmd.Env, crashEnv+"_SNAPSHOT=1")
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			n := openNode(t, dir)
			defer n.close()
			verifyState(n)
		})
	}
}

// lastSegment returns the newest WAL segment file of a journal directory.
func lastSegment(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "wal", "[0-9]*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no WAL segments in %s: %v", dir, err)
	}
	sort.Strings(files)
	return files[len(files)-1]
}

// TestTornLastEntryRecoversToLastWholeEntry cuts the journal's last entry (a
// push) at every byte and appends zeros: the engine opens and holds exactly
// the messages of the entries before it.
func TestTornLastEntryRecoversToLastWholeEntry(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	for i := 0; i < 5; i++ {
		n.push("q", "", "", fmt.Sprint("kept", i))
	}
	n.close()
	seg := lastSegment(t, dir)
	before, _ := os.ReadFile(seg)
	n = openNode(t, dir)
	n.push("q", "", "", "torn")
	n.close()
	full, _ := os.ReadFile(seg)
	if len(full) <= len(before) {
		t.Fatalf("the last push did not grow the segment")
	}
	check := func(t *testing.T, data []byte) {
		d := t.TempDir()
		if err := os.MkdirAll(filepath.Join(d, "wal"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "wal", filepath.Base(seg)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		n := openNode(t, d)
		defer n.close()
		got := payloadsOf(n.pop(engine.PopRequest{Queue: "q", Batch: 100}))
		if got != "kept0,kept1,kept2,kept3,kept4" {
			t.Fatalf("recovered %q", got)
		}
	}
	for cut := len(before); cut < len(full); cut++ {
		t.Run(fmt.Sprint("cut=", cut-len(before)), func(t *testing.T) { check(t, full[:cut]) })
	}
	for _, z := range []int{1, 7, 512, 4096} {
		t.Run(fmt.Sprint("zeros=", z), func(t *testing.T) {
			check(t, append(append([]byte(nil), before...), make([]byte, z)...))
		})
	}
}

// TestFlippedByteIsReportedNeverDelivered flips one byte inside an old entry
// (followed by whole entries): recovery refuses with a corruption error
// instead of returning the damaged data.
func TestFlippedByteIsReportedNeverDelivered(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	n.push("q", "", "", "first-entry-with-a-payload-long-enough-to-flip")
	n.close()
	seg := lastSegment(t, dir)
	one, _ := os.ReadFile(seg)
	n = openNode(t, dir)
	for i := 0; i < 3; i++ {
		n.push("q", "", "", fmt.Sprint("later", i))
	}
	n.close()
	data, _ := os.ReadFile(seg)
	for _, at := range []int{len(one) / 2, len(one) - 2} {
		bad := append([]byte(nil), data...)
		bad[at] ^= 0x10
		if err := os.WriteFile(seg, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		j, err := log.Open(log.Config{Dir: dir})
		if err == nil {
			_, err = engine.New(engine.Config{NoTicker: true}, j)
			j.Close()
		}
		if !errors.Is(err, log.ErrCorrupt) {
			t.Fatalf("flip at byte %d: err = %v, want log.ErrCorrupt", at, err)
		}
	}
}
