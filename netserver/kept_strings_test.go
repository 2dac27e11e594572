package netserver_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
	"github.com/regentmq/regent/netserver/internal/testhooks"
)

// TestKeptStringsOwnTheirBytes: every string the broker keeps from a request
// reads back exactly as sent, over both doors and after a restart from the
// snapshot, although each request's decode memory is poisoned as soon as
// the request is answered. Kept strings: queue, partition and consumer group
// names, namespaces and tasks (configured, or taken from a dotted queue name
// by a push that creates the queue), transactionIds and traceIds (read back
// by pops, and a repeated transactionId still found a duplicate), the error
// texts of dead-letter entries (a dlq ack, a failed ack past retryLimit, a
// dlq ack inside a transaction), trace names and data (HTTP's traces
// routes); seek, delete group and lease extend keep nothing of their own
// but go through the same buffers. (producerSub is not here: the binary
// protocol has none, and HTTP takes it from the token's claims, which
// encoding/json copies out of a header, not from a pooled buffer.)
//
// Both doors decode without copying: the binary protocol into an arena that
// the next request decoded into the same pooled value overwrites, the HTTP
// bridge's hot routes in place in a pooled body buffer. A string the engine
// keeps without its own copy therefore changes under load (21 of 48
// dead-letter error texts were other acks' bytes in the report this test
// answers). With testhooks.PoisonDecodeBuffers on, such a string reads 0xA5 bytes at
// once, every time. The writes run in 24 lanes at once (12 per door, each
// lane its own queue, where two groups file messages in the dead-letter
// queue concurrently), and every lane is read back over both doors.
func TestKeptStringsOwnTheirBytes(t *testing.T) {
	baseGoroutines := runtime.NumGoroutine()
	testhooks.PoisonDecodeBuffers.Store(true)
	t.Cleanup(func() { testhooks.PoisonDecodeBuffers.Store(false) })
	dir := t.TempDir()
	start := time.Now()
	rep := &keptReport{m: map[string]*keptFinding{}}

	b := startKeptBroker(t, dir)
	var lanes []*keptLane
	for n := 0; n < 12; n++ {
		for _, door := range []string{"tcp", "http"} {
			lanes = append(lanes, newKeptLane(door, n))
		}
	}
	var wg sync.WaitGroup
	for _, l := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.write(b, start); err != nil {
				t.Errorf("lane %s: %v", l.q, err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	b.verify(t, lanes, "before the restart", rep)
	b.stop() // the engine snapshots its state as it closes
	b = startKeptBroker(t, dir)
	b.verify(t, lanes, "after a restart from the snapshot", rep)
	b.stop()

	rep.report(t)
	// Nothing left running: the last goroutines may still be exiting.
	brokertest.CheckFor(t, 5*time.Second, func() error {
		if n := runtime.NumGoroutine(); n > baseGoroutines {
			var buf bytes.Buffer
			pprof.Lookup("goroutine").WriteTo(&buf, 1)
			return fmt.Errorf("%d goroutines left running (%d before the test):\n%s", n, baseGoroutines, buf.String())
		}
		return nil
	})
}

// keptBroker is a broker on the test's data directory, with a client for
// each door.
type keptBroker struct {
	t       *testing.T
	b       *broker.Broker
	e       *engine.Engine
	url     string
	c       *client.Client
	hc      *http.Client
	stopped bool
}

func startKeptBroker(t *testing.T, dir string) *keptBroker {
	t.Helper()
	bb := brokertest.Start(t, broker.Options{
		Journal: log.Config{Dir: dir, Sync: log.SyncNone},
		Engine:  engine.Config{Stripes: 8, TimerTick: 5 * time.Millisecond},
		TuneTCP: func(c *broker.TCPConfig) { c.Loops, c.FixedProcs = 2, true },
	})
	b := &keptBroker{t: t, b: bb, e: bb.Engine(), url: "http://" + bb.HTTPAddr().String(),
		hc: &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	t.Cleanup(b.stop)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	if b.c, err = client.Dial(ctx, bb.TCPAddr().String(), client.WithConns(4)); err != nil {
		t.Fatal(err)
	}
	return b
}

// stop closes the clients, then the broker (the engine snapshots its state
// as it closes).
func (b *keptBroker) stop() {
	if b.stopped {
		return
	}
	b.stopped = true
	if b.c != nil {
		b.c.Close()
	}
	b.hc.CloseIdleConnections()
	if err := b.b.Exit(); err != nil {
		b.t.Errorf("broker exit: %v", err)
	}
}

// hasGroup reports whether group reads q (looked up in the engine itself:
// a test's own view, not a door's).
func (b *keptBroker) hasGroup(q, group string) bool {
	v, err := b.e.ViewQueue(q)
	for _, g := range v.Groups {
		if err == nil && g.Name == group {
			return true
		}
	}
	return false
}

func (b *keptBroker) door(name string) keptDoor {
	if name == "tcp" {
		return tcpDoor{b}
	}
	return httpDoor{b}
}

// The lanes. Every name and text is distinct, so that one lane's bytes in
// another's place show too.

type keptLane struct {
	door, q, auto, autoNS, autoTask, ns, task string
	n                                         int
	parts                                     []string // pa, pb, pc, then pt (made by the transaction's push)
	groups                                    []string // gA, gB, gC, gD, gS, gN, gW
	gone                                      string   // gX, deleted
	msgs                                      map[string]*keptMsg
	dead                                      map[string]keptDead // by message id
	mu                                        sync.Mutex
}

type keptMsg struct{ id, queue, partition, pid, txn, trace string }

type keptDead struct{ group, errText string }

func newKeptLane(door string, n int) *keptLane {
	f := func(what string) string { return fmt.Sprintf("%s-%s-%02d", what, door, n) }
	l := &keptLane{door: door, n: n, q: f("kept"), ns: f("ns"), task: f("task"),
		autoNS: fmt.Sprintf("auto%s%02d", door, n), autoTask: fmt.Sprintf("job%s%02d", door, n),
		parts:  []string{f("pa"), f("pb"), f("pc"), f("pt")},
		groups: []string{f("gA"), f("gB"), f("gC"), f("gD"), f("gS"), f("gN"), f("gW")}, gone: f("gX"),
		msgs: map[string]*keptMsg{}, dead: map[string]keptDead{}}
	l.auto = l.autoNS + "." + l.autoTask
	return l
}

func (l *keptLane) text(what string, k int) string {
	return fmt.Sprintf("%s %s lane %02d message %d", what, l.door, l.n, k)
}

// write performs every operation that keeps a string, over the lane's door.
func (l *keptLane) write(b *keptBroker, start time.Time) error {
	d := b.door(l.door)
	if err := d.configure(l.q, l.ns, l.task); err != nil {
		return fmt.Errorf("configure: %w", err)
	}
	var items []keptItem
	for p, count := range []int{3, 3, 2} {
		for k := 0; k < count; k++ {
			items = append(items, keptItem{queue: l.q, partition: l.parts[p],
				txn: fmt.Sprintf("txn-%s-%d", l.parts[p], k), trace: fmt.Sprintf("trace-%s-%d", l.parts[p], k)})
		}
	}
	items = append(items, keptItem{queue: l.auto, txn: "txn-" + l.auto, trace: "trace-" + l.auto})
	res, err := d.push(items)
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	for i, r := range res {
		it := items[i]
		if r.status != "queued" {
			return fmt.Errorf("push of %s: %s", it.txn, r.status)
		}
		part := it.partition
		if part == "" {
			part = engine.DefaultPartition
		}
		l.msgs[r.id] = &keptMsg{id: r.id, queue: it.queue, partition: part, pid: r.pid, txn: it.txn, trace: it.trace}
	}
	gA, gB, gC, gD, gS, gN, gW := l.groups[0], l.groups[1], l.groups[2], l.groups[3], l.groups[4], l.groups[5], l.groups[6]
	// Two groups file messages in the dead-letter queue at once: gA by
	// dlq acks, gB by failed acks past retryLimit (1).
	errs := make(chan error, 2)
	go func() {
		msgs, err := d.pop(l.q, l.parts[0], gA, "all", time.Time{}, 3)
		if err == nil && len(msgs) != 3 {
			err = fmt.Errorf("popped %d, want 3", len(msgs))
		}
		for k := 0; err == nil && k < len(msgs); k++ {
			m := msgs[k]
			e := l.text("dlq ack error", k)
			var dead bool
			if dead, err = d.ack(m, gA, "dlq", e); err == nil && !dead {
				err = fmt.Errorf("dlq ack of %s not dead-lettered", m.id)
			}
			l.mu.Lock()
			l.dead[m.id] = keptDead{gA, e}
			l.mu.Unlock()
		}
		if err != nil {
			err = fmt.Errorf("group %s: %w", gA, err)
		}
		errs <- err
	}()
	go func() {
		failures := map[string]int{}
		var err error
		for filed := 0; err == nil && filed < 3; {
			var msgs []keptMsgLease
			if msgs, err = d.pop(l.q, l.parts[1], gB, "from", start.Add(-time.Minute), 1); err == nil && len(msgs) != 1 {
				err = fmt.Errorf("popped %d, want 1", len(msgs))
			}
			if err != nil {
				break
			}
			m := msgs[0]
			failures[m.id]++
			e := l.text(fmt.Sprintf("failure %d", failures[m.id]), len(failures))
			var dead bool
			if dead, err = d.ack(m, gB, "failed", e); err == nil && dead != (failures[m.id] == 2) {
				err = fmt.Errorf("failure %d of %s: dead-lettered %v", failures[m.id], m.id, dead)
			}
			if dead {
				filed++
				l.mu.Lock()
				l.dead[m.id] = keptDead{gB, e}
				l.mu.Unlock()
			}
		}
		if err != nil {
			err = fmt.Errorf("group %s: %w", gB, err)
		}
		errs <- err
	}()
	var first error
	for range 2 {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	// A lease extended, then the message completed.
	msgs, err := d.pop(l.q, l.parts[2], gC, "all", time.Time{}, 1)
	if err != nil || len(msgs) != 1 {
		return fmt.Errorf("pop for the lease: %d messages, %v", len(msgs), err)
	}
	if err := d.extend(msgs[0].lease); err != nil {
		return fmt.Errorf("extend: %w", err)
	}
	if _, err := d.ack(msgs[0], gC, "completed", ""); err != nil {
		return fmt.Errorf("ack after extend: %w", err)
	}
	// A transaction: a dlq ack with its error text, and a push.
	if msgs, err = d.pop(l.q, l.parts[2], gD, "all", time.Time{}, 1); err != nil || len(msgs) != 1 {
		return fmt.Errorf("pop for the transaction: %d messages, %v", len(msgs), err)
	}
	tp := keptItem{queue: l.q, partition: l.parts[3], txn: "txn-" + l.parts[3], trace: "trace-" + l.parts[3]}
	e := l.text("transaction dlq error", 0)
	id, pid, err := d.txn(msgs[0], gD, e, tp)
	if err != nil {
		return fmt.Errorf("transaction: %w", err)
	}
	l.dead[msgs[0].id] = keptDead{gD, e}
	l.msgs[id] = &keptMsg{id: id, queue: l.q, partition: tp.partition, pid: pid, txn: tp.txn, trace: tp.trace}
	// A long poll parked on the empty Default partition, answered by a
	// push once its group shows (it parks then, or finds the message at
	// once: the answer is the same).
	type answer struct {
		msgs []keptMsgLease
		err  error
	}
	parked := make(chan answer, 1)
	go func() {
		msgs, err := d.longPoll(l.q, engine.DefaultPartition, gW)
		parked <- answer{msgs, err}
	}()
	// A hand-written poll: write runs in a lane's goroutine, where
	// brokertest.CheckFor (which fails the test with t.Fatalf) may not run.
	for deadline := time.Now().Add(5 * time.Second); !b.hasGroup(l.q, gW); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the long poll of %s never reached the engine", gW)
		}
	}
	pw := keptItem{queue: l.q, partition: engine.DefaultPartition, txn: "txn-parked-" + l.q, trace: "trace-parked-" + l.q}
	res, err = d.push([]keptItem{pw})
	if err != nil || res[0].status != "queued" {
		return fmt.Errorf("push to the long poll: %v %v", res, err)
	}
	l.msgs[res[0].id] = &keptMsg{id: res[0].id, queue: pw.queue, partition: pw.partition, pid: res[0].pid, txn: pw.txn, trace: pw.trace}
	if a := <-parked; a.err != nil || len(a.msgs) != 1 || a.msgs[0].id != res[0].id {
		return fmt.Errorf("the long poll got %d messages (%v), want %s", len(a.msgs), a.err, pw.txn)
	}
	// A group that starts after what exists (it reads nothing), a group
	// moved by a seek (which creates no group: the group's first pop
	// does; over the binary protocol the seek before it is group_not_found,
	// over HTTP a success that moved nothing, as in Queen), and one deleted.
	if msgs, err := d.pop(l.q, l.parts[0], gN, "new", time.Time{}, 10); err != nil || len(msgs) != 0 {
		return fmt.Errorf("pop of a new-only group: %d messages, %v", len(msgs), err)
	}
	if err := d.seek(l.q, gS); (err == nil) != (d.name() == "http") {
		return fmt.Errorf("seek over %s of %s, which never read %s: %v", d.name(), gS, l.q, err)
	}
	if _, err := d.pop(l.q, l.parts[0], gS, "new", time.Time{}, 1); err != nil {
		return fmt.Errorf("pop of %s: %w", gS, err)
	}
	if err := d.seek(l.q, gS); err != nil {
		return fmt.Errorf("seek: %w", err)
	}
	if _, err := d.pop(l.q, l.parts[0], l.gone, "all", time.Time{}, 1); err != nil {
		return fmt.Errorf("pop of %s: %w", l.gone, err)
	}
	if err := d.deleteGroup(l.q, l.gone); err != nil {
		return fmt.Errorf("delete group: %w", err)
	}
	// A trace on the lane's first message (HTTP only has the routes).
	m := l.first()
	var out map[string]any
	if err := b.call("POST", "/api/v1/traces", map[string]any{"transactionId": m.txn, "partitionId": m.pid,
		"data": map[string]any{"note": l.text("trace data", 0)}, "traceNames": []string{l.traceName()},
		"eventType": "event-" + l.q, "consumerGroup": gA}, 201, &out); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	return nil
}

func (l *keptLane) traceName() string { return "tname-" + l.q }

// first is the lane's first message in pa.
func (l *keptLane) first() *keptMsg {
	for _, m := range l.msgs {
		if m.txn == "txn-"+l.parts[0]+"-0" {
			return m
		}
	}
	panic("no first message")
}

// verify reads every lane back over both doors.
func (b *keptBroker) verify(t *testing.T, lanes []*keptLane, phase string, rep *keptReport) {
	var wg sync.WaitGroup
	for _, l := range lanes {
		for _, reader := range []string{"tcp", "http"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				at := fmt.Sprintf("[written over %s, read over %s, %s]", l.door, reader, phase)
				if err := l.verify(b, b.door(reader), at, rep); err != nil {
					t.Errorf("lane %s %s: %v", l.q, at, err)
				}
			}()
		}
	}
	wg.Wait()
	// Traces: HTTP routes only.
	var names struct {
		Names []struct {
			Name string `json:"trace_name"`
		} `json:"trace_names"`
	}
	if err := b.call("GET", "/api/v1/traces/names?limit=1000", nil, 200, &names); err != nil {
		t.Errorf("trace names: %v", err)
	}
	seen := map[string]bool{}
	for _, n := range names.Names {
		seen[n.Name] = true
	}
	for _, l := range lanes {
		at := fmt.Sprintf("[written over http, read over http, %s]", phase)
		rep.present("trace name (trace names)", l.traceName(), seen, at)
		var got struct {
			Traces []struct {
				Txn   string `json:"transaction_id"`
				Event string `json:"event_type"`
				Group string `json:"consumer_group"`
				Queue string `json:"queue_name"`
				Part  string `json:"partition_name"`
				Data  struct {
					Note string `json:"note"`
				} `json:"data"`
			} `json:"traces"`
		}
		if err := b.call("GET", "/api/v1/traces/by-name/"+url.PathEscape(l.traceName()), nil, 200, &got); err != nil {
			t.Errorf("traces by name: %v", err)
			continue
		}
		if len(got.Traces) != 1 {
			rep.check("trace found by its name", fmt.Sprint(len(got.Traces), " traces"), "1 trace", at)
			continue
		}
		tr := got.Traces[0]
		rep.check("trace's transactionId", tr.Txn, l.first().txn, at)
		rep.check("trace's event type", tr.Event, "event-"+l.q, at)
		rep.check("trace's consumer group", tr.Group, l.groups[0], at)
		rep.check("trace's queue", tr.Queue, l.q, at)
		rep.check("trace's partition", tr.Part, l.parts[0], at)
		rep.check("trace data", tr.Data.Note, l.text("trace data", 0), at)
	}
}

func (l *keptLane) verify(b *keptBroker, d keptDoor, at string, rep *keptReport) error {
	// The queues: options, partitions, groups.
	qi, err := d.queue(l.q)
	if err != nil {
		return fmt.Errorf("queue: %w", err)
	}
	rep.check("namespace (configure)", qi.ns, l.ns, at)
	rep.check("task (configure)", qi.task, l.task, at)
	parts := set(qi.partitions)
	for _, p := range append([]string{engine.DefaultPartition}, l.parts...) {
		rep.present("partition name", p, parts, at)
	}
	groups := set(qi.groups)
	for _, g := range l.groups {
		rep.present("consumer group name", g, groups, at)
	}
	rep.check("deleted group is gone", fmt.Sprint(groups[l.gone]), "false", at)
	if qi.modes != nil {
		for g, mode := range map[string]string{l.groups[0]: "all", l.groups[1]: "from", l.groups[5]: "new"} {
			rep.check("consumer group's subscription mode", qi.modes[g], mode, at)
		}
	}
	ai, err := d.queue(l.auto)
	if err != nil {
		return fmt.Errorf("queue %s: %w", l.auto, err)
	}
	rep.check("namespace (from a dotted queue name a push created)", ai.ns, l.autoNS, at)
	rep.check("task (from a dotted queue name a push created)", ai.task, l.autoTask, at)
	// The dead-letter queue, by message id.
	entries, err := d.dlq(l.q)
	if err != nil {
		return fmt.Errorf("dlq: %w", err)
	}
	found := map[string]bool{}
	for _, e := range entries {
		want, ok := l.dead[e.id]
		m := l.msgs[e.id]
		if !ok || m == nil {
			rep.check("dead-letter entry of a message filed by the test", e.id, "(none)", at)
			continue
		}
		found[e.id] = true
		how := map[string]string{l.groups[0]: "a dlq ack", l.groups[1]: "a failed ack past retryLimit", l.groups[3]: "a dlq ack in a transaction"}[want.group]
		rep.check("dead-letter error text ("+how+")", e.errText, want.errText, at)
		rep.check("dead-letter entry's group", e.group, want.group, at)
		rep.check("dead-letter entry's transactionId", e.txn, m.txn, at)
		rep.check("dead-letter entry's traceId", e.trace, m.trace, at)
		rep.check("dead-letter entry's partition", e.partition, m.partition, at)
	}
	for id, want := range l.dead {
		if !found[id] {
			rep.check("dead-letter entry listed", "(missing)", want.errText, at)
		}
	}
	// The messages, read by a group of this reading's own.
	read := fmt.Sprintf("r%d-%s-%s", time.Now().UnixNano()%1e9, d.name(), l.q)
	for _, p := range append([]string{engine.DefaultPartition}, l.parts...) {
		msgs, err := d.pop(l.q, p, read, "all", time.Time{}, 100)
		if err != nil {
			return fmt.Errorf("pop of %s: %w", p, err)
		}
		l.checkMsgs(msgs, l.q, p, at, rep)
	}
	msgs, err := d.pop(l.auto, "", read, "all", time.Time{}, 10)
	if err != nil {
		return fmt.Errorf("pop of %s: %w", l.auto, err)
	}
	l.checkMsgs(msgs, l.auto, engine.DefaultPartition, at, rep)
	// Pops by namespace and task find the queues that carry them.
	for _, lb := range []struct{ ns, task, queue, how string }{
		{l.ns, l.task, l.q, "configured"}, {l.autoNS, l.autoTask, l.auto, "from a dotted queue name"}} {
		msgs, err := d.popLabels(lb.ns, lb.task, read+"-labels")
		if err != nil {
			return fmt.Errorf("pop by labels: %w", err)
		}
		got := "(nothing)"
		if len(msgs) > 0 {
			got = msgs[0].queue
		}
		rep.check("pop by namespace and task ("+lb.how+")", got, lb.queue, at)
	}
	// A transactionId pushed again is a duplicate.
	m := l.first()
	res, err := d.push([]keptItem{{queue: l.q, partition: m.partition, txn: m.txn, trace: "again"}})
	if err != nil {
		return fmt.Errorf("duplicate push: %w", err)
	}
	rep.check("transactionId pushed again", res[0].status+" "+res[0].id, "duplicate "+m.id, at)
	return nil
}

func (l *keptLane) checkMsgs(msgs []keptMsgLease, queue, partition, at string, rep *keptReport) {
	want := 0
	for _, m := range l.msgs {
		if m.queue == queue && m.partition == partition {
			want++
		}
	}
	rep.check("number of messages read from a partition", fmt.Sprint(len(msgs)), fmt.Sprint(want), at)
	for _, got := range msgs {
		m := l.msgs[got.id]
		if m == nil {
			rep.check("message pushed by the test", got.id+" "+got.txn, "(none)", at)
			continue
		}
		rep.check("transactionId", got.txn, m.txn, at)
		rep.check("traceId", got.trace, m.trace, at)
		rep.check("message's partition name", got.partition, m.partition, at)
		rep.check("message's queue name", got.queue, m.queue, at)
	}
}

func set(xs []string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// keptReport counts the checks by what was checked and where, and keeps
// the first bad value of each.
type keptReport struct {
	mu sync.Mutex
	m  map[string]*keptFinding
}

type keptFinding struct {
	checked, bad int
	example      string
}

func (r *keptReport) check(what, got, want, at string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := what + " " + at
	f := r.m[k]
	if f == nil {
		f = &keptFinding{}
		r.m[k] = f
	}
	f.checked++
	if got != want {
		if f.bad == 0 {
			f.example = fmt.Sprintf("got %.24q, want %q", got, want)
		}
		f.bad++
	}
}

// present checks that name is in found; a missing name is reported with
// the names found that hold poison bytes.
func (r *keptReport) present(what, name string, found map[string]bool, at string) {
	got := name
	if !found[name] {
		var poisoned []string
		for n := range found {
			if strings.Contains(n, "\xa5") || strings.Contains(n, "\ufffd") { // 0xA5, or its JSON form
				poisoned = append(poisoned, fmt.Sprintf("%q", n))
			}
		}
		sort.Strings(poisoned)
		got = fmt.Sprintf("(missing; poisoned names listed: %s)", strings.Join(poisoned, " "))
	}
	r.check(what, got, name, at)
}

func (r *keptReport) report(t *testing.T) {
	var bad []string
	checked := 0
	for k, f := range r.m {
		checked += f.checked
		if f.bad > 0 {
			bad = append(bad, fmt.Sprintf("%s: %d of %d wrong, first %s", k, f.bad, f.checked, f.example))
		}
	}
	sort.Strings(bad)
	t.Logf("%d checks of kept strings", checked)
	if len(bad) > 0 {
		t.Errorf("kept strings that do not read back as sent (%d kinds):\n%s", len(bad), strings.Join(bad, "\n"))
	}
}
