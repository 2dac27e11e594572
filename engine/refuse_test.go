package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// dumpState renders everything an operation may change: queues and their
// options, groups and their ready lists, partitions with their messages
// index, cursors, leases, retry counts and delays, dead-letter entries,
// tombstones, depth and live lease sets. Two dumps are equal when the state
// is (timestamps of the engine's stamp clock aside).
func dumpState(e *Engine) string {
	unlock := e.lockAll()
	defer unlock()
	var b strings.Builder
	names := make([]string, 0, len(e.queues))
	for n := range e.queues {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(&b, "queues %d (by id %d)\n", len(e.queues), len(e.queuesID))
	for _, n := range names {
		q := e.queues[n]
		fmt.Fprintf(&b, "queue %s id=%d deleted=%v depth=%d opts=%+v\n", q.name, q.id, q.deleted.Load(), q.depth.Load(), *q.options())
		for _, g := range q.groupList() {
			if g == nil {
				b.WriteString("  group <deleted>\n")
				continue
			}
			g.mu.Lock()
			var ready []string
			for _, a := range g.ready[g.rhead:] {
				ready = append(ready, a.p.name)
			}
			fmt.Fprintf(&b, "  group %s idx=%d mode=%v from=%d ready=%v waiters=%d\n", g.name, g.idx, g.mode, g.from, ready, len(g.waiters))
			g.mu.Unlock()
		}
		fmt.Fprintf(&b, "  partitions %d holes=%d next=%d\n", q.byName.len(), q.holes, q.next)
		for i, p := range q.parts {
			if p == nil {
				fmt.Fprintf(&b, "  part #%d <forgotten>\n", q.seqs[i])
				continue
			}
			fmt.Fprintf(&b, "  part %s seq=%d next=%d durable=%d lastTS=%d chunks=", p.name, p.seq, p.next, p.durable, p.lastTS)
			for _, c := range p.chunks {
				fmt.Fprintf(&b, "[%d@%d]", c.first, c.pos)
			}
			b.WriteString("\n")
			for gi := range p.groups {
				pg := &p.groups[gi]
				if !pg.init() && pg.act == nil {
					continue // the same as no entry
				}
				fmt.Fprintf(&b, "    pg %d cursor=%d", gi, int64(pg.cursor))
				if a := pg.act; a != nil {
					fmt.Fprintf(&b, " retries=%v blocked=%d inReady=%v", a.retries, a.blockedUntil, a.inReady)
					if l := a.lease; l != nil {
						fmt.Fprintf(&b, " lease=%s[%d,%d) status=%v done=%d released=%v ended=%v expires=%d",
							l.id, l.from, l.to, l.status, l.nDone, l.released, l.ended, l.expires)
					}
				}
				b.WriteString("\n")
			}
			for _, t := range q.tombsOf(p) {
				fmt.Fprintf(&b, "    tomb %d\n", t)
			}
		}
		q.dlqMu.Lock()
		for _, d := range q.dlq {
			fmt.Fprintf(&b, "  dead %s %s/%d group=%s retries=%d err=%q payload=%q\n", d.id, d.p.name, d.off, d.group, d.retries, d.err, d.m.payload)
		}
		q.dlqMu.Unlock()
	}
	sets := 0
	for i := range e.leases.shards {
		sh := &e.leases.shards[i]
		sh.mu.Lock()
		sets += len(sh.m)
		sh.mu.Unlock()
	}
	fmt.Fprintf(&b, "lease sets %d\n", sets)
	return b.String()
}

// refusals are the ways a journal refuses one record without failing.
var refusals = []struct {
	name string
	err  error
}{
	{"behind", fmt.Errorf("memjournal: %w", syscall.EAGAIN)},
	{"disk full", fmt.Errorf("memjournal: %w", syscall.ENOSPC)},
	{"too large", fmt.Errorf("memjournal: %w", syscall.EMSGSIZE)},
}

func (j *memJournal) refuse(err error) {
	j.mu.Lock()
	j.appendErr = err
	j.mu.Unlock()
}

// TestRefusedRecordLeavesNoTrace: for every kind of record, when the journal
// refuses it the caller gets an error, the engine's state is exactly what it
// was, and the same request then succeeds.
func TestRefusedRecordLeavesNoTrace(t *testing.T) {
	ctx := context.Background()
	type op struct {
		name string
		// setup builds the state the operation starts from and returns the
		// operation: it returns an error when the request was refused (the
		// whole call, or its every item).
		setup func(f *fixture) func() error
		// check, when set, says whether the operation took effect.
		check func(f *fixture) error
	}
	pushOne := func(f *fixture, q, p string, pl ...string) { f.push(q, p, pl...) }
	itemsErr := func(res []PushResult, err error) error {
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Status == Failed {
				return r.Err
			}
		}
		return nil
	}
	ackErr := func(res []AckResult, err error) error {
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Err != nil {
				return r.Err
			}
		}
		return nil
	}
	leased := func(f *fixture) []Message {
		f.configure("q", func(o *QueueOptions) { o.RetryLimit = 1; o.RetryDelay = time.Second; o.MaxSize = 100 })
		pushOne(f, "q", "a", "a0", "a1", "a2", "a3")
		pushOne(f, "q", "b", "b0")
		return f.pop(PopRequest{Queue: "q", Partition: "a", Group: "g", Batch: 3})
	}
	ackOp := func(st ...AckStatus) func(f *fixture) func() error {
		return func(f *fixture) func() error {
			msgs := leased(f)
			items := make([]AckItem, len(st))
			for i, s := range st {
				items[i] = ackOf(msgs[i], s)
				items[i].Error = "err " + s.String()
			}
			return func() error { return ackErr(f.e.Ack(ctx, items)) }
		}
	}
	ops := []op{
		{name: "push to a new queue and partition", setup: func(f *fixture) func() error {
			return func() error {
				return itemsErr(f.e.Push(ctx, []PushItem{{Queue: "fresh", Partition: "p1", TransactionID: "t1", Payload: []byte("x")}}))
			}
		}},
		{name: "push to a new partition of a maxSize queue", setup: func(f *fixture) func() error {
			leased(f)
			return func() error {
				return itemsErr(f.e.Push(ctx, []PushItem{{Queue: "q", Partition: "new", TransactionID: "t1", Payload: []byte("x")},
					{Queue: "q", Partition: "new", TransactionID: "t2", Payload: []byte("y")}}))
			}
		}},
		{name: "push to an existing partition", setup: func(f *fixture) func() error {
			leased(f)
			return func() error {
				return itemsErr(f.e.Push(ctx, []PushItem{{Queue: "q", Partition: "b", TransactionID: "t1", Payload: []byte("x")}}))
			}
		}},
		{name: "pop with autoAck", setup: func(f *fixture) func() error {
			leased(f)
			if m := f.pop(PopRequest{Queue: "q", Partition: "a", Group: "auto", AutoAck: true}); payloads(m) != "a0" {
				t.Fatalf("first autoAck pop: %s", payloads(m))
			}
			return func() error {
				_, err := f.e.Pop(ctx, PopRequest{Queue: "q", Group: "auto", Batch: 2, AutoAck: true})
				return err
			}
		}, check: func(f *fixture) error {
			m := f.pop(PopRequest{Queue: "q", Group: "auto", Batch: 10, Partitions: 2})
			if got := payloads(m); got != "a3,b0" && got != "b0,a3" {
				return fmt.Errorf("after autoAck pops of 1 and 2 the group gets %s", got)
			}
			return nil
		}},
		{name: "pop with autoAck from a named partition", setup: func(f *fixture) func() error {
			leased(f)
			f.pop(PopRequest{Queue: "q", Partition: "b", Group: "auto", AutoAck: true})
			pushOne(f, "q", "b", "b1")
			return func() error {
				_, err := f.e.Pop(ctx, PopRequest{Queue: "q", Partition: "b", Group: "auto", AutoAck: true})
				return err
			}
		}},
		{name: "pop with autoAck over two partitions", setup: func(f *fixture) func() error {
			leased(f)
			f.pop(PopRequest{Queue: "q", Partition: "a", Group: "auto", AutoAck: true})
			return func() error {
				_, err := f.e.Pop(ctx, PopRequest{Queue: "q", Group: "auto", Batch: 10, Partitions: 2, AutoAck: true})
				return err
			}
		}},
		{name: "ack completed", setup: ackOp(Completed, Completed)},
		{name: "ack failed", setup: ackOp(Completed, FailedAck)},
		{name: "ack failed past the retry limit", setup: func(f *fixture) func() error {
			msgs := leased(f)
			f.ackMsgs(msgs[:1], FailedAck)
			f.advance(2 * time.Second)
			again := f.pop(PopRequest{Queue: "q", Partition: "a", Group: "g", Batch: 1})
			it := ackOf(again[0], FailedAck)
			it.Error = "the last straw"
			return func() error { return ackErr(f.e.Ack(ctx, []AckItem{it})) }
		}},
		{name: "ack retry", setup: ackOp(Retry)},
		{name: "ack dlq", setup: ackOp(DLQ, Completed)},
		{name: "ack over two partitions", setup: func(f *fixture) func() error {
			msgs := leased(f)
			mb := f.pop(PopRequest{Queue: "q", Partition: "b", Group: "g", Batch: 1})
			items := []AckItem{ackOf(msgs[0], Completed), ackOf(mb[0], DLQ)}
			return func() error { return ackErr(f.e.Ack(ctx, items)) }
		}},
		{name: "transaction", setup: func(f *fixture) func() error {
			msgs := leased(f)
			return func() error {
				r, err := f.e.Transaction(ctx, []AckItem{ackOf(msgs[0], Completed), ackOf(msgs[1], DLQ)},
					[]PushItem{{Queue: "q", Partition: "b", Payload: []byte("from txn")}, {Queue: "out.sink", Partition: "new", Payload: []byte("to a new queue")}})
				if err == nil {
					err = r.Err
				}
				return err
			}
		}},
		{name: "seek", setup: func(f *fixture) func() error {
			leased(f)
			f.pop(PopRequest{Queue: "q", Partition: "b", Group: "g", Batch: 1})
			return func() error {
				_, err := f.e.Seek(context.Background(), "q", "g", "", SeekTarget{ToEnd: true})
				return err
			}
		}},
		{name: "configure a new queue", setup: func(f *fixture) func() error {
			return func() error {
				_, err := f.e.Configure(context.Background(), "brand-new", DefaultQueueOptions())
				return err
			}
		}},
		{name: "configure an existing queue", setup: func(f *fixture) func() error {
			leased(f)
			o := DefaultQueueOptions()
			o.RetryLimit = 9
			return func() error { _, err := f.e.Configure(context.Background(), "q", o); return err }
		}},
		{name: "delete a queue", setup: func(f *fixture) func() error {
			leased(f)
			return func() error { _, err := f.e.DeleteQueue(context.Background(), "q"); return err }
		}},
		{name: "delete a group", setup: func(f *fixture) func() error {
			leased(f)
			return func() error { _, err := f.e.DeleteGroup(context.Background(), "q", "g"); return err }
		}},
		{name: "delete a message", setup: func(f *fixture) func() error {
			msgs := leased(f)
			return func() error {
				ok, err := f.e.DeleteMessage(context.Background(), msgs[0].PartitionID, msgs[2].TransactionID)
				if err == nil && !ok {
					err = errors.New("not found")
				}
				return err
			}
		}},
		{name: "dlq redrive", setup: func(f *fixture) func() error {
			f.ackMsgs(leased(f), DLQ)
			return func() error { _, err := f.e.RedriveDLQ(ctx, DLQFilter{Queue: "q"}, nil); return err }
		}},
		{name: "dlq purge", setup: func(f *fixture) func() error {
			f.ackMsgs(leased(f), DLQ, Completed, DLQ)
			return func() error { _, err := f.e.PurgeDLQ(context.Background(), DLQFilter{Queue: "q"}, nil); return err }
		}},
		{name: "lease extension", setup: func(f *fixture) func() error {
			msgs := leased(f)
			return func() error { _, err := f.e.ExtendLease(msgs[0].LeaseID, time.Hour); return err }
		}},
	}
	for _, o := range ops {
		for _, rf := range refusals {
			t.Run(o.name+"/"+rf.name, func(t *testing.T) {
				f := newFixture(t)
				run := o.setup(f)
				before := dumpState(f.e)
				f.j.refuse(rf.err)
				err := run()
				f.j.refuse(nil)
				if err == nil {
					if o.name == "lease extension" { // leases are not journaled
						return
					}
					t.Fatalf("refused record answered success")
				}
				if after := dumpState(f.e); after != before {
					t.Fatalf("refused (%v), but the state changed:\n%s", err, diffLines(before, after))
				}
				if err := run(); err != nil {
					t.Fatalf("the same request once the journal takes records again: %v", err)
				}
				if o.check != nil {
					if err := o.check(f); err != nil {
						t.Fatal(err)
					}
				}
				// And what was answered success survives a restart.
				want := dumpDurable(f.e)
				f.restart()
				if got := dumpDurable(f.e); got != want {
					t.Fatalf("after a restart:\n%s", diffLines(want, got))
				}
			})
		}
	}
}

// dumpDurable is dumpState without what a restart legitimately changes:
// leases, ready lists and lease sets.
func dumpDurable(e *Engine) string {
	var keep []string
	for _, l := range strings.Split(dumpState(e), "\n") {
		if strings.HasPrefix(l, "lease sets") {
			continue
		}
		if i := strings.Index(l, " inReady="); i >= 0 {
			l = l[:i]
		}
		if i := strings.Index(l, " lease="); i >= 0 {
			l = l[:i]
		}
		if i := strings.Index(l, " ready="); i >= 0 {
			l = l[:i]
		}
		l = strings.Replace(l, " retries=[] blocked=0", "", 1)
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// diffLines shows the lines of a and b that differ.
func diffLines(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out strings.Builder
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			fmt.Fprintf(&out, "- %s\n+ %s\n", x, y)
		}
	}
	return out.String()
}

// TestAutoAckPopOverPartitionsWithOneRefused: an autoAck pop over two
// partitions whose second cursor move the journal refuses answers the first
// partition's messages (consumed, durable) and leaves the second exactly as
// it was: its messages come with the next pop, none skipped. The old engine
// moved the cursor before the journal answered and answered the whole pop
// with an error: the first partition's messages were consumed and never
// delivered, and the second's skipped.
func TestAutoAckPopOverPartitionsWithOneRefused(t *testing.T) {
	f := newFixture(t)
	f.push("q", "a", "a0", "a1")
	f.push("q", "b", "b0", "b1")
	f.pop(PopRequest{Queue: "q", Group: "g", AutoAck: true, Batch: 0}) // the group exists, a0 consumed
	f.j.mu.Lock()
	f.j.appendErr, f.j.allow = fmt.Errorf("memjournal: %w", syscall.EAGAIN), 1
	f.j.mu.Unlock()
	msgs, err := f.e.Pop(context.Background(), PopRequest{Queue: "q", Group: "g", AutoAck: true, Batch: 10, Partitions: 2})
	f.j.refuse(nil)
	if err != nil {
		t.Fatalf("a pop with one partition's cursor refused answered %v, dropping what the other gave", err)
	}
	first := payloads(msgs)
	rest := payloads(f.pop(PopRequest{Queue: "q", Group: "g", AutoAck: true, Batch: 10, Partitions: 2}))
	all := []string{"a0"}
	for _, s := range []string{first, rest} {
		if s != "" {
			all = append(all, strings.Split(s, ",")...)
		}
	}
	sort.Strings(all)
	if got := strings.Join(all, ","); got != "a0,a1,b0,b1" {
		t.Fatalf("delivered %s then %s: want every message once (a0,a1,b0,b1)", first, rest)
	}
	f.restart()
	if m := f.pop(PopRequest{Queue: "q", Group: "g", AutoAck: true, Batch: 10, Partitions: 2}); len(m) != 0 {
		t.Fatalf("after a restart the group gets %s again", payloads(m))
	}
}

// TestAbortedTransactionCreatesNothing: a transaction refused for one of its
// acks leaves no queue, partition or maxSize room behind for its pushes.
func TestAbortedTransactionCreatesNothing(t *testing.T) {
	f := newFixture(t)
	f.configure("q", func(o *QueueOptions) { o.MaxSize = 10 })
	f.push("q", "a", "a0")
	msgs := f.pop(PopRequest{Queue: "q", Partition: "a", Group: "g"})
	bad := ackOf(msgs[0], Completed)
	bad.LeaseID[0] ^= 0xff // not the live lease
	before := dumpState(f.e)
	r, err := f.e.Transaction(context.Background(), []AckItem{bad}, []PushItem{
		{Queue: "q", Partition: "new-part", Payload: []byte("x")},
		{Queue: "brand.new", Partition: "p", Payload: []byte("y")},
	})
	if err != nil || !errors.Is(r.Err, ErrTxnAborted) {
		t.Fatalf("transaction with a bad lease: %v, %v", err, r.Err)
	}
	if after := dumpState(f.e); after != before {
		t.Fatalf("an aborted transaction changed the state:\n%s", diffLines(before, after))
	}
	f.restart()
	if qs := f.e.Queues(); len(qs) != 1 {
		t.Fatalf("after a restart: %d queues", len(qs))
	}
}

// TestFailedPushCreatesNoPartition: a push whose every item is refused
// (here: too large) leaves no partition behind (it would vanish at the next
// restart, never having been journaled).
func TestFailedPushCreatesNoPartition(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxPayloadBytes = 4 })
	f.push("q", "a", "ok")
	before := dumpState(f.e)
	res := f.pushItems(PushItem{Queue: "q", Partition: "b", Payload: []byte("far too large")})
	if res[0].Status != Failed || !errors.Is(res[0].Err, ErrTooLarge) {
		t.Fatalf("push: %+v", res[0])
	}
	if after := dumpState(f.e); after != before {
		t.Fatalf("a refused push changed the state:\n%s", diffLines(before, after))
	}
}

// TestAdminAnswersAfterCommit: Configure, DeleteQueue and DeleteGroup answer
// once their record is durable, not before.
func TestAdminAnswersAfterCommit(t *testing.T) {
	f := newFixture(t)
	f.push("q", "a", "a0")
	f.pop(PopRequest{Queue: "q", Group: "g"})
	ctx := context.Background()
	for _, op := range []struct {
		name string
		run  func() error
	}{
		{"configure", func() error { _, err := f.e.Configure(ctx, "q2", DefaultQueueOptions()); return err }},
		{"delete group", func() error { _, err := f.e.DeleteGroup(ctx, "q", "g"); return err }},
		{"delete queue", func() error { _, err := f.e.DeleteQueue(ctx, "q"); return err }},
	} {
		hold := make(chan struct{})
		f.j.mu.Lock()
		f.j.hold = hold
		f.j.mu.Unlock()
		done := make(chan error, 1)
		go func() { done <- op.run() }()
		select {
		case err := <-done:
			t.Fatalf("%s answered (%v) before its record was durable", op.name, err)
		case <-time.After(50 * time.Millisecond):
		}
		close(hold)
		f.j.mu.Lock()
		f.j.hold = nil
		f.j.mu.Unlock()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: %v", op.name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s never answered", op.name)
		}
	}
}

// TestSnapshotWaitsForAJournalBehind: a journal that refuses records for a
// while because it is behind (overloaded) delays a snapshot, it does not fail
// it; Close's last snapshot too.
func TestSnapshotWaitsForAJournalBehind(t *testing.T) {
	f := newFixture(t)
	f.push("q", "p", "a", "b")
	for _, step := range []struct {
		name string
		run  func() error
	}{
		{"Snapshot", f.e.Snapshot},
		{"Close", f.e.Close},
	} {
		f.j.refuse(fmt.Errorf("memjournal: %w", syscall.EAGAIN))
		done := make(chan error, 1)
		go func() { done <- step.run() }()
		select {
		case err := <-done:
			t.Fatalf("%s answered (%v) while the journal refused every record", step.name, err)
		case <-time.After(50 * time.Millisecond):
		}
		f.j.refuse(nil)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s once the journal caught up: %v", step.name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s still waiting 10 s after the journal caught up", step.name)
		}
		if step.name == "Snapshot" {
			f.push("q", "p", "c") // something for Close's snapshot to cover
		}
	}
	f.j.mu.Lock()
	has := f.j.hasSnap
	f.j.mu.Unlock()
	if !has {
		t.Fatal("no snapshot was written")
	}
}

// limitJournal refuses records above max bytes, as the log refuses those
// above its MaxEntryBytes (with an error matching EMSGSIZE).
type limitJournal struct {
	*memJournal
	max int
}

func (j limitJournal) Append(rec []byte, done func(error)) (uint64, error) {
	if len(rec) > j.max {
		return 0, fmt.Errorf("limitjournal: record of %d bytes: %w", len(rec), syscall.EMSGSIZE)
	}
	return j.memJournal.Append(rec, done)
}

// TestDeadLettersSplitIntoBoundedRecords: acks that file dead letters, each
// carrying its message's payload, are journaled in records of about
// MaxRecordBytes, not one record as large as the request (which the journal
// refused, failing the engine for good): all succeed and survive a restart.
// When the journal refuses one of those records, its acks and the run's
// later ones are refused and left as they were; the earlier ones stand.
func TestDeadLettersSplitIntoBoundedRecords(t *testing.T) {
	mj := newMemJournal()
	e, err := New(Config{NoTicker: true, Stripes: 4, MaxRecordBytes: 1000}, limitJournal{mj, 2000})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	items := make([]PushItem, 6)
	for i := range items {
		items[i] = PushItem{Queue: "q", Payload: []byte(strings.Repeat(string(rune('a'+i)), 400))}
	}
	for i := range items {
		if _, err := e.Push(ctx, items[i:i+1]); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := e.Pop(ctx, PopRequest{Queue: "q", Group: "g", Batch: 6})
	if err != nil || len(msgs) != 6 {
		t.Fatalf("pop: %d %v", len(msgs), err)
	}
	acks := make([]AckItem, 6)
	for i, m := range msgs {
		acks[i] = ackOf(m, DLQ)
		acks[i].Error = "bad"
	}
	// The journal takes the first record and refuses the next: the first
	// acks stand, the rest are refused and still leased.
	mj.mu.Lock()
	mj.appendErr, mj.allow = fmt.Errorf("memjournal: %w", syscall.EAGAIN), 1
	mj.mu.Unlock()
	res, err := e.Ack(ctx, acks)
	mj.refuse(nil)
	if err != nil {
		t.Fatalf("ack: %v", err)
	}
	ok := 0
	for i, r := range res {
		if r.Err == nil {
			if ok != i {
				t.Fatalf("ack %d succeeded after a refused one", i)
			}
			ok++
		} else if !errors.Is(r.Err, ErrOverloaded) {
			t.Fatalf("ack %d: %v", i, r.Err)
		}
	}
	if ok == 0 || ok == 6 {
		t.Fatalf("%d of 6 acks succeeded: the run was not split (or not refused)", ok)
	}
	if _, total, _ := e.DLQ(DLQFilter{Queue: "q"}); total != ok {
		t.Fatalf("%d dead letters after %d acks succeeded", total, ok)
	}
	// The refused ones, sent again, succeed: all six filed.
	res, err = e.Ack(ctx, acks[ok:])
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("ack %d again: %v", ok+i, r.Err)
		}
	}
	if err := e.Healthy(); err != nil {
		t.Fatalf("the engine after records the journal refused for their size: %v", err)
	}
	e.Close()
	e2, err := New(Config{NoTicker: true, Stripes: 4}, mj.reopen())
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	dl, total, _ := e2.DLQ(DLQFilter{Queue: "q"})
	if total != 6 {
		t.Fatalf("after a restart: %d dead letters", total)
	}
	for _, d := range dl {
		if len(d.Message.Payload) != 400 || d.Error != "bad" {
			t.Fatalf("dead letter %+v", d)
		}
	}
}

// TestDeposedJournalIsNotAFailure: a journal that says the engine is
// deposed (its log is another's now) has the engine refuse changes with
// that error, without latching a journal failure: the engine is about to
// be closed by its owner, and nothing of it is a fault to report.
func TestDeposedJournalIsNotAFailure(t *testing.T) {
	f := newFixture(t)
	f.push("q", "", "a")
	deposed := fmt.Errorf("not the leader any more (%w)", ErrDeposed)
	f.j.mu.Lock()
	f.j.failErr = deposed
	f.j.mu.Unlock()
	_, err := f.e.Push(context.Background(), []PushItem{{Queue: "q", Payload: []byte("b")}})
	if !errors.Is(err, ErrDeposed) || errors.Is(err, ErrJournal) {
		t.Fatalf("push to a deposed engine: %v, want the deposal, not a journal failure", err)
	}
	if p := f.e.failErr.Load(); p != nil {
		t.Fatalf("the deposal latched a journal failure: %v", *p)
	}
	// Deposed between the engine's check and its append (Append refuses,
	// Err does not say it yet): the call is refused whole, not answered
	// with items failed inside a call that succeeded.
	f.j.mu.Lock()
	f.j.failErr, f.j.appendErr = nil, deposed
	f.j.mu.Unlock()
	res, err := f.e.Push(context.Background(), []PushItem{{Queue: "new-queue", Payload: []byte("c")}})
	if !errors.Is(err, ErrDeposed) {
		t.Fatalf("push refused at its append by a deposal: %v, %+v; want the call refused with it", err, res)
	}
}
