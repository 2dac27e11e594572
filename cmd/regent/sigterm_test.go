package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/regentmq/regent/client"
)

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startServe runs `regent serve` as a child and waits until it listens.
func startServe(t *testing.T, bin, data, tcp, http string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--data", data, "--tcp", tcp, "--http", http, "--log-level", "warn")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
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
	}()
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("regent serve did not start")
	}
	return cmd
}

// TestSIGTERMUnderLoadLosesNoQueuedPush: SIGTERM during a sustained push;
// after a restart, every message answered queued is there exactly once.
func TestSIGTERMUnderLoadLosesNoQueuedPush(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the regent binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "regent")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
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
	time.Sleep(700 * time.Millisecond) // let the load run
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
