package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/internal/freeport"
	"github.com/regentmq/regent/log"
)

// freePort is a loopback address for a `regent serve` this test starts.
// Not one of port 0's: those come from the range outgoing connections take
// theirs from, and the other packages' tests, running meanwhile, open
// thousands (a serve whose port was taken so did not start, once in CI).
func freePort(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// startServe runs `regent serve` as a child and waits until it listens.
func startServe(t *testing.T, bin, data, tcp, http string) *exec.Cmd {
	t.Helper()
	return startServeWith(t, exec.Command(bin, "serve", "--data", data, "--tcp", tcp, "--http", http, "--log-level", "warn"))
}

// startServeWith starts cmd (a `regent serve`) and waits until it listens.
func startServeWith(t *testing.T, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Stderr == nil {
		cmd.Stderr = &lockedBuffer{}
	}
	said := func() string { // what it wrote to stderr, where this can read it
		if s, ok := cmd.Stderr.(fmt.Stringer); ok {
			return s.String()
		}
		return "(stderr elsewhere)"
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready, ended := make(chan struct{}), make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "tcp ") {
				close(ready)
				for sc.Scan() {
				}
				return
			}
		}
		close(ended) // it exited before it listened
	}()
	select {
	case <-ready:
	case <-ended:
		cmd.Wait()
		t.Fatalf("regent serve exited before it listened: %s", said())
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("regent serve did not start in 20 s: %s", said())
	}
	return cmd
}

// buildRegent builds this command into a temporary directory (skipped with
// -short) and returns the directory and the binary.
func buildRegent(t *testing.T) (dir, bin string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the regent binary")
	}
	dir = t.TempDir()
	bin = filepath.Join(dir, "regent")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir, bin
}

// TestSIGTERMUnderLoadLosesNoQueuedPush: SIGTERM during a sustained push;
// after a restart, every message answered queued is there exactly once.
func TestSIGTERMUnderLoadLosesNoQueuedPush(t *testing.T) {
	dir, bin := buildRegent(t)
	data := filepath.Join(dir, "data")
	tcp, http := freePort(t), freePort(t)
	srv := startServe(t, bin, data, tcp, http)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	queued := map[string]bool{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		c, err := client.Dial(ctx, tcp, client.WithConns(1), client.WithReconnectBackoff(time.Hour, time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				items := make([]client.Item, 10)
				for k := range items {
					items[k] = client.Item{Queue: "load", Partition: fmt.Sprint("p", w), Payload: []byte(fmt.Sprintf("w%d-%d-%d", w, i, k))}
				}
				pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
				res, err := c.Push(pctx, items...)
				pcancel()
				if err != nil {
					return // the server went away: answers after this are unknown
				}
				mu.Lock()
				for k, r := range res {
					if r.Status == client.PushQueued {
						queued[string(items[k].Payload)] = true
					}
				}
				mu.Unlock()
			}
		}(w)
	}
	brokertest.CheckFor(t, 20*time.Second, func() error { // the load runs: SIGTERM comes amid it
		mu.Lock()
		defer mu.Unlock()
		if len(queued) < 1000 {
			return fmt.Errorf("%d messages answered queued", len(queued))
		}
		return nil
	})
	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := srv.Wait(); err != nil {
		t.Fatalf("regent serve after SIGTERM: %v", err)
	}
	close(stop)
	wg.Wait()
	if len(queued) == 0 {
		t.Fatal("no push was answered before the signal")
	}
	srv = startServe(t, bin, data, tcp, http)
	defer func() {
		srv.Process.Signal(syscall.SIGTERM)
		srv.Wait()
	}()
	c, err := client.Dial(ctx, tcp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seen := map[string]int{}
	for {
		msgs, err := c.Queue("load").Group("check").Batch(1000).Partitions(4).AutoAck(true).Pop(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			seen[string(m.Payload)]++
		}
	}
	lost, dup := 0, 0
	for p := range queued {
		if seen[p] == 0 {
			lost++
		}
	}
	for _, n := range seen {
		if n > 1 {
			dup++
		}
	}
	t.Logf("%d pushes answered queued before SIGTERM; %d messages after the restart", len(queued), len(seen))
	if lost > 0 || dup > 0 {
		t.Fatalf("%d answered pushes lost, %d duplicated", lost, dup)
	}
}

// TestSIGTERMWithAStuckJournal: with the journal's disk stuck (a test hook
// makes every write hang), a push is never answered, and SIGTERM still
// stops the process within --shutdown-timeout and its margin, with status 1
// and a log line saying why.
func TestSIGTERMWithAStuckJournal(t *testing.T) {
	dir, bin := buildRegent(t)
	tcp, http := freePort(t), freePort(t)
	cmd := exec.Command(bin, "serve", "--data", filepath.Join(dir, "data"), "--tcp", tcp, "--http", http,
		"--log-level", "warn", "--shutdown-timeout", "500ms")
	cmd.Env = append(os.Environ(), log.EnvStallWritesAfter+"=0")
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	srv := startServeWith(t, cmd)
	defer srv.Process.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, tcp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pushed := make(chan error, 1)
	go func() {
		_, err := c.Push(ctx, client.Item{Queue: "stuck", Payload: []byte("never written")})
		pushed <- err
	}()
	select {
	case err := <-pushed:
		t.Fatalf("a push was answered (%v) with the journal's writes stuck", err)
	case <-time.After(300 * time.Millisecond):
	}
	start := time.Now()
	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	select {
	case err := <-exited:
		took := time.Since(start)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitFailure {
			t.Fatalf("exit after SIGTERM with a stuck journal: %v (want status %d)", err, exitFailure)
		}
		if bound := 500*time.Millisecond + shutdownMargin + 2*time.Second; took > bound {
			t.Fatalf("stopped after %v, above its bound %v", took, bound)
		}
		if !strings.Contains(stderr.String(), "not stopped within") {
			t.Fatalf("no word of the stuck stop in the log:\n%s", stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("still running 15 s after SIGTERM (shutdown timeout 500ms)")
	}
}
