package httpapi_test

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

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
	"github.com/regentmq/regent/netserver/httpapi"
)

// harness is a real broker (brokertest's: journal in a temporary directory,
// engine, both doors on 127.0.0.1:0) driven over its HTTP door like
// Queen's clients drive it; or, from newDoorHarness, the HTTP door alone.
type harness struct {
	t     *testing.T
	b     *broker.Broker // nil for newDoorHarness
	e     *engine.Engine
	s     *httpapi.Server // newDoorHarness's only: a broker does not lend its doors
	url   string
	c     *http.Client
	token string
	stop  func()
}

type engineConfig = engine.Config

// harnessOpt adjusts the HTTP door's configuration and the engine's.
type harnessOpt func(*httpapi.Config, *engineConfig)

// harnessEngine is the engine's configuration in every harness.
func harnessEngine() engineConfig {
	return engine.Config{Stripes: 8, TimerTick: 5 * time.Millisecond}
}

func newHarness(t *testing.T, opts ...harnessOpt) *harness {
	t.Helper()
	return newHarnessLog(t, log.Config{Sync: log.SyncNone}, opts...)
}

// newHarnessLog is newHarness with its journal configured by lc (its Dir
// is the test's unless set).
func newHarnessLog(t *testing.T, lc log.Config, opts ...harnessOpt) *harness {
	t.Helper()
	ec := harnessEngine()
	for _, o := range opts {
		o(&httpapi.Config{}, &ec)
	}
	b := brokertest.Start(t, broker.Options{Journal: lc, Engine: ec,
		TuneHTTP: func(c *httpapi.Config) {
			for _, o := range opts {
				o(c, &engineConfig{})
			}
		}})
	h := &harness{t: t, b: b, e: b.Engine(), url: "http://" + b.HTTPAddr().String(),
		c: &http.Client{Timeout: 30 * time.Second}}
	h.stop = func() {
		h.c.CloseIdleConnections()
		b.Exit()
	}
	// Before brokertest's Exit: a connection the client dialed and never
	// used (concurrent requests leave some) would hold the HTTP door's
	// shutdown for 5 s, as net/http counts it active.
	t.Cleanup(h.c.CloseIdleConnections)
	return h
}

// harnessOn is newHarness over the data directory dir, with ec.
func harnessOn(t *testing.T, dir string, ec engine.Config) *harness {
	t.Helper()
	return newHarnessLog(t, log.Config{Dir: dir, Sync: log.SyncNone}, func(_ *httpapi.Config, e *engineConfig) { *e = ec })
}

// newDoorHarness is the HTTP door alone over its own journal and engine,
// not a broker, for the tests that need the door itself: its unexported
// state (export_test.go takes the *httpapi.Server, which a broker does not
// lend) or a configuration a broker wires itself (TCPHealth).
func newDoorHarness(t *testing.T, opts ...harnessOpt) *harness {
	t.Helper()
	j, err := log.Open(log.Config{Dir: t.TempDir(), Sync: log.SyncNone})
	if err != nil {
		t.Fatalf("log.Open: %v", err)
	}
	hc := httpapi.Config{Addr: "127.0.0.1:0"}
	ec := harnessEngine()
	for _, o := range opts {
		o(&hc, &ec)
	}
	e, err := engine.New(ec, j)
	if err != nil {
		j.Close()
		t.Fatalf("engine.New: %v", err)
	}
	s, err := httpapi.New(hc, e)
	if err != nil {
		e.Close()
		j.Close()
		t.Fatalf("httpapi.New: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	go s.Serve(l)
	var stopped bool
	h := &harness{t: t, e: e, s: s, url: "http://" + l.Addr().String(), c: &http.Client{Timeout: 30 * time.Second}}
	h.stop = func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		e.Close()
		j.Close()
	}
	t.Cleanup(h.stop)
	return h
}

// close stops the broker (or the door, its engine and journal).
func (h *harness) close() { h.stop() }

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
