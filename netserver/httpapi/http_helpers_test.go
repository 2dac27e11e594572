package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
)

// harness is a real HTTP bridge on 127.0.0.1:0 over a real engine and
// journal in a temporary directory, driven like Queen's clients drive it.
type harness struct {
	t      *testing.T
	e      *engine.Engine
	j      *log.Log
	s      *Server
	url    string
	c      *http.Client
	token  string
	closed bool
}

type engineConfig = engine.Config

type harnessOpt func(*Config, *engineConfig)

func newHarness(t *testing.T, opts ...harnessOpt) *harness {
	t.Helper()
	return newHarnessLog(t, log.Config{Sync: log.SyncNone}, opts...)
}

// newHarnessLog is newHarness with its journal configured by lc (its Dir is
// the test's).
func newHarnessLog(t *testing.T, lc log.Config, opts ...harnessOpt) *harness {
	t.Helper()
	lc.Dir = t.TempDir()
	j, err := log.Open(lc)
	if err != nil {
		t.Fatalf("log.Open: %v", err)
	}
	hc := Config{Addr: "127.0.0.1:0"}
	ec := engine.Config{Stripes: 8, TimerTick: 5 * time.Millisecond}
	for _, o := range opts {
		o(&hc, &ec)
	}
	e, err := engine.New(ec, j)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	s, err := New(hc, e)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	go s.Serve(l)
	h := &harness{t: t, e: e, j: j, s: s, url: "http://" + l.Addr().String(), c: &http.Client{Timeout: 30 * time.Second}}
	t.Cleanup(h.close)
	return h
}

func (h *harness) close() {
	if h.closed {
		return
	}
	h.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h.s.Shutdown(ctx)
	h.e.Close()
	h.j.Close()
}

// do sends a request; body is JSON-encoded unless it is a string or []byte.
func (h *harness) do(method, path string, body any) (int, []byte) {
	h.t.Helper()
	return h.doCtx(context.Background(), method, path, body)
}

func (h *harness) doCtx(ctx context.Context, method, path string, body any) (int, []byte) {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	case io.Reader:
		rd = io.MultiReader(b) // hides the length: sent chunked
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			h.t.Fatalf("encoding the request: %v", err)
		}
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.url+path, rd)
	if err != nil {
		h.t.Fatalf("request: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	resp, err := h.c.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil
		}
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, context.Canceled) {
		h.t.Fatalf("reading the answer: %v", err)
	}
	return resp.StatusCode, out
}

// call sends a request, checks the status and decodes the answer into out.
func (h *harness) call(method, path string, body any, want int, out any) {
	h.t.Helper()
	code, b := h.do(method, path, body)
	if code != want {
		h.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, code, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			h.t.Fatalf("%s %s: decoding %s: %v", method, path, b, err)
		}
	}
}

type obj = map[string]any

// push pushes items (each {"queue","partition","payload",...}) and returns
// the results.
func (h *harness) push(items ...obj) []obj {
	h.t.Helper()
	var res []obj
	h.call("POST", "/api/v1/push", obj{"items": items}, 201, &res)
	if len(res) != len(items) {
		h.t.Fatalf("push: %d results for %d items", len(res), len(items))
	}
	return res
}

// pushN pushes n messages {"n": i} to queue/partition.
func (h *harness) pushN(queue, partition string, n int) []obj {
	h.t.Helper()
	items := make([]obj, n)
	for i := range items {
		items[i] = obj{"queue": queue, "partition": partition, "payload": obj{"n": i}}
	}
	return h.push(items...)
}

// pop pops (path after /api/v1/pop/queue/) and returns the answer, nil on 204.
func (h *harness) pop(pathQuery string) obj {
	h.t.Helper()
	code, b := h.do("GET", "/api/v1/pop/queue/"+pathQuery, nil)
	switch code {
	case 204:
		return nil
	case 200:
		var out obj
		if err := json.Unmarshal(b, &out); err != nil {
			h.t.Fatalf("pop: decoding %s: %v", b, err)
		}
		return out
	}
	h.t.Fatalf("pop %s: status %d: %s", pathQuery, code, b)
	return nil
}

func msgsOf(pop obj) []obj {
	if pop == nil {
		return nil
	}
	var out []obj
	for _, m := range pop["messages"].([]any) {
		out = append(out, m.(obj))
	}
	return out
}

// ackOf builds a batch-ack item for a popped message.
func ackOf(m obj, status string) obj {
	return obj{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"], "status": status}
}

// ackBatch acks and returns the per-item results.
func (h *harness) ackBatch(group string, acks ...obj) []obj {
	h.t.Helper()
	var res []obj
	h.call("POST", "/api/v1/ack/batch", obj{"consumerGroup": group, "acknowledgments": acks}, 200, &res)
	return res
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
