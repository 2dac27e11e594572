package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
	"github.com/regentmq/regent/netserver/httpapi"
)

// TestHealthReportsAStuckJournal: when the journal's writes stop (a test hook
// imitates a disk that no longer answers), pushes wait, and /health answers
// 503 naming the stuck journal once records have waited longer than
// JournalStallAfter; it was 200 before.
func TestHealthReportsAStuckJournal(t *testing.T) {
	t.Setenv(log.EnvStallWritesAfter, "0")
	// The door alone over its own journal and engine, not brokertest's
	// broker: the stuck write is released by closing the journal first,
	// and a broker closes the engine first (which would wait on it).
	j, err := log.Open(log.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Stripes: 8, JournalStallAfter: 200 * time.Millisecond}, j)
	if err != nil {
		t.Fatal(err)
	}
	s, err := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0"}, e)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		j.Close() // releases the stuck write (it fails)
		e.Close()
	}()
	url := "http://" + l.Addr().String()
	health := func() (int, string) {
		resp, err := http.Get(url + "/health")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := health(); code != http.StatusOK {
		t.Fatalf("/health before anything waits: %d %s", code, body)
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		e.Push(ctx, []engine.PushItem{{Queue: "q", Payload: []byte("x")}}) // never durable
	}()
	var body string
	brokertest.CheckFor(t, 10*time.Second, func() error {
		code, b := health()
		if body = b; code == http.StatusServiceUnavailable && strings.Contains(b, "committer finished no group") {
			return nil
		}
		return fmt.Errorf("/health with the journal stuck for seconds: %d %s", code, b)
	})
	if !strings.Contains(body, `"journal":"engine: journal failed: log: the committer`) && !strings.Contains(body, `"journal":"journal failed`) {
		t.Fatalf("/health names the journal as the part that fails: %s", body)
	}
}

// TestHealthReportsADeadTCPDoor: /health answers 503 naming the binary
// protocol's door when it does not serve. (On the door alone: a broker
// wires TCPHealth to its own TCP door.)
func TestHealthReportsADeadTCPDoor(t *testing.T) {
	h := newDoorHarness(t, func(c *httpapi.Config, _ *engineConfig) {
		c.TCPHealth = func() error { return errors.New("the TCP door on :6633 stopped: accept: too many open files") }
	})
	code, body := h.do("GET", "/health", nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), `"tcp":"the TCP door on :6633 stopped`) {
		t.Fatalf("/health with the TCP door dead: %d %s", code, body)
	}
	h2 := newDoorHarness(t, func(c *httpapi.Config, _ *engineConfig) { c.TCPHealth = func() error { return nil } })
	if code, body := h2.do("GET", "/health", nil); code != http.StatusOK || !strings.Contains(string(body), `"doors":{"http":"ok","tcp":"ok"}`) {
		t.Fatalf("/health with both doors serving: %d %s", code, body)
	}
}
