package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/engine"
)

// peeked is peek --json's output.
type peeked struct {
	Messages []struct {
		TransactionID string `json:"transactionId"`
		Partition     string `json:"partition"`
		Offset        uint64 `json:"offset"`
		CreatedAt     string `json:"createdAt"`
		Size          int    `json:"size"`
		Payload       string `json:"payload"`
		Cut           bool   `json:"cut"`
	} `json:"messages"`
	Gaps []struct{ Reason string } `json:"gaps"`
	More bool                      `json:"more"`
}

func (p peeked) payloads() string {
	var s []string
	for _, m := range p.Messages {
		s = append(s, m.Payload)
	}
	return strings.Join(s, ",")
}

// TestPeekCommand drives the built binary against a broker: peek shows the
// same messages twice and leases none (a pop afterwards gets them all);
// --last, --from beyond the end (nothing, exit 0), --limit across replies
// of 1 MiB messages (whole in --json, their start in text), what does not
// exist (exit 1, in words) and usage mistakes (exit 2).
func TestPeekCommand(t *testing.T) {
	_, bin := buildRegent(t)
	addr := testBroker(t)
	run := func(stdin string, args ...string) (int, string, string) {
		t.Helper()
		return runBin(t, bin, stdin, append(args, "--addr", addr)...)
	}
	peekJSON := func(args ...string) peeked {
		t.Helper()
		code, out, errs := run("", append([]string{"peek", "--json"}, args...)...)
		var p peeked
		if code != exitOK || json.Unmarshal([]byte(out), &p) != nil {
			t.Fatalf("peek %v: exit %d, %q %q", args, code, out, errs)
		}
		return p
	}
	if code, _, errs := run("m0\nm1\nm2\nm3\nm4\n", "push", "pq", "-"); code != exitOK {
		t.Fatalf("push: %d %s", code, errs)
	}

	first := peekJSON("pq")
	if first.payloads() != "m0,m1,m2,m3,m4" || first.More || first.Messages[4].Offset != 4 || first.Messages[0].Partition != "Default" ||
		first.Messages[0].Size != 2 || first.Messages[0].TransactionID == "" || first.Messages[0].CreatedAt == "-" {
		t.Fatalf("peek: %+v", first)
	}
	if again := peekJSON("pq"); again.payloads() != first.payloads() || again.Messages[0].TransactionID != first.Messages[0].TransactionID {
		t.Errorf("a second peek: %+v", again)
	}
	code, out, _ := run("", "peek", "pq")
	if code != exitOK || !strings.HasPrefix(out, "PARTITION") || !strings.Contains(out, "Default") || !strings.Contains(out, "m4") ||
		!strings.Contains(out, first.Messages[2].TransactionID) {
		t.Errorf("peek in text: %d\n%s", code, out)
	}
	if p := peekJSON("pq", "--last", "2"); p.payloads() != "m3,m4" {
		t.Errorf("--last 2: %s", p.payloads())
	}
	if p := peekJSON("pq", "--from", "1", "--limit", "2", "--partition", "Default"); p.payloads() != "m1,m2" || !p.More {
		t.Errorf("--from 1 --limit 2: %s, more %v", p.payloads(), p.More)
	}
	if code, _, errs := run("", "peek", "pq", "--limit", "2"); code != exitOK || !strings.Contains(errs, "showing 2 messages; more follow") {
		t.Errorf("--limit 2 in text: %d %q", code, errs)
	}
	if p := peekJSON("pq", "--from", "99"); len(p.Messages) != 0 || p.More {
		t.Errorf("--from 99: %+v", p)
	}
	if code, out, _ := run("", "peek", "pq", "--from", "99"); code != exitOK || out != "(no message)\n" {
		t.Errorf("--from 99 in text: %d %q", code, out)
	}
	// Nothing was leased: a pop gets all five.
	code, out, _ = run("", "pop", "pq", "--batch", "10", "--json")
	var popped []struct{ Payload string }
	if code != exitOK || json.Unmarshal([]byte(out), &popped) != nil || len(popped) != 5 || popped[0].Payload != "m0" {
		t.Fatalf("pop after peeking: %d %s", code, out)
	}

	// 18 messages of 1 MiB: more than one reply holds.
	line := strings.Repeat("z", 1<<20) + "\n"
	for i := 0; i < 2; i++ {
		if code, _, errs := run(strings.Repeat(line, 9), "push", "fat", "-"); code != exitOK {
			t.Fatalf("push of 1 MiB messages: %d %s", code, errs)
		}
	}
	p := peekJSON("fat", "--limit", "100")
	if len(p.Messages) != 18 || p.More {
		t.Fatalf("1 MiB messages: %d shown, more %v", len(p.Messages), p.More)
	}
	for _, m := range p.Messages {
		if len(m.Payload) != 1<<20 || m.Size != 1<<20 || m.Cut {
			t.Fatalf("offset %d: %d of %d bytes", m.Offset, len(m.Payload), m.Size)
		}
	}
	code, out, _ = run("", "peek", "fat", "--last", "3")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != exitOK || len(lines) != 4 || len(lines[3]) > 400 ||
		!strings.Contains(lines[3], "… (1048576 bytes)") || !strings.Contains(lines[1], " 15 ") || !strings.Contains(lines[3], " 17 ") {
		t.Errorf("1 MiB messages in text: %d, %d bytes\n%.600s", code, len(out), out)
	}

	// What does not exist: exit 1, in words.
	if code, _, errs := run("", "peek", "nope"); code != exitFailure || !strings.Contains(errs, "no queue nope") {
		t.Errorf("peek nope: %d %q", code, errs)
	}
	if code, _, errs := run("", "peek", "pq", "--partition", "nope"); code != exitFailure || !strings.Contains(errs, "no partition nope in queue pq") {
		t.Errorf("peek pq --partition nope: %d %q", code, errs)
	}
	if code, out, _ := run("", "--json", "queues"); code != exitOK || strings.Contains(out, "nope") {
		t.Errorf("peek created a queue: %s", out)
	}
	// Usage mistakes: exit 2.
	for _, args := range [][]string{
		{"peek", "pq", "--from", "1", "--last", "2"},
		{"peek", "pq", "--last", "0"},
		{"peek", "pq", "--limit", "0"},
		{"peek", "pq", "--from", "-1"},
		{"peek"},
	} {
		if code, out, _ := run("", args...); code != exitUsage || out != "" {
			t.Errorf("%v: exit %d, %q", args, code, out)
		}
	}
}

// TestPeekShowsGaps: offsets deleted one by one show in their place, in
// text and in --json.
func TestPeekShowsGaps(t *testing.T) {
	b := brokertest.Start(t, broker.Options{Engine: engine.Config{SnapshotEveryBytes: -1}})
	addr := b.TCPAddr().String()
	if code, _, errs := cli(t, addr, "g0\ng1\ng2\ng3\n", "push", "gq", "-"); code != exitOK {
		t.Fatalf("push: %s", errs)
	}
	pg, err := b.Engine().Browse(engine.BrowseRequest{Queue: "gq"})
	if err != nil || len(pg.Messages) != 4 {
		t.Fatalf("browse: %v", err)
	}
	for _, m := range pg.Messages[1:3] {
		if ok, err := b.Engine().DeleteMessage(context.Background(), m.PartitionID, m.TransactionID); !ok || err != nil {
			t.Fatalf("delete: %v %v", ok, err)
		}
	}
	code, out, _ := cli(t, addr, "", "peek", "gq")
	if want := regexp.MustCompile(`(?m)^Default +0 .* g0\nDefault +1-2 +\(deleted\)\nDefault +3 .* g3\n$`); code != exitOK || !want.MatchString(out) {
		t.Errorf("text: %d\n%s", code, out)
	}
	code, out, _ = cli(t, addr, "", "peek", "gq", "--json")
	var p struct {
		Gaps []struct {
			Partition   string
			First, Last uint64
			Reason      string
		}
	}
	if code != exitOK || json.Unmarshal([]byte(out), &p) != nil || len(p.Gaps) != 1 || p.Gaps[0].First != 1 || p.Gaps[0].Last != 2 ||
		p.Gaps[0].Reason != "deleted" || p.Gaps[0].Partition != "Default" {
		t.Errorf("json: %d %s", code, out)
	}
}
