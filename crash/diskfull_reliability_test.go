package crash

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
)

// Disk full, then kill -9: `regent serve` with its data directory on a
// 64 MiB tmpfs that a filler fills to ENOSPC and frees again, several times
// a run, while 4 producers push (2,000 items/s in all, 8 partitions), group
// "auto" pops with autoAck (4 workers) and group "leased" pops and acks
// (8 workers: completed, or dlq with an error text naming the message).
// After 6-10 s the broker is killed with SIGKILL, the space freed, the
// broker restarted on the same data, both groups drained and the
// dead-letter queue listed. What each check means is in
// diskfull_audit_reliability_test.go.
//
//	REGENT_LONG=1 go test ./crash -run TestDiskFullThenKill9 -v   # as root
//	REGENT_DISKFULL_RUNS=N, REGENT_CRASH_SEED=S                   # runs (10); seeds

const (
	dfQueue      = "diskfull"
	dfAuto       = "auto"
	dfLeased     = "leased"
	dfPartitions = 8
	dfTmpfsBytes = 64 << 20
	// dfCallTime bounds every call: far above a stretch of full disk (a
	// record accepted before the disk filled is answered once space is
	// back), so that only the kill leaves calls unanswered.
	dfCallTime = 30 * time.Second
	dfLease    = time.Second
)

// TestDiskFullThenKill9 runs the scenario REGENT_DISKFULL_RUNS times
// (default 10), each on a fresh tmpfs and a fresh broker, and fails on any
// violation. It needs REGENT_LONG=1 and root (it mounts a tmpfs).
func TestDiskFullThenKill9(t *testing.T) {
	if !long() {
		t.Skip("REGENT_LONG=1 runs it (10 runs of about 10 s, as root: it mounts a tmpfs)")
	}
	if os.Geteuid() != 0 {
		t.Skip("mounts a tmpfs: root only")
	}
	runs := 10
	if v, err := strconv.Atoi(os.Getenv("REGENT_DISKFULL_RUNS")); err == nil && v > 0 {
		runs = v
	}
	seed := rand.Uint64()
	if v, err := strconv.ParseUint(os.Getenv("REGENT_CRASH_SEED"), 10, 64); err == nil {
		seed = v
	}
	bin := binary(t)
	start := time.Now()
	var total dfReport
	failed := 0
	for run := 1; run <= runs; run++ {
		rep := diskFullRun(t, bin, run, seed+uint64(run))
		t.Logf("run %d of %d:\n%s", run, runs, rep)
		if v := rep.violations(); v > 0 {
			failed++
			t.Errorf("run %d: %d violations (broker logs and a copy of the data in %s)", run, v, rep.dir)
		}
		if rep.startFailures == 0 && (rep.journalFull < 2 || rep.pushSendsRefused == 0) {
			t.Errorf("run %d: the journal found the disk full %d times and %d pushes were refused: too little to mean anything",
				run, rep.journalFull, rep.pushSendsRefused)
		}
		total.add(rep)
	}
	t.Logf("%d runs in %v (seed %d), %d with violations; totals:\n%s", runs, time.Since(start).Round(time.Second), seed, failed, &total)
	if total.autoPopsRefused == 0 || total.dlqRefused == 0 || total.completedRefused == 0 {
		t.Errorf("no autoAck pop, dlq ack or completed ack was refused: the disk was never full at the right moments")
	}
}

// dfLedger records everything the workload sent and every answer. seq
// orders requests and answers: taken when a request goes out and when its
// answer (or failure) comes back.
type dfLedger struct {
	seq atomic.Uint64

	mu         sync.Mutex
	items      map[string]*dfItem
	autoPops   []*dfPop
	leased     map[string][]dfDelivery // key -> deliveries to group "leased"
	acks       map[string][]dfAck      // key -> acks sent in group "leased"
	dlqRefused map[string]bool         // a dlq ack of the key was answered refused
	// pushRefusals counts the items answered refused, by reason.
	pushRefusals map[protocol.Code]int
	leasedPops   struct{ ok, refused, unanswered int }
}

// dfItem is one message a producer pushed (one key, however often sent).
type dfItem struct {
	key, partition string
	payload        []byte
	sends          []outcome
	// dupAfterRefusals: answered duplicate while every earlier send of it
	// had been answered refused (a refused push was kept).
	dupAfterRefusals bool
	queued           bool // answered queued or duplicate
	id               client.ID
	offset           uint64
}

// dfPop is one autoAck pop (or, drain set, every message the drain popped
// from one partition).
type dfPop struct {
	sent, answered uint64
	batch, parts   int
	drain          bool
	out            outcome
	code           protocol.Code
	msgs           []client.Message
}

// dfDelivery is one message popped by group "leased".
type dfDelivery struct {
	seq    uint64
	worker string
	m      client.Message
}

// dfAck is one ack sent in group "leased".
type dfAck struct {
	sent, seq uint64
	status    client.AckStatus
	text      string
	out       outcome
	code      protocol.Code // why it was refused
	dead      bool
}

// answer classifies a call's error: nil is answered OK; a *protocol.Error
// is the broker's answer (it refused); anything else (connection lost,
// deadline) is no answer: the call may or may not have taken effect.
func answer(err error) (outcome, protocol.Code) {
	if err == nil {
		return answeredOK, protocol.CodeOK
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return answeredRefused, pe.Code
	}
	return noAnswer, 0
}

// dfRun is one run's moving parts.
type dfRun struct {
	l          *dfLedger
	c          *client.Client
	junk       string
	fullCycles atomic.Int64
	breaths    atomic.Int64 // moments of room given back while full
	full       atomic.Bool
	fullTime   atomic.Int64 // nanoseconds the disk was held full
}

// diskFullRun mounts a tmpfs, runs the broker on it under load and the
// filler, kills it, restarts it and checks. Problems of the harness itself
// end the test.
func diskFullRun(t *testing.T, bin string, run int, seed uint64) *dfReport {
	t.Helper()
	began := time.Now()
	dir, err := os.MkdirTemp("", "regent-diskfull-")
	if err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(dir, "tmpfs")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	umount, err := mountTmpfs(mnt, dfTmpfsBytes)
	if err != nil {
		os.RemoveAll(dir)
		t.Skipf("cannot mount a tmpfs here (%v)", err)
	}
	var once sync.Once
	unmount := func() { once.Do(umount) }
	defer unmount()
	cfg := &Config{Binary: bin, Dir: dir, StartTimeout: 30 * time.Second}
	b, err := newBroker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.dataDir = filepath.Join(mnt, "data") // the logs stay on the real disk
	defer b.kill()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := b.start(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctx, b.tcpAddr, client.WithConns(4), client.WithReconnectBackoff(10*time.Millisecond, 100*time.Millisecond),
		client.WithDialTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o := client.DefaultQueueOptions()
	o.LeaseTime = dfLease
	if _, err := c.Configure(ctx, dfQueue, o); err != nil {
		t.Fatal(err)
	}

	r := &dfRun{c: c, junk: filepath.Join(mnt, "junk"), l: &dfLedger{items: map[string]*dfItem{}, leased: map[string][]dfDelivery{},
		acks: map[string][]dfAck{}, dlqRefused: map[string]bool{}, pushRefusals: map[protocol.Code]int{}}}
	rng := rand.New(rand.NewPCG(seed, 0))
	up := 6*time.Second + time.Duration(rng.Int64N(int64(4*time.Second)))
	wctx, stopWork := context.WithCancel(ctx)
	var wg sync.WaitGroup
	const pushRate = 2000
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(rr *rand.Rand) { defer wg.Done(); r.producer(wctx, i, rr, pushRate/4) }(rand.New(rand.NewPCG(seed, uint64(10+i))))
	}
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(rr *rand.Rand) { defer wg.Done(); r.autoWorker(wctx, rr) }(rand.New(rand.NewPCG(seed, uint64(20+i))))
	}
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(rr *rand.Rand) { defer wg.Done(); r.leasedWorker(wctx, fmt.Sprint("w", i), rr) }(rand.New(rand.NewPCG(seed, uint64(30+i))))
	}
	var fillerWG sync.WaitGroup
	fillerWG.Add(1)
	go func() { defer fillerWG.Done(); r.filler(wctx, rand.New(rand.NewPCG(seed, 40))) }()

	select {
	case <-time.After(up):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	fullAtKill := r.full.Load()
	killFrom := r.l.seq.Add(1) // calls failing after this failed for the kill
	b.kill()
	killSeq := r.l.seq.Add(1) // requests sent after this never reached a live broker
	stopWork()
	wg.Wait()
	fillerWG.Wait()
	if err := os.Remove(r.junk); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}

	rep := &dfReport{seed: seed, up: up, dir: dir, fullCycles: int(r.fullCycles.Load()), fullAtKill: fullAtKill,
		fullTime: time.Duration(r.fullTime.Load()), breaths: int(r.breaths.Load())}
	// How often the journal found the disk full (it logs each time).
	before, _ := os.ReadFile(logPath(dir, 1))
	rep.journalFull = strings.Count(string(before), "journal: disk full; appends are refused")
	if err := b.start(ctx); err != nil {
		rep.problem(&rep.startFailures, "restart after kill -9: %v", err)
		rep.elapsed = time.Since(began)
		return rep
	}
	if err := waitReady(ctx, c, 10*time.Second); err != nil {
		t.Fatalf("run %d: broker not reachable after the restart: %v", run, err)
	}
	final, err := r.drain(ctx)
	if err != nil {
		t.Fatalf("run %d: drain: %v\n%s", run, err, b.logTail())
	}
	r.l.audit(rep, final, killFrom, killSeq)
	rep.elapsed = time.Since(began)
	if err := b.stop(10 * time.Second); err != nil {
		t.Logf("run %d: graceful stop: %v", run, err)
	}
	if rep.violations() > 0 {
		if err := os.CopyFS(filepath.Join(dir, "data-after"), os.DirFS(b.dataDir)); err != nil {
			t.Logf("run %d: copy the data: %v", run, err)
		}
		t.Logf("run %d: the log before the kill (%s):\n%s", run, logPath(dir, 1), tailFile(logPath(dir, 1), 6000))
	} else {
		unmount()
		os.RemoveAll(dir)
	}
	return rep
}

func tailFile(path string, n int) string {
	data, _ := os.ReadFile(path)
	if len(data) > n {
		data = append([]byte("..."), data[len(data)-n:]...)
	}
	return strings.TrimRight(string(data), "\n")
}

// filler fills the tmpfs to ENOSPC with a junk file and holds it full for
// 0.2-0.8 s, then frees it and leaves it free for 0.3-1.2 s, until ctx
// ends. While it holds the disk full it breathes, as other writers on a
// nearly full disk would: every few milliseconds it gives back 4-256 KiB
// for a moment, or takes back what the journal freed, so that the journal
// finds room and loses it again many times per stretch.
func (r *dfRun) filler(ctx context.Context, rng *rand.Rand) {
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(rng.Uint32())
	}
	sleep := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond }
	for ctx.Err() == nil {
		if !sleep(ms(300, 1200)) {
			return
		}
		f, err := os.OpenFile(r.junk, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			continue // the directory entry itself may not fit: try later
		}
		if size, ok := fillUp(f, chunk); ok {
			r.full.Store(true)
			r.fullCycles.Add(1)
			began := time.Now()
			hold := time.Now().Add(ms(200, 800))
			for time.Now().Before(hold) && sleep(ms(1, 8)) {
				if rng.IntN(10) < 7 {
					size -= min(size, int64(4096*(1+rng.IntN(64))))
					if f.Truncate(size) != nil {
						break
					}
					if _, err := f.Seek(size, io.SeekStart); err != nil {
						break
					}
					r.breaths.Add(1)
					if !sleep(ms(2, 15)) {
						break
					}
				}
				more, _ := fillUp(f, chunk)
				size += more
			}
			r.fullTime.Add(int64(time.Since(began)))
		}
		f.Close()
		os.Remove(r.junk)
		r.full.Store(false)
	}
}

// fillUp writes to f until the device is full (ok) or another error, and
// says how many bytes it wrote.
func fillUp(f *os.File, chunk []byte) (n int64, ok bool) {
	for _, size := range []int{len(chunk), 4096} {
		for {
			w, err := f.Write(chunk[:size])
			n += int64(w)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				return n, false
			}
		}
	}
	return n, true
}

// pause waits a little after a failed call.
func dfPause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(20 * time.Millisecond):
	}
}

// producer pushes batches of 1-4 items, each to a random partition, keys
// "P<producer>-<n>" as transactionIds, at rate items per second. A batch
// left unanswered is sent again as it is; an item answered refused is sent
// again in a later batch half of the time (same key), else given up.
func (r *dfRun) producer(ctx context.Context, p int, rng *rand.Rand, rate float64) {
	l := r.l
	n := 0
	var again []*dfItem
	next := time.Now()
	for ctx.Err() == nil {
		if wait := time.Until(next); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		} else if wait < -100*time.Millisecond {
			next = time.Now()
		}
		batch := again
		again = nil
		want := 1 + rng.IntN(4)
		l.mu.Lock()
		for len(batch) < want {
			key := fmt.Sprintf("P%d-%d", p, n)
			n++
			it := &dfItem{key: key, partition: fmt.Sprintf("p%d", rng.IntN(dfPartitions)), payload: payloadFor(key, rng)}
			l.items[key] = it
			batch = append(batch, it)
		}
		l.mu.Unlock()
		next = next.Add(time.Duration(float64(len(batch)) / rate * float64(time.Second)))
		items := make([]client.Item, len(batch))
		for i, it := range batch {
			items[i] = client.Item{Queue: dfQueue, Partition: it.partition, TransactionID: it.key, Payload: it.payload}
		}
		for ctx.Err() == nil {
			cctx, cancel := context.WithTimeout(ctx, dfCallTime)
			res, err := r.c.Push(cctx, items...)
			cancel()
			out, code := answer(err)
			l.mu.Lock()
			for i, it := range batch {
				switch {
				case out == answeredRefused:
					it.sends = append(it.sends, out)
					l.pushRefusals[code]++
				case out == noAnswer:
					it.sends = append(it.sends, out)
				default:
					l.notePush(it, res[i])
				}
			}
			l.mu.Unlock()
			if out == noAnswer {
				dfPause(ctx)
				continue
			}
			break
		}
		for _, it := range batch {
			if it.sends[len(it.sends)-1] == answeredRefused && len(it.sends) < 20 && rng.IntN(2) == 0 {
				again = append(again, it)
			}
		}
	}
}

// notePush records one item's answer. l.mu is held.
func (l *dfLedger) notePush(it *dfItem, res client.PushResult) {
	switch res.Status {
	case client.PushQueued, client.PushDuplicate:
		if res.Status == client.PushDuplicate && allRefused(it.sends) {
			it.dupAfterRefusals = true
		}
		it.sends = append(it.sends, answeredOK)
		if !it.queued {
			it.queued, it.id, it.offset = true, res.MessageID, res.Offset
		}
	default:
		it.sends = append(it.sends, answeredRefused)
		l.pushRefusals[protocol.CodeOf(res.Err)]++
	}
}

// autoWorker pops group "auto" with autoAck: batches of 1-8 from 1 or 2
// partitions, long polls of 200 ms.
func (r *dfRun) autoWorker(ctx context.Context, rng *rand.Rand) {
	for ctx.Err() == nil {
		p := &dfPop{batch: 1 + rng.IntN(16), parts: 1 + rng.IntN(4), sent: r.l.seq.Add(1)}
		cctx, cancel := context.WithTimeout(ctx, dfCallTime)
		msgs, err := r.c.Queue(dfQueue).Group(dfAuto).Batch(p.batch).Partitions(p.parts).Wait(true).Timeout(200 * time.Millisecond).
			AutoAck(true).Pop(cctx)
		cancel()
		p.answered = r.l.seq.Add(1)
		p.out, p.code = answer(err)
		p.msgs = msgs
		r.l.mu.Lock()
		r.l.autoPops = append(r.l.autoPops, p)
		r.l.mu.Unlock()
		if err != nil {
			dfPause(ctx)
		}
	}
}

// leasedWorker pops group "leased" (batches of 1-16), works on them for up
// to 100 ms (so that the disk fills between many a pop and its ack), and
// acks each pop in offset order in one request: completed, or (25%) dlq
// with the error text "dlq <key> by <worker>"; a message whose dlq ack was
// refused before is acked completed. Now and then (3%) it walks away and
// the lease runs out.
func (r *dfRun) leasedWorker(ctx context.Context, name string, rng *rand.Rand) {
	l := r.l
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, dfCallTime)
		msgs, err := r.c.Queue(dfQueue).Group(dfLeased).Batch(1 + rng.IntN(16)).Wait(true).Timeout(200 * time.Millisecond).Pop(cctx)
		cancel()
		out, _ := answer(err)
		l.mu.Lock()
		switch out {
		case answeredOK:
			l.leasedPops.ok++
		case answeredRefused:
			l.leasedPops.refused++
		default:
			l.leasedPops.unanswered++
		}
		l.mu.Unlock()
		if err != nil {
			dfPause(ctx)
			continue
		}
		if len(msgs) == 0 {
			continue
		}
		l.noteLeased(name, msgs)
		if rng.IntN(100) < 3 {
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(rng.Int64N(int64(100 * time.Millisecond)))):
		}
		acks := make([]client.Ack, len(msgs))
		l.mu.Lock()
		for i, m := range msgs {
			acks[i] = client.Ack{Message: m, Status: client.Completed}
			if !l.dlqRefused[m.TransactionID] && rng.IntN(100) < 25 {
				acks[i].Status, acks[i].Error = client.DLQ, fmt.Sprintf("dlq %s by %s", m.TransactionID, name)
			}
		}
		l.mu.Unlock()
		sent := l.seq.Add(1)
		cctx, cancel = context.WithTimeout(ctx, dfCallTime)
		res, err := r.c.AckEach(cctx, acks...)
		cancel()

		out, code := answer(err)
		l.mu.Lock()
		for i, a := range acks {
			ev := dfAck{sent: sent, seq: l.seq.Add(1), status: a.Status, text: a.Error, out: out, code: code}
			if out == answeredOK {
				if ev.code = protocol.CodeOf(res[i].Err); res[i].Err != nil {
					ev.out = answeredRefused
				}
				ev.dead = res[i].DeadLettered
			}
			if ev.status == client.DLQ && ev.out == answeredRefused {
				l.dlqRefused[a.Message.TransactionID] = true
			}
			l.acks[a.Message.TransactionID] = append(l.acks[a.Message.TransactionID], ev)
		}
		l.mu.Unlock()
		if err != nil {
			dfPause(ctx)
		}
	}
}

// noteLeased records a pop's messages for group "leased".
func (l *dfLedger) noteLeased(worker string, msgs []client.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range msgs {
		l.leased[m.TransactionID] = append(l.leased[m.TransactionID], dfDelivery{seq: l.seq.Add(1), worker: worker, m: m})
	}
}

// dfFinal is what the broker holds after the restart and the drain.
type dfFinal struct {
	next     map[string]uint64 // partition -> offset of its next message
	low      map[string]uint64
	cursor   map[string]uint64 // partition -> group auto's cursor
	dlq      []client.DLQEntry
	drainMsg map[string]client.Message // key -> message, for the leased drain
}

// drain pops group auto (autoAck) and group leased (leases, acked
// completed) from every partition until empty, then lists the partitions
// and the dead-letter queue.
func (r *dfRun) drain(ctx context.Context) (*dfFinal, error) {
	l := r.l
	f := &dfFinal{next: map[string]uint64{}, low: map[string]uint64{}, cursor: map[string]uint64{}, drainMsg: map[string]client.Message{}}
	for i := 0; i < dfPartitions; i++ {
		p := fmt.Sprintf("p%d", i)
		sent := l.seq.Add(1)
		msgs, err := popAll(ctx, r.c, dfQueue, p, dfAuto, true)
		if err != nil {
			return nil, err
		}
		l.autoPops = append(l.autoPops, &dfPop{sent: sent, answered: l.seq.Add(1), drain: true, out: answeredOK, msgs: msgs})
		for {
			cctx, cancel := context.WithTimeout(ctx, dfCallTime)
			msgs, err := r.c.Queue(dfQueue).Partition(p).Group(dfLeased).Batch(1000).Pop(cctx)
			cancel()
			if protocol.CodeOf(err) == protocol.CodePartitionNotFound {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("pop %s for %s: %w", p, dfLeased, err)
			}
			if len(msgs) == 0 {
				break
			}
			l.noteLeased("drain", msgs)
			for _, m := range msgs {
				f.drainMsg[m.TransactionID] = m
			}
			cctx, cancel = context.WithTimeout(ctx, dfCallTime)
			res, err := r.c.Ack(cctx, msgs, client.Completed, client.AckOptions{})
			cancel()
			if err != nil {
				return nil, fmt.Errorf("ack the drain of %s: %w", p, err)
			}
			for i, a := range res {
				if a.Err != nil {
					return nil, fmt.Errorf("ack the drain of %s: %s: %w", p, msgs[i].TransactionID, a.Err)
				}
			}
		}
	}
	cctx, cancel := context.WithTimeout(ctx, dfCallTime)
	info, err := r.c.QueueInfo(cctx, dfQueue)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("queue info: %w", err)
	}
	for _, p := range info.Partitions {
		f.next[p.Name], f.low[p.Name] = p.Next, p.Low
		for _, g := range p.Groups {
			if g.Group == dfAuto {
				f.cursor[p.Name] = g.Cursor
			}
		}
	}
	if f.dlq, err = listDLQ(ctx, r.c, dfQueue); err != nil {
		return nil, err
	}
	return f, nil
}
