package httpapi_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/regentmq/regent/netserver/httpapi"
)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
var timeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)

func TestHTTPPushShape(t *testing.T) {
	h := newHarness(t)
	res := h.push(
		obj{"queue": "orders", "partition": "p1", "payload": obj{"a": 1}, "transactionId": "tx-1"},
		obj{"queue": "orders", "partition": "p1", "payload": obj{"a": 2}, "transactionId": "tx-1"}, // intra-batch duplicate
		obj{"queue": "orders", "payload": obj{"a": 3}, "traceId": "0190f1e2-7c3b-7d4e-8f90-123456789abc"},
		obj{"queue": "orders", "partition": "bad\x01name", "payload": 1}, // invalid: failed alone
		obj{"queue": "orders", "partition": "bad\x02name", "payload": 1, "transactionId": "tx-bad"},
	)
	q := res[0]
	for _, k := range []string{"index", "transaction_id", "status", "message_id", "partition_id", "trace_id", "queueName"} {
		if _, ok := q[k]; !ok {
			t.Errorf("queued result lacks %q: %v", k, q)
		}
	}
	if q["status"] != "queued" || q["transaction_id"] != "tx-1" || q["queueName"] != "orders" || q["index"] != 0.0 || q["trace_id"] != nil {
		t.Errorf("queued result %v", q)
	}
	if !uuidRE.MatchString(q["message_id"].(string)) || !uuidRE.MatchString(q["partition_id"].(string)) {
		t.Errorf("ids are not UUIDs: %v", q)
	}
	if id := q["message_id"].(string); id[14] != '7' {
		t.Errorf("message id %s is not a UUIDv7", id)
	}
	if d := res[1]; d["status"] != "duplicate" || d["message_id"] != q["message_id"] || d["index"] != 1.0 {
		t.Errorf("intra-batch duplicate %v (first %v)", d, q)
	}
	// No transactionId given: the message id is the transactionId.
	if r := res[2]; r["status"] != "queued" || r["transaction_id"] != r["message_id"] || r["trace_id"] != "0190f1e2-7c3b-7d4e-8f90-123456789abc" {
		t.Errorf("result without transactionId %v", r)
	}
	if r := res[3]; r["status"] != "failed" || r["error"] == nil || r["error"] == "" || r["transaction_id"] != nil {
		t.Errorf("invalid item %v", r)
	}
	// A failed item echoes the transactionId it was sent with, as Queen's
	// per-item results do ({"transaction_id","status":"failed","error"}).
	if r := res[4]; r["status"] != "failed" || r["transaction_id"] != "tx-bad" || r["error"] == nil || r["index"] != 4.0 || r["queueName"] != "orders" {
		t.Errorf("invalid item with a transactionId %v", r)
	}
	// A later push with the same transactionId on the same partition is a
	// duplicate naming the first message; on another partition it is not.
	again := h.push(
		obj{"queue": "orders", "partition": "p1", "payload": obj{}, "transactionId": "tx-1"},
		obj{"queue": "orders", "partition": "p2", "payload": obj{}, "transactionId": "tx-1"},
	)
	if again[0]["status"] != "duplicate" || again[0]["message_id"] != q["message_id"] {
		t.Errorf("duplicate %v", again[0])
	}
	if again[1]["status"] != "queued" {
		t.Errorf("same transactionId on another partition %v", again[1])
	}
	// Empty items: 201 [].
	code, b := h.do("POST", "/api/v1/push", `{"items":[]}`)
	if code != 201 || strings.TrimSpace(string(b)) != "[]" {
		t.Errorf("empty push: %d %s", code, b)
	}
}

func TestHTTPPushConcurrentDuplicates(t *testing.T) {
	h := newHarness(t)
	var wg sync.WaitGroup
	results := make([]obj, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, b := h.do("POST", "/api/v1/push", obj{"items": []obj{{"queue": "race", "payload": i, "transactionId": "same"}}})
			var res []obj
			if code != 201 || json.Unmarshal(b, &res) != nil {
				t.Errorf("push: %d %s", code, b)
				return
			}
			results[i] = res[0]
		}()
	}
	wg.Wait()
	queued, winner := 0, ""
	for _, r := range results {
		if r["status"] == "queued" {
			queued++
			winner = r["message_id"].(string)
		}
	}
	if queued != 1 {
		t.Fatalf("%d pushes queued, want exactly 1: %v", queued, results)
	}
	for _, r := range results {
		if r["message_id"] != winner {
			t.Errorf("result %v does not name the winner %s", r, winner)
		}
	}
}

func TestHTTPPushBadRequests(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		body string
		want string
	}{
		{``, "Empty request body"},
		{`{`, "Invalid JSON"},
		{`[]`, "Invalid JSON"},
		{`{"item":[]}`, "items array is required"},
		{`{"items":{}}`, "items array is required"},
		{`{"items":[{"payload":1}]}`, "Queue must be a string"},
		{`{"items":[{"queue":5}]}`, "Queue must be a string"},
		{`{"items":[{"queue":"q","partition":5}]}`, "Partition must be a string"},
		{`{"items":[{"queue":"q","transactionId":{}}]}`, "TransactionId must be a string"},
		{`{"items":[{"queue":"q","payload":{"a":}}]}`, "Invalid JSON"},
		{`{"items":[{"queue":"q"}]} x`, "Invalid JSON"},
		{`{"items":[{"queue":"q",}]}`, "Invalid JSON"},
	} {
		code, b := h.do("POST", "/api/v1/push", c.body)
		var e obj
		json.Unmarshal(b, &e)
		if code != 400 || !strings.Contains(e["error"].(string), c.want) {
			t.Errorf("push %q: %d %s, want 400 %q", c.body, code, b, c.want)
		}
	}
}

// Payloads of every JSON kind come back byte for byte, as sent.
func TestHTTPPayloadRoundTrip(t *testing.T) {
	h := newHarness(t)
	payloads := []string{`null`, `"a string"`, `[1, 2, {"x": [true]}]`, `42`, `-1.5e3`, `{ "spaced" : "kept",  "u": "\u00e9\n" }`, `true`, `{}`}
	var body bytes.Buffer
	body.WriteString(`{"items":[`)
	for i, p := range payloads {
		if i > 0 {
			body.WriteString(",")
		}
		body.WriteString(`{"queue":"kinds","payload":` + p + `}`)
	}
	body.WriteString(`]}`)
	if code, b := h.do("POST", "/api/v1/push", body.Bytes()); code != 201 {
		t.Fatalf("push: %d %s", code, b)
	}
	code, b := h.do("GET", "/api/v1/pop/queue/kinds?batch=100", nil)
	if code != 200 {
		t.Fatalf("pop: %d %s", code, b)
	}
	for _, p := range payloads {
		if !bytes.Contains(b, []byte(`"data":`+p+`,`)) {
			t.Errorf("payload %s did not come back as sent in %s", p, b)
		}
	}
	// A missing payload is {}.
	h.push(obj{"queue": "nopayload"})
	if m := msgsOf(h.pop("nopayload")); len(m) != 1 || len(m[0]["data"].(obj)) != 0 {
		t.Errorf("missing payload: %v", m)
	}
}

func TestHTTPBodyLimit(t *testing.T) {
	h := newHarness(t, func(c *httpapi.Config, _ *engineConfig) { c.MaxBodyBytes = 1024 })
	big := `{"items":[{"queue":"q","payload":"` + strings.Repeat("x", 2000) + `"}]}`
	code, b := h.do("POST", "/api/v1/push", big)
	if code != 413 || !strings.Contains(string(b), "limit") {
		t.Errorf("oversized body: %d %s", code, b)
	}
	// Without a Content-Length (chunked) the cap holds too.
	code, b = h.do("POST", "/api/v1/push", strings.NewReader(big))
	if code != 413 {
		t.Errorf("oversized chunked body: %d %s", code, b)
	}
	if code, b := h.do("POST", "/api/v1/push", `{"items":[{"queue":"q","payload":1}]}`); code != 201 {
		t.Errorf("small body: %d %s", code, b)
	}
}
