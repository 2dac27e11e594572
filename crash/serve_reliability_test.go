package crash

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
)

// Storage faults seen from `regent serve`: a second broker on the same data
// directory, a corrupt journal (refused, or salvaged on request), a full
// disk.

func startT(t *testing.T, cfg *Config) *broker {
	t.Helper()
	b, err := newBroker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.kill)
	if err := b.start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return b
}

func dialT(t *testing.T, b *broker) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, b.tcpAddr, client.WithReconnectBackoff(10*time.Millisecond, 100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func pushN(t *testing.T, c *client.Client, q string, from, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := from; i < from+n; i++ {
		res, err := c.Queue(q).Push(ctx, []byte(fmt.Sprintf("message-%04d-%s", i, strings.Repeat("x", 200))))
		if err != nil || res[0].Status != client.PushQueued {
			t.Fatalf("push %d: %+v %v", i, res, err)
		}
	}
}

func readAll(t *testing.T, c *client.Client, q string) []string {
	t.Helper()
	msgs, err := popAll(context.Background(), c, q, "Default", fmt.Sprint("reader-", time.Now().UnixNano()), true)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Payload[:12]))
	}
	return out
}

// runServe runs `regent serve` on dir expecting it to exit at once (it
// cannot start) and returns its output and exit error.
func runServe(t *testing.T, bin, dir string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"serve", "--data", dir, "--tcp", "127.0.0.1:0", "--http", "127.0.0.1:0"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestSecondBrokerOnTheSameDataIsRefused: while one broker runs, another
// on the same data directory refuses to start and names the holder.
func TestSecondBrokerOnTheSameDataIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	cfg := &Config{Binary: binary(t), Dir: t.TempDir(), StartTimeout: 20 * time.Second}
	b := startT(t, cfg)
	out, err := runServe(t, cfg.Binary, b.dataDir)
	if err == nil || !strings.Contains(out, "in use by pid "+fmt.Sprint(b.cmd.Process.Pid)) {
		t.Fatalf("second broker: %v\n%s", err, out)
	}
	// The first is unaffected.
	c := dialT(t, b)
	pushN(t, c, "q", 0, 1)
}

// flipMidWAL damages an entry in the middle of the journal's last segment
// and returns how many entries come before it.
func flipMidWAL(t *testing.T, dataDir string) {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dataDir, "wal", "[0-9]*"))
	sort.Strings(segs)
	if len(segs) == 0 {
		t.Fatal("no WAL segment")
	}
	p := segs[len(segs)-1]
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// The 20th occurrence of the entry magic: well inside the file.
	at, n := 0, 0
	for n < 20 {
		i := bytes.Index(data[at+1:], []byte("RGN1"))
		if i < 0 {
			t.Fatalf("only %d entries in the segment", n)
		}
		at += 1 + i
		n++
	}
	data[at+30] ^= 0x08
	if err := os.WriteFile(p, data, 0o640); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptJournalRefusedUnlessSalvaged: a flipped bit in the middle of
// the journal makes `regent serve` refuse to start, saying where and that
// --salvage exists; with --salvage it starts, logs what it lost, and holds
// every message but the damaged entry's.
func TestCorruptJournalRefusedUnlessSalvaged(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	cfg := &Config{Binary: binary(t), Dir: t.TempDir(), StartTimeout: 20 * time.Second}
	b := startT(t, cfg)
	c := dialT(t, b)
	pushN(t, c, "q", 0, 40)
	b.kill() // no snapshot: recovery must replay the journal
	flipMidWAL(t, b.dataDir)

	out, err := runServe(t, cfg.Binary, b.dataDir)
	if err == nil || !strings.Contains(out, "mid-log corruption") || !strings.Contains(out, "refusing to open") || !strings.Contains(out, "--salvage starts") {
		t.Fatalf("serve on a corrupt journal: %v\n%s", err, out)
	}
	t.Logf("without --salvage:\n%s", out)

	cfg.Args = []string{"--salvage"}
	if err := b.start(context.Background()); err != nil {
		t.Fatal(err)
	}
	log := b.logTail()
	if !strings.Contains(log, "SALVAGE") || !strings.Contains(log, "lost_entries=") ||
		!strings.Contains(log, "queue=q partition=Default") || !strings.Contains(log, "lost_messages=1 ") {
		t.Fatalf("salvage not reported:\n%s", log)
	}
	got := readAll(t, c, "q")
	if len(got) != 39 {
		t.Fatalf("salvaged %d messages, want the 39 outside the damaged entry", len(got))
	}
	k := 0
	for i := 0; i < 40 && k < len(got); i++ {
		if got[k] == fmt.Sprintf("message-%04d", i) {
			k++
		}
	}
	if k != len(got) {
		t.Fatalf("messages out of order or unknown: %v", got)
	}
	t.Logf("with --salvage: %d of 40 messages kept", len(got))
}

// TestDiskFullUnderServe fills a small tmpfs under a running broker: pushes
// are refused with a clear error (CodeJournal, "no space"), nothing
// acknowledged is lost, the broker takes pushes again once space is freed,
// and after a kill -9 everything acknowledged is there. It needs to mount
// a tmpfs (root); elsewhere the log's fault-hook tests cover disk full.
func TestDiskFullUnderServe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	mnt := t.TempDir()
	unmount, err := mountTmpfs(mnt, 3<<20)
	if err != nil {
		t.Skipf("cannot mount a tmpfs here (%v)", err)
	}
	t.Cleanup(unmount)
	ballast := filepath.Join(mnt, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 1<<20), 0o640); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Binary: binary(t), Dir: mnt, StartTimeout: 20 * time.Second}
	b := startT(t, cfg)
	c := dialT(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rnd := rand.New(rand.NewPCG(1, 2))
	var acked []string
	var refusal error
	for i := 0; i < 100000 && refusal == nil; i++ {
		p := fmt.Sprintf("m-%06d-", i)
		for k := 0; k < 60; k++ { // incompressible
			p += fmt.Sprintf("%016x", rnd.Uint64())
		}
		cctx, ccancel := context.WithTimeout(ctx, 500*time.Millisecond)
		res, err := c.Queue("full").Push(cctx, []byte(p))
		ccancel()
		switch {
		case err != nil && errors.Is(err, context.DeadlineExceeded):
			// Caught in the group that hit the full disk: not answered yet.
		case err != nil:
			refusal = err
		case res[0].Status == client.PushQueued:
			acked = append(acked, p[:8])
		default:
			refusal = res[0].Err
		}
	}
	if protocol.CodeOf(refusal) != protocol.CodeJournal || !strings.Contains(refusal.Error(), "no space") {
		t.Fatalf("after %d pushes: %v, want a journal error saying no space", len(acked), refusal)
	}
	t.Logf("disk full after %d acknowledged pushes: %v", len(acked), refusal)
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	brokertest.CheckFor(t, 20*time.Second, func() error {
		res, err := c.Queue("full").Push(ctx, []byte("after-000001"))
		if err != nil || res[0].Status != client.PushQueued {
			return fmt.Errorf("pushes still refused after space was freed: %+v %v", res, err)
		}
		return nil
	})
	acked = append(acked, "after-00")
	b.kill()
	if err := b.start(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, c, "full")
	seen := map[string]int{}
	for _, g := range got {
		seen[g[:8]]++
	}
	for _, a := range acked {
		if seen[a] != 1 {
			t.Fatalf("acknowledged %s found %d times after the restart", a, seen[a])
		}
	}
	t.Logf("%d acknowledged, %d stored after kill -9 and restart", len(acked), len(got))
}
