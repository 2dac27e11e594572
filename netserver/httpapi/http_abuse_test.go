package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
	"github.com/regentmq/regent/netserver/httpapi"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// bodyRoutes are the HTTP routes that decode a request body.
var bodyRoutes = []string{
	"/api/v1/push",
	"/api/v1/ack",
	"/api/v1/ack/batch",
	"/api/v1/transaction",
	"/api/v1/lease/00000000-0000-7000-8000-000000000001/extend",
	"/api/v1/configure",
	"/api/v1/dlq/redrive",
	"/api/v1/dlq/purge",
	"/api/v1/consumer-groups/g/subscription",
	"/api/v1/consumer-groups/g/queues/fuzz/seek",
	"/api/v1/consumer-groups/g/queues/fuzz/partitions/p/seek",
	"/api/v1/traces",
}

// FuzzHTTPBodies posts arbitrary bodies to every route that decodes one,
// on a real engine and journal: no handler panics, none answers 5xx, and
// every answer is JSON. (The engine keeps what the bodies push; its queues
// are dropped every few thousand inputs.)
func FuzzHTTPBodies(f *testing.F) {
	seeds := []string{
		`{"items":[{"queue":"fuzz","partition":"p","payload":{"a":1},"transactionId":"t1"}]}`,
		`{"transactionId":"t1","partitionId":"00000000-0000-7000-8000-000000000000","leaseId":"00000000-0000-7000-8000-000000000001","status":"completed","consumerGroup":"g"}`,
		`{"consumerGroup":"g","acknowledgments":[{"transactionId":"t1","partitionId":"00000000-0000-7000-8000-000000000000","status":"failed","error":"x"}]}`,
		`{"operations":[{"type":"ack","transactionId":"t","partitionId":"00000000-0000-7000-8000-000000000000","status":"completed"},{"type":"push","items":[{"queue":"fuzz","payload":1}]}],"requiredLeases":["00000000-0000-7000-8000-000000000001"]}`,
		`{"seconds":30}`,
		`{"queue":"fuzz","options":{"leaseTime":10,"retryLimit":2,"retryDelay":100,"maxSize":5,"encryptionEnabled":true}}`,
		`{"queue":"fuzz","consumerGroup":"g"}`,
		`{"subscriptionMode":"new"}`,
		`{"timestamp":"2026-01-01T00:00:00Z"}`,
		`{"toEnd":true}`,
		`{"transactionId":"t1","partitionId":"00000000-0000-7000-8000-000000000000","traceNames":["a","b"],"data":{"x":1}}`,
		``, `null`, `[]`, `{}`, `"x"`, `{"items":null}`, `{"items":[{}]}`,
	}
	for i, s := range seeds {
		for r := range bodyRoutes {
			if r == i%len(bodyRoutes) || len(s) < 8 {
				f.Add(uint8(r), []byte(s))
			}
		}
	}
	// The door's handler alone, over its own journal and engine, called in
	// process (httptest), not a broker behind a socket: fuzzing needs
	// thousands of inputs a second, and the handler is what it exercises.
	dir, err := os.MkdirTemp("", "regent-fuzz-http-")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { os.RemoveAll(dir) })
	j, err := log.Open(log.Config{Dir: dir, Sync: log.SyncNone, Logger: quietLog})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { j.Close() })
	e, err := engine.New(engine.Config{SnapshotEveryBytes: -1, MaxPayloadBytes: 4 << 10, Logger: quietLog}, j)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { e.Close() })
	hs, err := httpapi.New(httpapi.Config{MaxBodyBytes: 64 << 10, Logger: quietLog}, e)
	if err != nil {
		f.Fatal(err)
	}
	h := hs.Handler()
	n := 0
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		if n++; n%5000 == 0 {
			for _, q := range e.Queues() {
				e.DeleteQueue(context.Background(), q.Name)
			}
		}
		path := bodyRoutes[int(route)%len(bodyRoutes)]
		req := httptest.NewRequest("POST", path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("POST %s %q: %d %s", path, body, rec.Code, rec.Body.Bytes())
		}
		if out := rec.Body.Bytes(); len(out) > 0 && !json.Valid(out) {
			t.Fatalf("POST %s %q: answer is not JSON: %q", path, body, out)
		}
		if rec.Code != http.StatusOK && rec.Code != http.StatusCreated && rec.Code != http.StatusNoContent &&
			!bytes.Contains(rec.Body.Bytes(), []byte(`"error"`)) {
			t.Fatalf("POST %s %q: %d without an error text: %s", path, body, rec.Code, rec.Body.Bytes())
		}
	})
}
