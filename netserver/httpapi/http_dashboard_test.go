package httpapi_test

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/netserver/httpapi"
)

// The page and its files are served at / and /dashboard/, with caching and
// security headers; other paths keep answering 404.
func TestDashboardFiles(t *testing.T) {
	h := newHarness(t)
	get := func(path string, hdr map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", h.url+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	r := get("/", nil)
	body, _ := io.ReadAll(r.Body)
	if r.StatusCode != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(body), "dashboard/app.js") {
		t.Fatalf("GET /: %d %s %.80s", r.StatusCode, r.Header.Get("Content-Type"), body)
	}
	if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
	etag := r.Header.Get("ETag")
	if r := get("/", map[string]string{"If-None-Match": etag}); r.StatusCode != http.StatusNotModified {
		t.Errorf("conditional GET /: %d", r.StatusCode)
	}
	r = get("/dashboard/live.js", map[string]string{"Accept-Encoding": "gzip"})
	if r.StatusCode != 200 || r.Header.Get("Content-Encoding") != "gzip" || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/javascript") {
		t.Fatalf("GET live.js: %d %q %q", r.StatusCode, r.Header.Get("Content-Encoding"), r.Header.Get("Content-Type"))
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := io.ReadAll(zr)
	if !strings.Contains(string(js), "api/v1/dashboard/system") {
		t.Error("live.js does not read the system feed")
	}
	for _, p := range []string{"/dashboard/nope.js", "/dashboard/", "/api/v1/nope", "/index.htm"} {
		if r := get(p, nil); r.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 404", p, r.StatusCode)
		}
	}
	if code, _ := h.do("POST", "/", "{}"); code != 404 {
		t.Errorf("POST /: %d, want 404", code)
	}
}

// With auth on, the page is public and its feeds are not.
func TestDashboardAuthLevels(t *testing.T) {
	h := newHarness(t, func(c *httpapi.Config, _ *engineConfig) {
		c.Auth = netserver.AuthConfig{Enabled: true, Algorithm: "HS256", Secret: []byte("s3cret")}
	})
	if code, _ := h.do("GET", "/", nil); code != 200 {
		t.Errorf("GET / with auth on: %d, want 200", code)
	}
	if code, _ := h.do("GET", "/dashboard/app.css", nil); code != 200 {
		t.Errorf("GET app.css with auth on: %d, want 200", code)
	}
	for _, p := range []string{"/api/v1/dashboard/system", "/api/v1/dashboard/queues", "/api/v1/dashboard/queues/q",
		"/api/v1/dashboard/messages?transactionId=t"} {
		if code, _ := h.do("GET", p, nil); code != 401 {
			t.Errorf("GET %s without a token: %d, want 401", p, code)
		}
	}
}

// The feeds report what the engine holds (configure makes a Default
// partition besides a and b).
func TestDashboardFeeds(t *testing.T) {
	h := newDoorHarness(t) // without JournalStats, which a broker wires
	h.call("POST", "/api/v1/configure", obj{"queue": "orders", "options": obj{"leaseTime": 60, "retryLimit": 1, "maxSize": 500}}, 200, nil)
	h.pushN("orders", "a", 5)
	h.pushN("orders", "b", 3)
	ms := msgsOf(h.pop("orders/partition/a?consumerGroup=g&batch=2"))
	if len(ms) != 2 {
		t.Fatalf("popped %d", len(ms))
	}
	h.ackBatch("g", ackOf(ms[0], "completed"))
	ms = msgsOf(h.pop("orders/partition/b?batch=1"))
	h.ackBatch("__QUEUE_MODE__", obj{"transactionId": ms[0]["transactionId"], "partitionId": ms[0]["partitionId"],
		"leaseId": ms[0]["leaseId"], "status": "dlq", "error": "bad"})

	var sys obj
	h.call("GET", "/api/v1/dashboard/system", nil, 200, &sys)
	if sys["queues"] != 1.0 || sys["partitions"] != 3.0 || sys["groups"] != 2.0 {
		t.Errorf("system: queues %v partitions %v groups %v", sys["queues"], sys["partitions"], sys["groups"])
	}
	if c := sys["counters"].(obj); c["pushed"] != 8.0 {
		t.Errorf("pushed %v, want 8", c["pushed"])
	}
	if m := sys["messages"].(obj); m["deadLetter"] != 1.0 || m["total"] != 8.0 {
		t.Errorf("messages %v", m)
	}
	f := sys["features"].(obj)
	if f["dlqRedrive"] != true || f["dlqPurge"] != true || f["auth"] != false {
		t.Errorf("features %v", f)
	}
	if sys["journal"] != nil {
		t.Errorf("journal figures without JournalStats: %v", sys["journal"])
	}

	var qs struct{ Queues []obj }
	h.call("GET", "/api/v1/dashboard/queues", nil, 200, &qs)
	if len(qs.Queues) != 1 || qs.Queues[0]["deadLetters"] != 1.0 {
		t.Fatalf("queues %v", qs.Queues)
	}
	o := qs.Queues[0]["options"].(obj)
	if o["leaseTimeSeconds"] != 60.0 || o["retryLimit"] != 1.0 || o["maxSize"] != 500.0 {
		t.Errorf("options %v", o)
	}
	lag := map[string]float64{}
	for _, g := range qs.Queues[0]["groups"].([]any) {
		lag[g.(obj)["name"].(string)] = g.(obj)["offsetLag"].(float64)
	}
	// g: 4 left on a, 3 on b; queue mode: 5 on a, 2 on b (one dead-lettered).
	if lag["g"] != 7 || lag["__QUEUE_MODE__"] != 7 {
		t.Errorf("lag %v", lag)
	}

	var q obj
	h.call("GET", "/api/v1/dashboard/queues/orders?messages=4", nil, 200, &q)
	newest := q["newest"].([]any)
	if len(newest) != 4 {
		t.Fatalf("newest: %d messages, want 4", len(newest))
	}
	if first := newest[0].(obj); first["partition"] != "b" || first["offset"] != 2.0 || first["preview"] != `{"n":2}` {
		t.Errorf("newest first %v", first)
	}
	var leased bool
	for _, p := range q["partitions"].([]any) {
		p := p.(obj)
		for _, c := range p["cursors"].([]any) {
			c := c.(obj)
			if p["name"] == "a" && c["group"] == "g" {
				leased = c["lease"] != nil
				if c["cursor"] != 1.0 || c["offsetLag"] != 4.0 {
					t.Errorf("g on a: %v", c)
				}
			}
		}
	}
	if !leased {
		t.Error("g's lease on a not reported")
	}
	h.call("GET", "/api/v1/dashboard/queues/nope", nil, 404, nil)
	h.call("GET", "/api/v1/dashboard/queues/__regent_traces", nil, 404, nil)
}

// The message finder: every message of a partition pushed in many records
// (so that the search by time has records to tell apart) is found at its
// offset, as the queue feed lists it; by transaction id in each partition
// that holds it, or in the one named; by message id; and what is not there
// answers 404, a request that names too little 400.
func TestDashboardFind(t *testing.T) {
	h := newDoorHarness(t)
	for i := range 40 {
		items := []obj{{"queue": "orders", "partition": "a", "transactionId": fmt.Sprintf("t-%02d", i), "payload": obj{"n": i}}}
		if i%3 == 0 {
			items = append(items, obj{"queue": "orders", "partition": "a", "transactionId": fmt.Sprintf("u-%02d", i), "payload": obj{"n": i}})
		}
		h.push(items...)
	}
	h.push(obj{"queue": "orders", "partition": "b", "transactionId": "t-07", "payload": obj{"n": "b"}})
	var q obj
	h.call("GET", "/api/v1/dashboard/queues/orders?messages=200", nil, 200, &q)
	newest := q["newest"].([]any)
	if len(newest) != 55 {
		t.Fatalf("the queue feed lists %d messages, want 55", len(newest))
	}
	type found struct {
		Messages []obj
		Complete bool
	}
	inA := 0
	for _, m := range newest {
		m := m.(obj)
		if m["partition"] == "a" {
			inA++
		}
		var f found
		h.call("GET", fmt.Sprintf("/api/v1/dashboard/messages?queue=orders&partition=%s&offset=%v", m["partition"], m["offset"]), nil, 200, &f)
		if len(f.Messages) != 1 || f.Messages[0]["transactionId"] != m["transactionId"] || f.Messages[0]["id"] != m["id"] ||
			f.Messages[0]["offset"] != m["offset"] || f.Messages[0]["partitionId"] != m["partitionId"] {
			t.Errorf("at %s/%v: found %v, want %v", m["partition"], m["offset"], f.Messages, m)
		}
	}
	var f found
	h.call("GET", "/api/v1/dashboard/messages?transactionId=t-07", nil, 200, &f)
	if len(f.Messages) != 2 || !f.Complete {
		t.Errorf("t-07 found %d times (complete %v), want in a and b", len(f.Messages), f.Complete)
	}
	h.call("GET", "/api/v1/dashboard/messages?transactionId=t-07&queue=orders&partition=b", nil, 200, &f)
	if len(f.Messages) != 1 || f.Messages[0]["partition"] != "b" {
		t.Errorf("t-07 in b: %v", f.Messages)
	}
	id := newest[0].(obj)["id"].(string)
	h.call("GET", "/api/v1/dashboard/messages?transactionId="+id, nil, 200, &f)
	if len(f.Messages) != 1 || f.Messages[0]["id"] != id {
		t.Errorf("by message id %s: %v", id, f.Messages)
	}
	for _, c := range []struct {
		query string
		code  int
		err   string
	}{
		{fmt.Sprintf("queue=orders&partition=a&offset=%d", inA), 404, "Message not found"},
		{"queue=orders&partition=b&offset=1", 404, "Message not found"},
		{"queue=orders&partition=c&offset=0", 404, "Partition not found"},
		{"queue=nope&partition=a&offset=0", 404, "Queue not found"},
		{"queue=__regent_traces&transactionId=x", 404, "Queue not found"},
		{"transactionId=nope", 404, "Message not found"},
		{"queue=orders&partition=a&offset=x", 400, "offset"},
		{"queue=orders&offset=1", 400, "offset"},
		{"queue=orders", 400, "transactionId"},
	} {
		code, body := h.do("GET", "/api/v1/dashboard/messages?"+c.query, nil)
		if code != c.code || !strings.Contains(string(body), c.err) {
			t.Errorf("?%s: %d %s, want %d with %q", c.query, code, body, c.code, c.err)
		}
	}
}

func TestHistQuantile(t *testing.T) {
	b := []float64{0.001, 0.01, 0.1}
	for _, c := range []struct {
		counts []uint64
		q      float64
		want   float64
	}{
		{[]uint64{0, 0, 0, 0}, 0.5, 0},
		{[]uint64{10, 0, 0, 0}, 0.99, 0.001},
		{[]uint64{90, 9, 1, 0}, 0.5, 0.001},
		{[]uint64{90, 9, 1, 0}, 0.99, 0.01},
		{[]uint64{0, 0, 0, 5}, 0.5, 0.1},
	} {
		if got := httpapi.HistQuantile(b, c.counts, c.q); got != c.want {
			t.Errorf("histQuantile(%v, %v) = %v, want %v", c.counts, c.q, got, c.want)
		}
	}
}
