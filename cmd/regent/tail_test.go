package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/engine"
)

// tailProc is a running `regent tail`.
type tailProc struct {
	cmd       *exec.Cmd
	out, errb lockedBuffer
	done      chan struct{} // closed when it exited: then code and at are set
	code      int
	at        time.Time
}

// startTail runs `regent tail` (the built binary) with args and returns it
// once it has said that it follows (with --json, which says nothing on
// stderr, at once), or has exited.
func startTail(t *testing.T, bin string, args ...string) *tailProc {
	t.Helper()
	p := &tailProc{cmd: exec.Command(bin, append([]string{"tail"}, args...)...), done: make(chan struct{})}
	p.cmd.Stdout = &p.out
	pr, pw := io.Pipe()
	p.cmd.Stderr = pw
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill(); <-p.done })
	following := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		said := false
		for sc.Scan() {
			fmt.Fprintln(&p.errb, sc.Text())
			if !said && strings.HasPrefix(sc.Text(), "following ") {
				said = true
				close(following)
			}
		}
	}()
	go func() {
		p.cmd.Wait()
		p.at = time.Now()
		p.code = p.cmd.ProcessState.ExitCode()
		pw.Close()
		close(p.done)
	}()
	json := false
	for _, a := range args {
		json = json || a == "--json"
	}
	if json {
		return p
	}
	select {
	case <-following:
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("tail %v did not start: %s", args, p.errb.String())
	}
	return p
}

// exit waits (at most d) for tail to end and returns its exit code and how
// long it ran after since.
func (p *tailProc) exit(t *testing.T, since time.Time, d time.Duration) (int, time.Duration) {
	t.Helper()
	select {
	case <-p.done:
		return p.code, p.at.Sub(since)
	case <-time.After(d):
		t.Fatalf("tail still running after %v: %s", d, p.errb.String())
		return 0, 0
	}
}

// tailGroups lists the groups of queue whose names start with "tail-".
func tailGroups(t *testing.T, c *client.Client, queue string) []string {
	t.Helper()
	qs, err := c.Queues(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, q := range qs {
		for _, g := range q.Groups {
			if q.Name == queue && strings.HasPrefix(g, "tail-") {
				out = append(out, g)
			}
		}
	}
	return out
}

// TestTailStopsAtOnceOnCtrlC: SIGINT ends `regent tail` while its long poll
// waits on the broker, within 500 ms (it took 2 s: the poll waited out its
// own timeout), with status 0 and its throwaway group deleted.
func TestTailStopsAtOnceOnCtrlC(t *testing.T) {
	_, bin := buildRegent(t)
	b := brokertest.Start(t, broker.Options{Engine: engine.Config{SnapshotEveryBytes: -1}})
	addr := b.TCPAddr().String()
	c, err := client.Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Push(context.Background(), client.Item{Queue: "events", Payload: []byte("old")}); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		p := startTail(t, bin, "events", "--addr", addr)
		// Its group exists once its first pop came: the next pops park.
		brokertest.CheckFor(t, 10*time.Second, func() error {
			if len(tailGroups(t, c, "events")) == 0 {
				return errors.New("no tail group yet")
			}
			return nil
		})
		// Into the poll: the first round at once, the others well into it.
		time.Sleep(time.Duration(round) * 700 * time.Millisecond)
		sent := time.Now()
		if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		code, took := p.exit(t, sent, 10*time.Second)
		t.Logf("round %d: exit %d %v after SIGINT", round, code, took)
		if code != exitOK {
			t.Fatalf("tail exit %d after SIGINT: %s", code, p.errb.String())
		}
		if took > 500*time.Millisecond {
			t.Fatalf("tail took %v to stop after SIGINT (want well under 500 ms)", took)
		}
		if g := tailGroups(t, c, "events"); len(g) != 0 {
			t.Fatalf("tail left its groups %v", g)
		}
		if strings.Contains(p.out.String(), "old") {
			t.Fatalf("tail (from the end) printed an old message: %s", p.out.String())
		}
	}
}

// payloadsOf reads tail --json's lines as their payloads.
func payloadsOf(t *testing.T, out string) []string {
	t.Helper()
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var m messageJSON
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("tail --json line %q: %v", line, err)
		}
		got = append(got, m.Payload)
	}
	return got
}

// TestTailFromStartAndLast: --from-start shows what the queue holds, --last
// N the N newest across partitions (oldest first), and both then follow;
// each ends on SIGINT with status 0 and no group left.
func TestTailFromStartAndLast(t *testing.T) {
	_, bin := buildRegent(t)
	b := brokertest.Start(t, broker.Options{Engine: engine.Config{SnapshotEveryBytes: -1}})
	addr := b.TCPAddr().String()
	c, err := client.Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	push := func(queue, partition, payload string) {
		t.Helper()
		if _, err := c.Push(context.Background(), client.Item{Queue: queue, Partition: partition, Payload: []byte(payload)}); err != nil {
			t.Fatal(err)
		}
	}
	held := []string{"m0", "m1", "m2", "m3", "m4", "m5", "m6"} // pushed to eu, us, eu, ...
	for round, tc := range []struct {
		args      []string
		partition string // followed: where the new message goes
		want      []string
	}{
		{[]string{"--from-start"}, "us", held},
		{[]string{"--last", "3"}, "us", held[4:]},
		{[]string{"--last", "2", "--partition", "us"}, "us", []string{"m3", "m5"}},
		{[]string{"--last", "100"}, "eu", held},
		{[]string{}, "eu", nil},
	} {
		queue := fmt.Sprintf("events-%d", round)
		for i, p := range held {
			push(queue, []string{"eu", "us"}[i%2], p)
		}
		p := startTail(t, bin, append([]string{queue, "--addr", addr, "--json"}, tc.args...)...)
		brokertest.CheckFor(t, 10*time.Second, func() error { // its history shown, and its group there
			if got := payloadsOf(t, p.out.String()); len(got) < len(tc.want) || len(tailGroups(t, c, queue)) == 0 {
				return fmt.Errorf("tail %v printed %v", tc.args, got)
			}
			return nil
		})
		brokertest.CheckFor(t, 10*time.Second, func() error { // pushes until tail shows one
			push(queue, tc.partition, "new")
			if got := payloadsOf(t, p.out.String()); len(got) <= len(tc.want) {
				return fmt.Errorf("tail %v printed %v", tc.args, got)
			}
			return nil
		})
		sent := time.Now()
		p.cmd.Process.Signal(syscall.SIGINT)
		if code, _ := p.exit(t, sent, 10*time.Second); code != exitOK {
			t.Fatalf("tail %v: exit %d: %s", tc.args, code, p.errb.String())
		}
		got := payloadsOf(t, p.out.String())
		want := append(append([]string(nil), tc.want...), "new")
		head := got[:len(want)]
		if len(tc.args) > 0 && tc.args[0] == "--from-start" {
			// Partition after partition, each in its order.
			head = append(sortedByPartition(head[:len(tc.want)], held), "new")
		}
		if strings.Join(head, " ") != strings.Join(want, " ") {
			t.Errorf("tail %v printed %v; want %v first", tc.args, got, want)
		}
		for _, s := range got[len(tc.want):] {
			if s != "new" {
				t.Errorf("tail %v printed %s after its history: %v", tc.args, s, got)
			}
		}
		if g := tailGroups(t, c, queue); len(g) != 0 {
			t.Fatalf("tail %v left its groups %v", tc.args, g)
		}
	}
	// Usage mistakes.
	for _, args := range [][]string{{"--last", "0"}, {"--last", "-2"}, {"--from-start", "--last", "2"}} {
		if code, out, errs := runBin(t, bin, "", append([]string{"tail", "events-0", "--addr", addr}, args...)...); code != exitUsage || out != "" || !strings.Contains(errs, "--") {
			t.Errorf("tail %v: exit %d %q %q", args, code, out, errs)
		}
	}
}

// sortedByPartition puts got in the order of all (held: pushed to eu, us,
// eu, ...) when each partition's messages came in their order; otherwise it
// returns got as it is.
func sortedByPartition(got, all []string) []string {
	pos := map[string]int{}
	for i, s := range all {
		pos[s] = i
	}
	last := map[int]int{0: -1, 1: -1}
	for _, s := range got {
		i, ok := pos[s]
		if !ok || i <= last[i%2] {
			return got
		}
		last[i%2] = i
	}
	out := append([]string(nil), got...)
	sort.Slice(out, func(a, b int) bool { return pos[out[a]] < pos[out[b]] })
	return out
}

// TestTailWhenTheBrokerGoesAway: tail ends with status 1 and says why once
// the broker is gone for --timeout, and says which group it left behind.
func TestTailWhenTheBrokerGoesAway(t *testing.T) {
	_, bin := buildRegent(t)
	b := brokertest.Start(t, broker.Options{Engine: engine.Config{SnapshotEveryBytes: -1}})
	addr := b.TCPAddr().String()
	c, err := client.Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Push(context.Background(), client.Item{Queue: "events", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	p := startTail(t, bin, "events", "--addr", addr, "--timeout", "1s")
	brokertest.CheckFor(t, 10*time.Second, func() error {
		if len(tailGroups(t, c, "events")) == 0 {
			return errors.New("no tail group yet")
		}
		return nil
	})
	gone := time.Now()
	if err := b.Exit(); err != nil {
		t.Fatal(err)
	}
	code, took := p.exit(t, gone, 15*time.Second)
	t.Logf("exit %d %v after the broker went: %s", code, took, p.errb.String())
	if code != exitFailure || !strings.Contains(p.errb.String(), "regent tail: ") || !strings.Contains(p.errb.String(), "is left on events") {
		t.Fatalf("tail after the broker went: exit %d: %s", code, p.errb.String())
	}
	if took > 6*time.Second { // --timeout 1s, a poll of 2 s, 1 s to try to delete the group
		t.Fatalf("tail took %v to give up", took)
	}
}
