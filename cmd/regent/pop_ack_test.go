package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
)

// TestPopBatchAckFailed: a batch pop --ack failed answers the first message
// failed, which releases the lease; the broker refuses the acks after it
// for the rest of the lease (SEMANTICS.md), and those messages come back
// after the failed one, in order. That is the documented outcome: the CLI
// says so in one line and exits 0, and the next pop gets all four back in
// order with only the first one's retry spent.
func TestPopBatchAckFailed(t *testing.T) {
	_, bin := buildRegent(t)
	addr := testBroker(t)
	run := func(wantCode int, args ...string) string {
		t.Helper()
		code, out, errs := runBin(t, bin, "", append(args, "--addr", addr)...)
		if code != wantCode {
			t.Fatalf("%v: exit %d (want %d)\nstdout: %s\nstderr: %s", args, code, wantCode, out, errs)
		}
		return out
	}
	run(exitOK, "configure", "jobs", "--retry-limit", "5", "--retry-delay", "0s")
	for i := 0; i < 4; i++ {
		run(exitOK, "push", "jobs", fmt.Sprintf("job %d", i), "--partition", "p")
	}
	out := run(exitOK, "pop", "jobs", "--batch", "4", "--ack", "failed")
	if !strings.Contains(out, "3 released: they come back after the failed one, in order\n") ||
		strings.Count(out, "  released (comes back after the failed one)\n") != 3 ||
		strings.Count(out, "  acked failed\n") != 1 || strings.Contains(out, "refused") || strings.Contains(out, "__") {
		t.Fatalf("pop --ack failed of a batch of 4:\n%s", out)
	}

	// They come back, in order; the first spent a retry, the others none.
	// With --json the outcome is each message's "acked" (retry releases
	// like failed, and spends nothing).
	out = run(exitOK, "pop", "jobs", "--batch", "4", "--ack", "retry", "--json")
	var got []messageJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 4 {
		t.Fatalf("second pop --json: %v\n%s", err, out)
	}
	for i, m := range got {
		wantAcked, wantRetries := "released", 0
		if i == 0 {
			wantAcked, wantRetries = "retry", 1
		}
		if m.Offset != uint64(i) || m.Payload != fmt.Sprintf("job %d", i) || m.RetryCount != wantRetries || m.Acked != wantAcked || m.AckError != "" {
			t.Errorf("message %d after the failed batch: %+v (want offset %d, %d retries, acked %q)", i, m, i, wantRetries, wantAcked)
		}
	}
}

// TestAckOutcomesCountOnlyRealRefusals: lease_invalid after an answer of the
// same batch released that lease is the release, not a refusal; the same
// code without such an answer, or another code, is a refusal (exit 1).
func TestAckOutcomesCountOnlyRealRefusals(t *testing.T) {
	l1, l2 := client.ID{1}, client.ID{2}
	msgs := []client.Message{{LeaseID: l1}, {LeaseID: l1}, {LeaseID: l2}, {LeaseID: l2}, {LeaseID: l1}}
	invalid := protocol.NewError(protocol.CodeLeaseInvalid, "not the live lease")
	res := []client.AckResult{
		{LeaseReleased: true}, // l1 released by this answer
		{Err: invalid},        // released
		{Err: invalid},        // l2 was never released here: refused
		{Err: fmt.Errorf("wrapped: %w", invalid)},              // still refused
		{Err: protocol.NewError(protocol.CodeJournal, "disk")}, // another cause: refused
	}
	out := make([]messageJSON, len(msgs))
	refused, released := ackOutcomes(msgs, res, client.Failed, out)
	if refused != 3 || released != 1 {
		t.Fatalf("refused %d, released %d (want 3 and 1): %+v", refused, released, out)
	}
	want := []string{"failed", "released", "refused", "refused", "refused"}
	for i, w := range want {
		if out[i].Acked != w {
			t.Errorf("message %d: acked %q, want %q", i, out[i].Acked, w)
		}
	}
	if out[1].AckError != "" || !errors.Is(res[2].Err, invalid) || out[2].AckError == "" {
		t.Errorf("errors: %+v", out)
	}
}
