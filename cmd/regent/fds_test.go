package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
)

func TestConnCaps(t *testing.T) {
	for _, tc := range []struct {
		limit     uint64
		tcp, http int
		fails     bool
	}{
		{100, 0, 0, true},
		{600, 172, 172, false},
		{20000, 9872, 9872, false},
		{1 << 20, 10000, 10000, false},
	} {
		tcp, http, err := connCaps(tc.limit)
		if (err != nil) != tc.fails || tcp != tc.tcp || http != tc.http {
			t.Errorf("connCaps(%d) = %d, %d, %v", tc.limit, tcp, http, err)
		}
	}
}

// TestServeAtTheDescriptorLimit runs `regent serve` with a limit of 600
// descriptors and holds more idle connections on both doors than the limit
// allows, while a client pushes 20 MiB across a segment rollover. The doors
// refuse what is past their caps (they are sized below the limit), the
// journal keeps writing, every push is queued; once the flood leaves, both
// doors accept again. (The broker used to lose its TCP door for good at the
// limit, gnet's accept failing with EMFILE, and its journal at the next
// segment, opening the directory for an fsync.)
func TestServeAtTheDescriptorLimit(t *testing.T) {
	dir, bin := buildRegent(t)
	tcpAddr, httpAddr := freePort(t), freePort(t)
	cmd := exec.Command("prlimit", "--nofile=600:600", bin, "serve", "--data", filepath.Join(dir, "data"),
		"--tcp", tcpAddr, "--http", httpAddr, "--log-level", "info")
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("prlimit (util-linux) is not installed")
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	srv := startServeWith(t, cmd)
	defer func() {
		srv.Process.Kill()
		srv.Wait()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, tcpAddr, client.WithConns(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !strings.Contains(stderr.String(), "tcp_max_conns=172") {
		t.Fatalf("the caps were not sized from the limit:\n%s", stderr.String())
	}
	// The flood: 350 idle connections on each door (700 > 600).
	var flood []net.Conn
	defer func() {
		for _, nc := range flood {
			nc.Close()
		}
	}()
	hello := protocol.AppendHelloRequest(nil, 1, &protocol.HelloRequest{Major: protocol.VersionMajor, Minor: protocol.VersionMinor})
	for i := 0; i < 350; i++ {
		for _, addr := range []string{tcpAddr, httpAddr} {
			nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				continue // refused outright is fine too
			}
			if addr == tcpAddr {
				nc.Write(hello)
			}
			flood = append(flood, nc)
		}
	}
	// 20 pushes of 1 MiB: the 16 MiB segment rolls over while the doors are full.
	payload := bytes.Repeat([]byte{'f'}, 1<<20)
	for i := 0; i < 20; i++ {
		res, err := c.Push(ctx, client.Item{Queue: "fds", Partition: "p", TransactionID: fmt.Sprint("t", i), Payload: payload})
		if err != nil || res[0].Status != client.PushQueued {
			t.Fatalf("push %d with the doors flooded: %v %+v\n%s", i, err, res, stderr.String())
		}
	}
	for _, nc := range flood {
		nc.Close()
	}
	flood = nil
	// Both doors accept again, and every push is there.
	var c2 *client.Client
	brokertest.CheckFor(t, 20*time.Second, func() error {
		dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
		defer dcancel()
		if c2, err = client.Dial(dctx, tcpAddr, client.WithConns(1)); err != nil {
			return fmt.Errorf("the TCP door does not accept after the flood: %v\n%s", err, stderr.String())
		}
		return nil
	})
	defer c2.Close()
	n := 0
	for {
		m, err := c2.Queue("fds").Group("check").Batch(100).AutoAck(true).Pop(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(m) == 0 {
			break
		}
		n += len(m)
	}
	if n != 20 {
		t.Fatalf("%d of 20 pushes stored", n)
	}
	brokertest.CheckFor(t, 20*time.Second, func() error {
		resp, err := http.Get("http://" + httpAddr + "/health")
		if err != nil {
			return fmt.Errorf("the HTTP door does not answer /health after the flood: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("the HTTP door answers /health %s after the flood", resp.Status)
		}
		return nil
	})
	if strings.Contains(stderr.String(), "door died") || strings.Contains(stderr.String(), "journal failed") {
		t.Fatalf("the broker logged a dead door or journal:\n%s", stderr.String())
	}
}

// TestServeHelpShowsNoSecret: serve --help names the environment variables
// of its secrets but never prints what they hold.
func TestServeHelpShowsNoSecret(t *testing.T) {
	for env, v := range map[string]string{
		"REGENT_ENCRYPTION_KEY":      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		"REGENT_ENCRYPTION_OLD_KEYS": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
		"REGENT_JWT_SECRET":          "a-jwt-secret-nobody-may-read",
		"REGENT_LINK_TOKEN":          "a-link-token-nobody-may-read",
	} {
		t.Setenv(env, v)
	}
	var out, errOut bytes.Buffer
	run([]string{"serve", "--help"}, &out, &errOut)
	help := out.String() + errOut.String()
	for _, secret := range []string{"aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb", "a-jwt-secret", "a-link-token"} {
		if strings.Contains(help, secret) {
			t.Errorf("serve --help prints a secret from the environment (%s...)", secret)
		}
	}
	if !strings.Contains(help, "REGENT_ENCRYPTION_KEY") {
		t.Errorf("serve --help does not name REGENT_ENCRYPTION_KEY:\n%s", help)
	}
}
