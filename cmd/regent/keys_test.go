package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/engine"
)

// TestServeChecksEncryptionKeys drives `regent serve` through the life of
// its keys: messages sealed by key 1; a start with key 2, or without a key,
// refused (naming the keys and the flags that fix it); a rotation (key 2,
// key 1 old, given by the environment) that delivers the old messages and
// seals new ones; key 2 alone refused while key 1's messages are held; and
// key 1 declared lost: the broker starts, a new group's pop files key 1's
// messages to its dead-letter queue with the reason and delivers the rest,
// and /api/v1/messages lists them as unreadable. Before, every one of those
// starts was accepted without a word, and the partition was stuck.
func TestServeChecksEncryptionKeys(t *testing.T) {
	dir, bin := buildRegent(t)
	data := filepath.Join(dir, "data")
	tcp, httpAddr := freePort(t), freePort(t)
	k1, k2 := bytes.Repeat([]byte{0x5a}, 32), bytes.Repeat([]byte{0xa5}, 32)
	h1, h2 := hex.EncodeToString(k1), hex.EncodeToString(k2)
	fp1, fp2 := engine.KeyFingerprint(k1), engine.KeyFingerprint(k2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	serve := func(env []string, args ...string) *exec.Cmd {
		cmd := exec.Command(bin, append([]string{"serve", "--data", data, "--tcp", tcp, "--http", httpAddr, "--log-level", "warn"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		return startServeWith(t, cmd)
	}
	stop := func(cmd *exec.Cmd) {
		t.Helper()
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("regent serve after SIGTERM: %v", err)
		}
	}
	refused := func(args []string, want ...string) {
		t.Helper()
		cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
		defer ccancel()
		cmd := exec.CommandContext(cctx, bin, append([]string{"serve", "--data", data, "--tcp", tcp, "--http", httpAddr}, args...)...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitFailure {
			t.Fatalf("serve %v: %v, want a refusal (status %d)\n%s", args, err, exitFailure, out)
		}
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				t.Fatalf("serve %v: the refusal does not say %q:\n%s", args, w, out)
			}
		}
	}
	dial := func() *client.Client {
		t.Helper()
		c, err := client.Dial(ctx, tcp)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	push := func(c *client.Client, pls ...string) {
		t.Helper()
		for _, pl := range pls {
			res, err := c.Push(ctx, client.Item{Queue: "sq", Partition: "p", Payload: []byte(pl)})
			if err != nil || res[0].Status != client.PushQueued {
				t.Fatalf("push %q: %+v %v", pl, res, err)
			}
		}
	}
	pop := func(c *client.Client, group string) string {
		t.Helper()
		msgs, err := c.Queue("sq").Partition("p").Group(group).Batch(100).AutoAck(true).Pop(ctx)
		if err != nil {
			t.Fatalf("pop: %v", err)
		}
		var got []string
		for _, m := range msgs {
			got = append(got, string(m.Payload))
		}
		return strings.Join(got, ",")
	}

	srv := serve(nil, "--encryption-key", h1)
	c := dial()
	o := client.DefaultQueueOptions()
	o.EncryptionEnabled = true
	if _, err := c.Configure(ctx, "sq", o); err != nil {
		t.Fatal(err)
	}
	push(c, "a", "b")
	c.Close()
	stop(srv)

	refused([]string{"--encryption-key", h2}, "does not match", fp1, fp2, "--encryption-old-keys")
	refused(nil, "no encryption key is given", fp1, `queue \"sq\"`, "--encryption-key")

	srv = serve([]string{"REGENT_ENCRYPTION_OLD_KEYS=" + h1}, "--encryption-key", h2)
	c = dial()
	push(c, "c")
	if got := pop(c, "g1"); got != "a,b,c" {
		t.Fatalf("after the rotation g1 got %q, want a,b,c", got)
	}
	c.Close()
	stop(srv)

	refused([]string{"--encryption-key", h2}, "no key given opens", fp1, "--encryption-old-keys")

	srv = serve(nil, "--encryption-key", h2, "--encryption-lost-keys", fp1)
	defer stop(srv)
	c = dial()
	defer c.Close()
	push(c, "d")
	if got := pop(c, "g2"); got != "c,d" {
		t.Fatalf("with key 1 lost g2 got %q, want c,d", got)
	}
	dlq, n, err := c.DLQ(ctx, client.DLQFilter{Queue: "sq", Group: "g2"})
	if err != nil || n != 2 || !strings.Contains(dlq[0].Error, fp1) {
		t.Fatalf("g2's dead letters: %d %+v %v", n, dlq, err)
	}
	resp, err := http.Get(fmt.Sprintf("http://%s/api/v1/messages?queue=sq", httpAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	unreadable := 0
	for _, m := range list.Messages {
		if m["payloadError"] != nil {
			unreadable++
		}
	}
	if len(list.Messages) != 4 || unreadable != 2 {
		t.Fatalf("listed %d messages, %d unreadable; want 4 and 2: %v", len(list.Messages), unreadable, list.Messages)
	}
}
