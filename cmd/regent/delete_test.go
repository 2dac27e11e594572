package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
)

// runOnTerminal runs the built binary with a terminal for stdin, types
// answer on it once the binary has asked (its stderr ends with ask), and
// returns the exit code, stdout and stderr.
func runOnTerminal(t *testing.T, bin, ask, answer string, args ...string) (int, string, string) {
	t.Helper()
	typer, term := openPTY(t)
	go io.Copy(io.Discard, typer) // the terminal's echo
	cmd := exec.Command(bin, args...)
	cmd.Stdin = term
	var out bytes.Buffer
	var errb lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	asked := false
	for deadline := time.Now().Add(20 * time.Second); !asked; {
		select {
		case <-done:
			t.Fatalf("%v ended without asking %q: %s", args, ask, errb.String())
		case <-time.After(5 * time.Millisecond):
		}
		asked = strings.HasSuffix(errb.String(), ask)
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("%v did not ask %q: %s", args, ask, errb.String())
		}
	}
	if _, err := typer.Write([]byte(answer + "\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("%v did not end after the answer", args)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

func queueNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	qs, err := c.Queues(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, q := range qs {
		out = append(out, q.Name)
	}
	return out
}

// TestDeleteAsksFirst: delete queue, delete group and dlq --purge ask on a
// terminal (the queue's name typed; y), do nothing on another answer, need
// --force without a terminal (exit 2), and say when there is nothing to
// delete (exit 1).
func TestDeleteAsksFirst(t *testing.T) {
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
	for _, q := range []string{"orders", "audit"} {
		run(exitOK, "push", q, "x", "--partition", "eu")
		run(exitOK, "pop", q, "--group", "billing", "--ack", "dlq", "--error", "bad")
	}
	run(exitOK, "pop", "orders", "--group", "shipping")

	// Without a terminal: refused, nothing done, exit 2, naming --force.
	for _, args := range [][]string{{"delete", "queue", "orders"}, {"delete", "group", "billing"}, {"delete", "group", "billing", "--queue", "orders"},
		{"dlq", "orders", "--purge"}} {
		out, errs := run(exitUsage, args...)
		if out != "" || !strings.Contains(errs, "not a terminal") || !strings.Contains(errs, "--force") {
			t.Errorf("%v without a terminal: %q %q", args, out, errs)
		}
	}
	if g := groupOn(t, c, "orders", "eu", "billing"); g.Group != "billing" {
		t.Fatal("the group went without --force")
	}
	if code, out, _ := runBin(t, bin, "", "dlq", "orders", "--json", "--addr", addr); code != exitOK || !strings.Contains(out, `"total": 1`) {
		t.Fatalf("the dead letters went without --force: %s", out)
	}

	// On a terminal: another answer does nothing (exit 1); the right one
	// deletes.
	const typeName, yesNo = "Type the queue's name to confirm: ", "[y/N] "
	code, out, errs := runOnTerminal(t, bin, typeName, "order", "delete", "queue", "orders", "--addr", addr)
	if code != exitFailure || out != "" || !strings.Contains(errs, "1 message in 1 partition, 1 dead letter, groups billing, shipping") ||
		!strings.Contains(errs, "not confirmed") || !has(queueNames(t, c), "orders") {
		t.Fatalf("delete queue, answered with another name: %d %q %q", code, out, errs)
	}
	code, out, errs = runOnTerminal(t, bin, yesNo, "n", "delete", "group", "billing", "--addr", addr)
	if code != exitFailure || !strings.Contains(errs, "on audit, orders?") || groupOn(t, c, "audit", "eu", "billing").Group != "billing" {
		t.Fatalf("delete group, answered n: %d %q %q", code, out, errs)
	}
	code, out, errs = runOnTerminal(t, bin, yesNo, "y", "delete", "group", "billing", "--queue", "orders", "--addr", addr)
	if code != exitOK || out != "deleted group billing on orders\n" || !strings.Contains(errs, "Delete group billing (its cursors, leases and retry counts) on orders?") {
		t.Fatalf("delete group --queue, answered y: %d %q %q", code, out, errs)
	}
	code, out, errs = runOnTerminal(t, bin, yesNo, "yes", "dlq", "orders", "--purge", "--addr", addr)
	if code != exitOK || out != "purged 1 entry\n" || !strings.Contains(errs, "Purge all 1 dead letter of orders, for good?") {
		t.Fatalf("dlq --purge, answered yes: %d %q %q", code, out, errs)
	}
	code, out, errs = runOnTerminal(t, bin, typeName, "orders", "delete", "queue", "orders", "--addr", addr)
	if code != exitOK || out != "deleted queue orders\n" || has(queueNames(t, c), "orders") {
		t.Fatalf("delete queue, its name typed: %d %q %q", code, out, errs)
	}

	// What is not there: exit 1, saying so (--force or not).
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"delete", "queue", "orders", "--force"}, `no queue "orders"`},
		{[]string{"delete", "group", "billing", "--queue", "orders", "--force"}, `no queue "orders"`},
		{[]string{"delete", "group", "nobody", "--force"}, `no group "nobody" on any queue`},
		{[]string{"delete", "group", "shipping", "--queue", "audit", "--force"}, `no group "shipping" on queue audit`},
	} {
		if out, errs := run(exitFailure, c.args...); out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("%v: %q %q; want %q", c.args, out, errs, c.want)
		}
	}
	// With --force: at once. The group on every queue that has it.
	if out, _ := run(exitOK, "delete", "group", "billing", "--force"); out != "deleted group billing on 1 queue\n" {
		t.Errorf("delete group --force: %q", out)
	}
	if out, _ := run(exitOK, "delete", "queue", "audit", "--force", "--json"); !strings.Contains(out, `"deleted": true`) || has(queueNames(t, c), "audit") {
		t.Errorf("delete queue --force --json: %q", out)
	}

	// Usage mistakes.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"delete"}, "Usage:"},
		{[]string{"delete", "queues", "x"}, `unknown command "queues"`},
		{[]string{"delete", "queue"}, "wrong number of arguments"},
		{[]string{"delete", "queue", "", "--force"}, "QUEUE is empty"},
		{[]string{"delete", "queue", "a", "b", "--force"}, "wrong number of arguments"},
		{[]string{"delete", "group", " ", "--force"}, "GROUP is empty"},
		{[]string{"delete", "group", "g", "--queue", "", "--force"}, "--queue is empty"},
		{[]string{"dlq", "orders", "--force"}, "--force goes with --purge"},
	} {
		code, out, errs := runBin(t, bin, "", append(c.args, "--addr", addr)...)
		if code != exitUsage || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, %q %q; want 2 and %q", c.args, code, out, errs, c.want)
		}
	}
}

// TestDeleteWhenTheBrokerGoesAwayWhileAsking: the broker stops while delete
// waits for its answer; the answer then ends it with status 1 and the
// reason, within --timeout, and nothing is deleted.
func TestDeleteWhenTheBrokerGoesAwayWhileAsking(t *testing.T) {
	_, bin := buildRegent(t)
	dir := t.TempDir()
	b := brokertest.Start(t, broker.Options{Journal: log.Config{Dir: dir}, Engine: engine.Config{SnapshotEveryBytes: -1}})
	addr := b.TCPAddr().String()
	if code, _, errs := runBin(t, bin, "", "push", "orders", "x", "--addr", addr); code != exitOK {
		t.Fatal(errs)
	}
	typer, term := openPTY(t)
	go io.Copy(io.Discard, typer)
	cmd := exec.Command(bin, "delete", "queue", "orders", "--addr", addr, "--timeout", "1s")
	cmd.Stdin = term
	var errb lockedBuffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	defer func() { cmd.Process.Kill(); <-done }()
	brokertest.CheckFor(t, 20*time.Second, func() error {
		if !strings.HasSuffix(errb.String(), "Type the queue's name to confirm: ") {
			return errors.New("not asked yet: " + errb.String())
		}
		return nil
	})
	if err := b.Exit(); err != nil {
		t.Fatal(err)
	}
	answered := time.Now()
	typer.Write([]byte("orders\n"))
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("delete still running 15 s after its answer, the broker gone")
	}
	took := time.Since(answered)
	t.Logf("exit after %v: %s", took, errb.String())
	if code := cmd.ProcessState.ExitCode(); code != exitFailure || !strings.Contains(errb.String(), "regent delete queue: ") || took > 5*time.Second {
		t.Fatalf("delete with the broker gone: exit %d after %v: %s", code, took, errb.String())
	}
	// Back on the same journal: the queue is there.
	b2 := brokertest.Start(t, broker.Options{Journal: log.Config{Dir: dir}, Engine: engine.Config{SnapshotEveryBytes: -1}})
	if code, out, errs := runBin(t, bin, "", "queues", "--addr", b2.TCPAddr().String()); code != exitOK || !strings.Contains(out, "orders") {
		t.Fatalf("after the restart: %d %s %s", code, out, errs)
	}
}
