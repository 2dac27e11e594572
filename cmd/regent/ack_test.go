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

// groupOn returns group's cursor on queue's partition (queue info).
func groupOn(t *testing.T, c *client.Client, queue, partition, group string) client.GroupCursor {
	t.Helper()
	qi, err := c.QueueInfo(context.Background(), queue)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range qi.Partitions {
		for _, g := range p.Groups {
			if p.Name == partition && g.Group == group {
				return g
			}
		}
	}
	t.Fatalf("no group %s on %s/%s", group, queue, partition)
	return client.GroupCursor{}
}

// TestAckFromTheCommandLine drives the built binary: pop without --ack
// prints each message's transactionId and lease and the command that
// answers them; ack answers by lease (every message of it) or by
// transactionId (one), with one line per outcome, and exits 1 with the
// reason for an id it cannot answer.
func TestAckFromTheCommandLine(t *testing.T) {
	_, bin := buildRegent(t)
	addr := testBroker(t)
	c, err := client.Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	run := func(wantCode int, args ...string) (string, string) {
		t.Helper()
		code, out, errs := runBin(t, bin, "", append(args, "--addr", addr)...)
		if code != wantCode {
			t.Fatalf("%v: exit %d (want %d)\nstdout: %s\nstderr: %s", args, code, wantCode, out, errs)
		}
		return out, errs
	}
	run(exitOK, "configure", "orders", "--retry-limit", "1", "--retry-delay", "0s")
	for i := 0; i < 3; i++ {
		run(exitOK, "push", "orders", fmt.Sprintf("order %d", i), "--partition", "eu", "--txn", fmt.Sprintf("t-%d", i))
	}
	out, _ := run(exitOK, "push", "orders", "no txn", "--partition", "us", "--json")
	var pushed []pushResultJSON
	if json.Unmarshal([]byte(out), &pushed) != nil || len(pushed) != 1 {
		t.Fatalf("push --json: %s", out)
	}

	// pop prints the ids to copy, and the commands that answer them.
	out, _ = run(exitOK, "pop", "orders", "--partition", "eu", "--batch", "3", "--group", "billing")
	lease := groupOn(t, c, "orders", "eu", "billing").LeaseID.String()
	for i := 0; i < 3; i++ {
		if !strings.Contains(out, fmt.Sprintf("txn t-%d", i)) {
			t.Errorf("pop does not print transactionId t-%d:\n%s", i, out)
		}
	}
	if strings.Count(out, "lease "+lease) != 3 || !strings.Contains(out, "regent ack orders "+lease+" --status completed") ||
		!strings.Contains(out, "regent ack orders TXN --group billing --status completed") {
		t.Fatalf("pop does not print the lease %s and how to answer it:\n%s", lease, out)
	}

	// One message by its transactionId: the cursor stays (offset 0 is not
	// answered yet).
	out, _ = run(exitOK, "ack", "orders", "t-1", "--group", "billing", "--status", "completed")
	if strings.TrimSpace(out) != "completed orders/eu @1  txn t-1  (group billing)" {
		t.Fatalf("ack t-1: %q", out)
	}
	if g := groupOn(t, c, "orders", "eu", "billing"); g.Cursor != 0 || !g.Leased {
		t.Fatalf("after t-1: cursor %d, leased %v", g.Cursor, g.Leased)
	}
	// The whole lease: offsets 0 and 2, and 1 again (a repeat answers as
	// before); the lease ends, the cursor passes all three.
	out, _ = run(exitOK, "ack", "orders", lease, "--status", "completed")
	for _, want := range []string{"completed orders/eu @0  (group billing)\n", "completed orders/eu @1  (group billing)\n", "completed orders/eu @2  (group billing; lease ended)\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("ack LEASE printed %q; want the line %q", out, want)
		}
	}
	if strings.Count(out, "\n") != 3 {
		t.Errorf("ack LEASE: %d lines for 3 messages:\n%s", strings.Count(out, "\n"), out)
	}
	if g := groupOn(t, c, "orders", "eu", "billing"); g.Cursor != 3 || g.Leased {
		t.Fatalf("after the lease: cursor %d, leased %v", g.Cursor, g.Leased)
	}
	// Once it has ended, the lease is refused, with the reason; so is an id
	// nobody holds; exit 1, after answering what it can.
	out, _ = run(exitFailure, "ack", "orders", lease, "--status", "completed")
	if !strings.HasPrefix(out, "refused   "+lease+": not a live lease of orders") {
		t.Fatalf("ack of an ended lease: %q", out)
	}
	run(exitOK, "pop", "orders", "--partition", "us") // queue mode: leased
	out, _ = run(exitFailure, "ack", "orders", "no-such-txn", pushed[0].MessageID, "--status", "dlq", "--error", "bad data")
	if out != "refused   no-such-txn: no live lease of queue mode on any partition of orders holds it\n"+
		"dlq       orders/us @0  txn "+pushed[0].MessageID+"  (dead-lettered; lease ended)\n" {
		t.Fatalf("ack of an unknown txn and of a message pushed without one (by its id): %q", out)
	}
	out, _ = run(exitOK, "dlq", "orders", "--json")
	if !strings.Contains(out, `"error": "bad data"`) || !strings.Contains(out, `"total": 1`) {
		t.Fatalf("the dlq ack did not file its message with its error: %s", out)
	}

	// failed on a lease of three: the first spends a retry and releases the
	// lease, the others come back (not refusals); all three are delivered
	// again.
	for i := 3; i < 6; i++ {
		run(exitOK, "push", "orders", fmt.Sprintf("order %d", i), "--partition", "eu", "--txn", fmt.Sprintf("t-%d", i))
	}
	run(exitOK, "pop", "orders", "--partition", "eu", "--batch", "3", "--group", "billing")
	lease = groupOn(t, c, "orders", "eu", "billing").LeaseID.String()
	out, _ = run(exitOK, "ack", "orders", lease, "--status", "failed", "--error", "try later", "--json")
	var res []ackOutcome
	if json.Unmarshal([]byte(out), &res) != nil || len(res) != 1 || res[0].Outcome != "failed" || *res[0].Offset != 3 || !res[0].LeaseReleased ||
		res[0].Kind != "lease" || res[0].Group != "billing" || res[0].LeaseID != lease {
		t.Fatalf("ack LEASE --status failed --json: %s", out)
	}
	out, _ = run(exitOK, "pop", "orders", "--partition", "eu", "--batch", "3", "--group", "billing", "--json")
	var again []messageJSON
	if json.Unmarshal([]byte(out), &again) != nil || len(again) != 3 || again[0].RetryCount != 1 || again[1].RetryCount != 0 {
		t.Fatalf("after failed, the lease's messages come back (the first with a retry spent): %s", out)
	}
	// failed again: the retry limit (1) is spent, so it is dead-lettered.
	out, _ = run(exitOK, "ack", "orders", "t-3", "--group", "billing", "--status", "failed")
	if !strings.Contains(out, "failed    orders/eu @3  txn t-3  (group billing; dead-lettered; lease released") {
		t.Fatalf("failed with the retries spent: %q", out)
	}
	// t-4 was in that lease, now released: refused, saying so.
	out, _ = run(exitFailure, "ack", "orders", "t-4", "--group", "billing", "--status", "completed")
	if !strings.Contains(out, "refused   t-4: no live lease of group billing") {
		t.Fatalf("ack in a released lease: %q", out)
	}

	// Usage mistakes: exit 2, nothing on stdout.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ack", "orders", "t-1"}, "give --status"},
		{[]string{"ack", "orders", "t-1", "--status", "maybe"}, "--status \"maybe\": want completed"},
		{[]string{"ack", "orders", "t-1", "--status", "completed", "--error", "x"}, "--error goes with"},
		{[]string{"ack", "orders", "", "--status", "completed"}, "an empty LEASE or TXN"},
		{[]string{"ack", "orders", "--status", "completed"}, "wrong number of arguments"},
		{[]string{"ack", "", "t-1", "--status", "completed"}, "QUEUE is empty"},
		{[]string{"ack", "orders", "t-1", "--status", "completed", "--group", ""}, "--group is empty"},
	} {
		code, out, errs := runBin(t, bin, "", append(c.args, "--addr", addr)...)
		if code != exitUsage || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, %q %q; want 2 and %q", c.args, code, out, errs, c.want)
		}
	}
	// Failures: exit 1.
	if code, _, errs := runBin(t, bin, "", "ack", "nosuchqueue", "t-1", "--status", "completed", "--addr", addr); code != exitFailure || !strings.Contains(errs, "queue_not_found") {
		t.Errorf("ack on no queue: %d %q", code, errs)
	}
	if code, _, errs := runBin(t, bin, "", "ack", "orders", "t-1", "--status", "completed", "--partition", "mars", "--addr", addr); code != exitFailure || !strings.Contains(errs, `no partition "mars"`) {
		t.Errorf("ack on no partition: %d %q", code, errs)
	}
	if code, _, errs := runBin(t, bin, "", "ack", "orders", "t-1", "--status", "completed", "--addr", "127.0.0.1:1", "--timeout", "300ms"); code != exitFailure || !strings.Contains(errs, "dial") {
		t.Errorf("ack with no broker: %d %q", code, errs)
	}
}

// TestAckFiftyLeasesAtOnce: fifty leases and 25 transactionIds in one
// ack, answered in one run; then a lease that spans 25 partitions (one pop)
// whole; the dead letters carry the error text; the same fifty leases
// again are fifty refusals.
func TestAckFiftyLeasesAtOnce(t *testing.T) {
	_, bin := buildRegent(t)
	addr := testBroker(t)
	c, err := client.Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	var items []client.Item
	for i := 0; i < 75; i++ {
		for k := 0; k < 2; k++ {
			items = append(items, client.Item{Queue: "jobs", Partition: fmt.Sprintf("p%02d", i), TransactionID: fmt.Sprintf("job-%d-%d", i, k), Payload: []byte("x")})
		}
	}
	if res, err := c.Push(ctx, items...); err != nil || res.FirstErr() != nil {
		t.Fatal(err, res.FirstErr())
	}
	var leases []string // fifty pops, a partition each
	for i := 0; i < 50; i++ {
		msgs, err := c.Queue("jobs").Batch(2).Pop(ctx)
		if err != nil || len(msgs) != 2 {
			t.Fatalf("pop %d: %d %v", i, len(msgs), err)
		}
		leases = append(leases, msgs[0].LeaseID.String())
	}
	msgs, err := c.Queue("jobs").Batch(50).Partitions(25).Pop(ctx) // one lease on the 25 others
	if err != nil || len(msgs) != 50 {
		t.Fatalf("pop of 25 partitions: %d %v", len(msgs), err)
	}
	wide := msgs[0].LeaseID.String()
	var txns []string // the first message of each of them
	for _, m := range msgs {
		if m.LeaseID.String() != wide {
			t.Fatalf("one pop, two leases: %s %s", wide, m.LeaseID)
		}
		if strings.HasSuffix(m.TransactionID, "-0") {
			txns = append(txns, m.TransactionID)
		}
	}
	code, out, errs := runBin(t, bin, "", append(append([]string{"ack", "jobs", "--status", "dlq", "--error", "bad job", "--addr", addr, "--json"}, leases...), txns...)...)
	var res []ackOutcome
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || len(res) != 125 {
		t.Fatalf("ack of 50 leases and 25 transactionIds: exit %d, %d outcomes: %.2000s %s", code, len(res), out, errs)
	}
	for i, r := range res {
		if r.Outcome != "dlq" || !r.DeadLettered || (i < 100) != (r.Kind == "lease") || (i < 100 && r.ID != leases[i/2]) || (i >= 100 && r.ID != txns[i-100]) {
			t.Fatalf("outcome %d: %+v", i, r)
		}
	}
	// The wide lease whole: what is left of it on each of its partitions.
	code, out, errs = runBin(t, bin, "", "ack", "jobs", wide, "--status", "dlq", "--error", "bad job", "--addr", addr)
	if code != exitOK || strings.Count(out, "dlq       jobs/p") != 25 || strings.Count(out, "@1  (dead-lettered; lease ended)\n") != 25 {
		t.Fatalf("ack of a lease over 25 partitions: exit %d\n%s%s", code, out, errs)
	}
	if code, out, _ := runBin(t, bin, "", "dlq", "jobs", "--json", "--limit", "1000", "--addr", addr); code != exitOK || !strings.Contains(out, `"total": 150`) ||
		strings.Count(out, `"error": "bad job"`) != 150 {
		t.Fatalf("dlq after: %d %.2000s", code, out)
	}
	// The same fifty leases again: every one refused (they ended), exit 1,
	// one line each.
	code, out, _ = runBin(t, bin, "", append([]string{"ack", "jobs", "--status", "completed", "--addr", addr}, leases...)...)
	if code != exitFailure || len(regexp.MustCompile(`(?m)^refused   [0-9a-f-]{36}: not a live lease of jobs`).FindAllString(out, -1)) != 50 {
		t.Fatalf("the ended leases again: exit %d\n%s", code, out)
	}
}
