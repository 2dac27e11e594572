package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/regentmq/regent/client"
)

// TestDLQByEntry drives the built binary: dlq lists each entry's id, and
// --redrive and --purge act on the ids given only; ids not in the
// dead-letter queue are named (exit 1); a malformed one is a usage mistake.
func TestDLQByEntry(t *testing.T) {
	_, bin := buildRegent(t)
	addr := testBroker(t)
	run := func(wantCode int, args ...string) (string, string) {
		t.Helper()
		code, out, errs := runBin(t, bin, "", append(args, "--addr", addr)...)
		if code != wantCode {
			t.Fatalf("%v: exit %d (want %d)\nstdout: %s\nstderr: %s", args, code, wantCode, out, errs)
		}
		return out, errs
	}
	for i := 0; i < 4; i++ {
		run(exitOK, "push", "orders", fmt.Sprintf("order %d", i), "--partition", fmt.Sprintf("p%d", i%2))
	}
	run(exitOK, "pop", "orders", "--partition", "p0", "--batch", "2", "--ack", "dlq", "--error", "bad p0")
	run(exitOK, "pop", "orders", "--partition", "p1", "--batch", "2", "--ack", "dlq", "--error", "bad p1")

	// The text lists the ids --json gives.
	out, _ := run(exitOK, "dlq", "orders", "--json")
	var dl struct {
		Total   int `json:"total"`
		Entries []struct {
			EntryID string      `json:"entryId"`
			Message messageJSON `json:"message"`
		} `json:"entries"`
	}
	if json.Unmarshal([]byte(out), &dl) != nil || dl.Total != 4 {
		t.Fatalf("dlq --json: %s", out)
	}
	text, _ := run(exitOK, "dlq", "orders")
	if !strings.Contains(text, "ENTRY") {
		t.Fatalf("dlq lists no ENTRY column:\n%s", text)
	}
	ids := map[string]string{} // entry id: payload
	for _, e := range dl.Entries {
		ids[e.EntryID] = e.Message.Payload
		if !regexp.MustCompile(`(?m)^` + e.EntryID + ` .* ` + e.Message.Payload + `$`).MatchString(text) {
			t.Errorf("dlq does not list entry %s (%s) on its line:\n%s", e.EntryID, e.Message.Payload, text)
		}
	}
	e0, e1, e2 := dl.Entries[0].EntryID, dl.Entries[1].EntryID, dl.Entries[2].EntryID

	// Redrive one (given twice): that one goes back, the others stay.
	out, _ = run(exitOK, "dlq", "orders", "--redrive", e1, e1)
	if !strings.HasPrefix(out, "redriven 1 entry\n  "+e1+" -> orders/") {
		t.Fatalf("dlq --redrive ID: %q", out)
	}
	c, err := client.Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	left := func() map[string]bool {
		t.Helper()
		es, _, err := c.DLQ(context.Background(), client.DLQFilter{Queue: "orders", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, e := range es {
			m[e.ID.String()] = true
		}
		return m
	}
	if l := left(); len(l) != 3 || l[e1] {
		t.Fatalf("after redriving %s: %v", e1, l)
	}
	msgs, err := c.Queue("orders").Group("check").Batch(10).Partitions(2).AutoAck(true).Pop(context.Background())
	redriven := 0
	for _, m := range msgs {
		if string(m.Payload) == ids[e1] && m.Offset >= 2 {
			redriven++
		}
	}
	if err != nil || redriven != 1 {
		t.Fatalf("the redriven entry is not at the end of its partition once: %d (%v)", redriven, err)
	}
	// Purge one, and one that is gone: the one purged, exit 1 for the other.
	out, errs := run(exitFailure, "dlq", "orders", "--purge", e0, e1, "--force")
	if out != "purged 1 entry\n" || !strings.Contains(errs, "1 of the 2 ENTRY ids given were not in the dead-letter queue of orders") {
		t.Fatalf("dlq --purge ID ID: %q %q", out, errs)
	}
	if l := left(); len(l) != 2 || l[e0] || !l[e2] {
		t.Fatalf("after purging %s: %v", e0, l)
	}
	// Redrive of an id that is gone, and of one another --partition hides:
	// named, exit 1; the others done.
	_, errs = run(exitFailure, "dlq", "orders", "--redrive", e0, "--partition", "nowhere")
	if !strings.Contains(errs, "not in the dead-letter queue of orders (partition nowhere): "+e0) {
		t.Fatalf("redrive of an entry not there: %q", errs)
	}
	// Usage mistakes.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"dlq", "orders", e2}, "ENTRY ids go with --redrive or --purge"},
		{[]string{"dlq", "orders", "--redrive", "not-an-id"}, `ENTRY "not-an-id" is not an entry id`},
		{[]string{"dlq", "orders", "--redrive", "--purge", e2}, "exclude each other"},
		{[]string{"dlq", "", "--redrive"}, "QUEUE is empty"},
	} {
		code, out, errs := runBin(t, bin, "", append(c.args, "--addr", addr)...)
		if code != exitUsage || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, %q %q; want 2 and %q", c.args, code, out, errs, c.want)
		}
	}
	if l := left(); len(l) != 2 {
		t.Fatalf("usage mistakes changed the dead-letter queue: %v", l)
	}
}
