package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/engine"
)

// drain pops queue's messages (autoAck) until it is empty and returns
// their payloads in the order delivered (one partition: pushed order).
func drain(t *testing.T, addr, queue string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []string
	for {
		msgs, err := c.Pop(ctx, client.PopRequest{Queue: queue, Batch: 1000, AutoAck: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			return out
		}
		for _, m := range msgs {
			out = append(out, string(m.Payload))
		}
	}
}

// line is a payload of n bytes that says which line it is.
func line(i, n int) string {
	head := fmt.Sprintf("line-%d-", i)
	return head + strings.Repeat("x", n-len(head))
}

// TestPushStdin: `push -` reads lines of any length up to the largest
// message, in requests that fit the broker's frame, in order; a line too
// long stops it naming the line and the limit, after the lines before it
// are pushed; --txn with several lines pushes nothing.
func TestPushStdin(t *testing.T) {
	addr := testBroker(t)

	code, out, errs := cli(t, addr, "a\n\nb\r\nc", "push", "short", "-")
	if code != exitOK || strings.Count(out, "queued") != 3 {
		t.Fatalf("three lines, one blank, one with \\r\\n, the last with no newline: exit %d\n%s%s", code, out, errs)
	}
	if got := drain(t, addr, "short"); strings.Join(got, ",") != "a,b,c" {
		t.Fatalf("popped %q, want a, b, c", got)
	}

	// 40 lines of 1 MiB: 40 MiB, more than two frames, in several requests.
	var in strings.Builder
	for i := range 40 {
		in.WriteString(line(i, 1<<20) + "\n")
	}
	code, out, errs = cli(t, addr, in.String(), "push", "big", "-", "--json")
	var res []pushResultJSON
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || len(res) != 40 {
		t.Fatalf("40 lines of 1 MiB: exit %d, %d results\n%.500s%s", code, len(res), out, errs)
	}
	for i, r := range res {
		if r.Status != "queued" || r.Offset != uint64(i) {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	got := drain(t, addr, "big")
	if len(got) != 40 {
		t.Fatalf("popped %d of 40", len(got))
	}
	for i, p := range got {
		if p != line(i, 1<<20) {
			t.Fatalf("message %d is not line %d (%.20s...)", i, i, p)
		}
	}

	// A line longer than the largest message after two short ones.
	long := strings.Repeat("L", maxLine+1)
	code, out, errs = cli(t, addr, "one\ntwo\n"+long+"\nfour\n", "push", "long", "-")
	if code != exitFailure || !strings.Contains(errs, "line 3 of stdin") || !strings.Contains(errs, fmt.Sprint(maxLine)) {
		t.Fatalf("a line over the largest message: exit %d, want 1 naming line 3 and %d\n%s%s", code, maxLine, out, errs)
	}
	if got := drain(t, addr, "long"); strings.Join(got, ",") != "one,two" {
		t.Fatalf("popped %q, want the two lines before the long one", got)
	}
	// The largest message itself goes, alone in its request.
	exact := strings.Repeat("E", maxLine)
	if code, out, errs := cli(t, addr, exact+"\r\n", "push", "exact", "-"); code != exitOK {
		t.Fatalf("a line of the largest message: exit %d\n%s%s", code, out, errs)
	}
	if got := drain(t, addr, "exact"); len(got) != 1 || got[0] != exact {
		t.Fatalf("the largest message came back as %d messages", len(got))
	}

	code, out, errs = cli(t, addr, "x\ny\n", "push", "txn", "-", "--txn", "t1")
	if code != exitUsage || !strings.Contains(errs, "--txn") {
		t.Fatalf("--txn with two lines: exit %d, want 2\n%s%s", code, out, errs)
	}
	if got := drain(t, addr, "txn"); len(got) != 0 {
		t.Fatalf("--txn with two lines pushed %d", len(got))
	}
}

// TestPushStdinSmallFrame: against a broker with a 64 KiB frame, a
// hundred lines of 10 KiB (a megabyte: the first request would be 16
// frames) go in smaller requests, in order; a line larger than the frame
// is answered failed, naming it and the limit, and the others still go.
func TestPushStdinSmallFrame(t *testing.T) {
	b := brokertest.Start(t, broker.Options{Engine: engine.Config{SnapshotEveryBytes: -1}, MaxFrameBytes: 64 << 10})
	addr := b.TCPAddr().String()
	var in bytes.Buffer
	for i := range 100 {
		if i == 50 {
			in.WriteString(strings.Repeat("F", 100<<10) + "\n")
		}
		in.WriteString(line(i, 10<<10) + "\n")
	}
	code, out, errs := cli(t, addr, in.String(), "push", "small", "-")
	if code != exitFailure || strings.Count(out, "queued") != 100 || !strings.Contains(out, "line 51:") || !strings.Contains(out, "frame limit of 65536") {
		t.Fatalf("exit %d, want 1 with 100 queued and line 51 failed naming the frame limit\n%.3000s%s", code, out, errs)
	}
	got := drain(t, addr, "small")
	if len(got) != 100 {
		t.Fatalf("popped %d of 100", len(got))
	}
	for i, p := range got {
		if p != line(i, 10<<10) {
			t.Fatalf("message %d is not line %d (%.20s...)", i, i, p)
		}
	}
}
