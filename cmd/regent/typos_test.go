package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// queueList is `regent queues --json`: name and groups of each queue.
func queueList(t *testing.T, bin, addr string) map[string][]string {
	t.Helper()
	code, out, errs := runBin(t, bin, "", "queues", "--json", "--addr", addr)
	var qs []struct {
		Name   string   `json:"name"`
		Groups []string `json:"groups"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &qs) != nil {
		t.Fatalf("queues --json: %d %s %s", code, out, errs)
	}
	m := map[string][]string{}
	for _, q := range qs {
		m[q.Name] = q.Groups
	}
	return m
}

// TestTyposLeaveNoState: waiting pops, a tail and seeks on a queue or a
// group that does not exist create nothing; seek, dlq and queue say "not
// found" and exit 1 (the built binary against a real broker).
func TestTyposLeaveNoState(t *testing.T) {
	_, bin := buildRegent(t)
	addr := testBroker(t)
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return runBin(t, bin, "", append(args, "--addr", addr)...)
	}
	if code, out, errs := run("push", "orders", "x"); code != exitOK {
		t.Fatalf("push: %d %s %s", code, out, errs)
	}
	for _, args := range [][]string{
		{"pop", "typo", "--wait", "--wait-time", "300ms"},
		{"pop", "typo", "--group", "billing", "--wait", "--wait-time", "300ms"},
		{"pop", "typo", "--partition", "p", "--wait", "--wait-time", "300ms", "--json"},
		{"pop", "tÿpo-ü🚀", "--group", "équipe", "--wait", "--wait-time", "300ms"},
		{"pop", "typo"},
	} {
		if code, out, errs := run(args...); code != exitOK || !(strings.Contains(out, "(no message)") || strings.TrimSpace(out) == "[]") {
			t.Errorf("%q: exit %d, %q %q", args, code, out, errs)
		}
	}
	// tail of a queue that does not exist follows it without creating it.
	o := newOp("tail", &lockedBuffer{}, &lockedBuffer{})
	*o.addr = addr
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel) // as Ctrl-C
	if code := tail(ctx, o, "typo-tail", tailFrom{}); code != exitOK {
		t.Errorf("tail of a missing queue: exit %d", code)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"seek", "typo", "g", "--to-end"}, "queue_not_found"},
		{[]string{"seek", "orders", "nosuchgroup", "--to-start"}, "group_not_found"},
		{[]string{"seek", "orders", "nosuchgroup", "--to-end", "--partition", "Default"}, "group_not_found"},
		{[]string{"dlq", "nosuchqueue"}, "queue_not_found"},
		{[]string{"dlq", "nosuchqueue", "--json"}, "queue_not_found"},
		{[]string{"dlq", "nosuchqueue", "--purge", "--force"}, "queue_not_found"},
		{[]string{"queue", "nosuchqueue"}, "queue_not_found"},
	} {
		if code, out, errs := run(c.args...); code != exitFailure || !strings.Contains(errs, c.want) || out != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1 and %q", c.args, code, out, errs, c.want)
		}
	}
	if code, out, _ := run("dlq", "orders"); code != exitOK || !strings.Contains(out, "0 dead letters in orders") {
		t.Errorf("dlq of a queue without dead letters: %d %q", code, out)
	}
	qs := queueList(t, bin, addr)
	if len(qs) != 1 || len(qs["orders"]) != 0 {
		t.Fatalf("after the typos: queues %v, want orders alone, with no group", qs)
	}
	if code, out, _ := run("groups", "--json"); code != exitOK || strings.TrimSpace(out) != "[]" {
		t.Fatalf("after the typos: groups %d %s", code, out)
	}
	// A waiting pop is served by the push that creates its queue.
	type answer struct {
		code      int
		out, errs string
	}
	ch := make(chan answer, 1)
	go func() {
		code, out, errs := runBin(t, bin, "", "pop", "later", "--wait", "--wait-time", "20s", "--json", "--addr", addr)
		ch <- answer{code, out, errs}
	}()
	deadline := time.Now().Add(20 * time.Second)
	var a answer
	for got := false; !got; {
		if time.Now().After(deadline) {
			t.Fatal("the waiting pop was not served by the push that created its queue")
		}
		run("push", "later", "hello") // until the pop (a process starting) has parked and takes one
		select {
		case a = <-ch:
			got = true
		case <-time.After(200 * time.Millisecond):
		}
	}
	if a.code != exitOK || !strings.Contains(a.out, `"payload": "hello"`) {
		t.Fatalf("waiting pop: %d %s %s", a.code, a.out, a.errs)
	}
}

// TestInternalNamesHidden: the queue-mode group shows as "(queue mode)",
// never by its internal name, in queues, queue, groups and dlq, in text
// and JSON; Regent's own queues are not listed; pop --help explains queue
// mode.
func TestInternalNamesHidden(t *testing.T) {
	_, bin := buildRegent(t)
	addr := testBroker(t)
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return runBin(t, bin, "", append(args, "--addr", addr)...)
	}
	run("push", "orders", "a")
	run("push", "orders", "b")
	if code, out, errs := run("pop", "orders", "--ack", "dlq", "--error", "bad"); code != exitOK {
		t.Fatalf("pop --ack dlq: %d %s %s", code, out, errs)
	}
	run("pop", "orders", "--group", "audit")
	run("push", "__regent_traces", "internal")
	for _, args := range [][]string{
		{"queues"}, {"queues", "--json"},
		{"queue", "orders"}, {"queue", "orders", "--json"},
		{"groups"}, {"groups", "--json"},
		{"dlq", "orders"}, {"dlq", "orders", "--json"},
	} {
		code, out, errs := run(args...)
		if code != exitOK || strings.Contains(out+errs, "__QUEUE_MODE__") || !strings.Contains(out, "(queue mode)") {
			t.Errorf("%q: exit %d, want (queue mode) and not the internal name:\n%s%s", args, code, out, errs)
		}
		if args[0] != "queue" && args[0] != "dlq" && strings.Contains(out, "__regent_") {
			t.Errorf("%q lists an internal queue:\n%s", args, out)
		}
	}
	qs := queueList(t, bin, addr)
	if g := qs["orders"]; len(qs) != 1 || len(g) != 2 || g[0] != "(queue mode)" || g[1] != "audit" {
		t.Errorf("queues --json: %v", qs)
	}
	code, out, _ := run("pop", "--help")
	if code != exitOK || !strings.Contains(out, "queue mode") || !strings.Contains(out, `"(queue mode)"`) ||
		!strings.Contains(out, "--partitions") || !strings.Contains(out, "creates no queue") {
		t.Errorf("pop --help does not explain queue mode, --partitions and waiting:\n%s", out)
	}
}

// TestPopFillsFromSeveralPartitions: a pop without --partition fills its
// batch from several partitions (each partition's messages in order, one
// lease per partition and group), and says on stderr what is left waiting.
func TestPopFillsFromSeveralPartitions(t *testing.T) {
	_, bin := buildRegent(t)
	addr := testBroker(t)
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return runBin(t, bin, "", append(args, "--addr", addr)...)
	}
	for _, p := range []string{"a", "b", "c"} {
		if code, out, errs := runBin(t, bin, p+"1\n"+p+"2\n"+p+"3\n", "push", "multi", "-", "--partition", p, "--addr", addr); code != exitOK {
			t.Fatalf("push: %d %s %s", code, out, errs)
		}
	}
	pop := func(args ...string) ([]messageJSON, string) {
		t.Helper()
		code, out, errs := run(append([]string{"pop", "multi", "--json"}, args...)...)
		var ms []messageJSON
		if code != exitOK || json.Unmarshal([]byte(out), &ms) != nil {
			t.Fatalf("pop %q: %d %s %s", args, code, out, errs)
		}
		last := map[string]int{}
		for _, m := range ms {
			if prev, ok := last[m.Partition]; ok && int(m.Offset) != prev+1 {
				t.Fatalf("pop %q: partition %s out of order: %+v", args, m.Partition, ms)
			}
			if want := m.Partition + string(rune('1'+m.Offset)); m.Payload != want {
				t.Fatalf("pop %q: payload %q at %s@%d, want %q", args, m.Payload, m.Partition, m.Offset, want)
			}
			last[m.Partition] = int(m.Offset)
		}
		return ms, errs
	}
	parts := func(ms []messageJSON) map[string]int {
		n := map[string]int{}
		for _, m := range ms {
			n[m.Partition]++
		}
		return n
	}
	// Queue mode: 5 messages from two partitions, under one lease each.
	ms, errs := pop("--batch", "5")
	if len(ms) != 5 || len(parts(ms)) != 2 {
		t.Fatalf("--batch 5: %d messages from %v, want 5 from 2 partitions", len(ms), parts(ms))
	}
	if !strings.Contains(errs, "more wait for (queue mode): 3 messages in 1 partition (pop again); 1 message in 1 partition under a lease") {
		t.Errorf("--batch 5 left 3 free and 1 behind its lease; stderr %q", errs)
	}
	// The two leased partitions are not served again to queue mode.
	ms, errs = pop("--batch", "10")
	if len(ms) != 3 || len(parts(ms)) != 1 {
		t.Fatalf("second pop: %d messages from %v, want the 3 of the partition nobody held", len(ms), parts(ms))
	}
	// a's 3 and b's 2 are in flight under the first pop's lease, b's third
	// waits behind it; c is this pop's.
	if !strings.Contains(errs, "6 messages in 2 partitions under a lease") || strings.Contains(errs, "pop again") {
		t.Errorf("second pop: stderr %q", errs)
	}
	// --partitions caps the partitions of one pop.
	ms, errs = pop("--group", "g1", "--batch", "9", "--partitions", "1")
	if len(ms) != 3 || len(parts(ms)) != 1 {
		t.Fatalf("--partitions 1: %d messages from %v", len(ms), parts(ms))
	}
	if !strings.Contains(errs, "more wait for g1: 6 messages in 2 partitions (pop again)") {
		t.Errorf("--partitions 1: stderr %q", errs)
	}
	// Acked, nothing waits: nothing said.
	ms, errs = pop("--group", "g2", "--batch", "9", "--ack", "completed")
	if len(ms) != 9 || len(parts(ms)) != 3 || strings.Contains(errs, "more wait") {
		t.Fatalf("--batch 9 --ack: %d messages from %v, stderr %q", len(ms), parts(ms), errs)
	}
	if code, _, errs := run("pop", "multi", "--partitions", "-1"); code != exitUsage || !strings.Contains(errs, "--partitions") {
		t.Errorf("--partitions -1: %d %q", code, errs)
	}
}
