package engine

import (
	"context"
	"fmt"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

type fixture struct {
	t     *testing.T
	e     *Engine
	j     *memJournal
	clock *FakeClock
	cfg   Config
}

func newFixture(t *testing.T, cfgs ...func(*Config)) *fixture {
	t.Helper()
	f := &fixture{t: t, j: newMemJournal(), clock: NewFakeClock(t0)}
	f.cfg = Config{Clock: f.clock, NoTicker: true, Stripes: 8}
	for _, c := range cfgs {
		c(&f.cfg)
	}
	f.open()
	t.Cleanup(func() {
		f.e.Close()
		f.j.close()
	})
	return f
}

func (f *fixture) open() {
	f.t.Helper()
	e, err := New(f.cfg, f.j)
	if err != nil {
		f.t.Fatalf("New: %v", err)
	}
	f.e = e
}

// restart simulates a crash: the engine is dropped without Close and a new
// one recovers from what the journal committed.
func (f *fixture) restart() {
	f.t.Helper()
	old := f.j
	f.j = old.reopen()
	f.e.Close()
	old.close()
	f.open()
}

// advance moves the fake clock and fires due timers.
func (f *fixture) advance(d time.Duration) {
	f.clock.Advance(d)
	f.e.Tick()
}

func (f *fixture) configure(q string, mod func(*QueueOptions)) {
	f.t.Helper()
	o := DefaultQueueOptions()
	if mod != nil {
		mod(&o)
	}
	if _, err := f.e.Configure(context.Background(), q, o); err != nil {
		f.t.Fatalf("Configure(%s): %v", q, err)
	}
}

func (f *fixture) push(q, p string, payloads ...string) []PushResult {
	f.t.Helper()
	items := make([]PushItem, len(payloads))
	for i, pl := range payloads {
		items[i] = PushItem{Queue: q, Partition: p, Payload: []byte(pl)}
	}
	return f.pushItems(items...)
}

func (f *fixture) pushItems(items ...PushItem) []PushResult {
	f.t.Helper()
	res, err := f.e.Push(context.Background(), items)
	if err != nil {
		f.t.Fatalf("Push: %v", err)
	}
	return res
}

func (f *fixture) pop(req PopRequest) []Message {
	f.t.Helper()
	msgs, err := f.e.Pop(context.Background(), req)
	if err != nil {
		f.t.Fatalf("Pop(%+v): %v", req, err)
	}
	return msgs
}

func (f *fixture) ack(items ...AckItem) []AckResult {
	f.t.Helper()
	res, err := f.e.Ack(context.Background(), items)
	if err != nil {
		f.t.Fatalf("Ack: %v", err)
	}
	return res
}

// ackMsgs acks msgs with one status per message.
func (f *fixture) ackMsgs(msgs []Message, st ...AckStatus) []AckResult {
	f.t.Helper()
	items := make([]AckItem, len(msgs))
	for i, m := range msgs {
		s := st[0]
		if i < len(st) {
			s = st[i]
		}
		items[i] = ackOf(m, s)
	}
	return f.ack(items...)
}

func ackOf(m Message, s AckStatus) AckItem {
	return AckItem{PartitionID: m.PartitionID, HasOffset: true, Offset: m.Offset, LeaseID: m.LeaseID, Group: m.Group, Status: s}
}

func payloads(msgs []Message) string {
	s := ""
	for i, m := range msgs {
		if i > 0 {
			s += ","
		}
		s += string(m.Payload)
	}
	return s
}

func offsets(msgs []Message) []uint64 {
	o := make([]uint64, len(msgs))
	for i, m := range msgs {
		o[i] = m.Offset
	}
	return o
}

func wantPayloads(t *testing.T, msgs []Message, want string) {
	t.Helper()
	if got := payloads(msgs); got != want {
		t.Fatalf("payloads = %q, want %q", got, want)
	}
}

func nums(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprint(i)
	}
	return s
}
