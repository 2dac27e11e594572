package crash

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/regentmq/regent/client"
)

// httpCall sends a request to the HTTP door of a random broker of c and
// decodes the answer into out (when not nil); it returns the status.
func (c *cluster3) httpCall(t *testing.T, method, path string, body any, out any) int {
	t.Helper()
	return httpCallAt(t, c.brokers[c.rng.IntN(len(c.brokers))], method, path, body, out)
}

// httpCallAt is httpCall at broker b.
func httpCallAt(t *testing.T, b *broker, method, path string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, "http://"+b.httpAddr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s on %s: %v", method, path, b.name(), err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && len(data) > 0 && resp.StatusCode < 300 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s on %s: %d %s: %v", method, path, b.name(), resp.StatusCode, data, err)
		}
	}
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusNoContent {
		t.Logf("%s %s on %s: %d %s", method, path, b.name(), resp.StatusCode, data)
	}
	return resp.StatusCode
}

type obj = map[string]any

// httpPop pops through a random broker: a named partition, or any.
func (c *cluster3) httpPop(t *testing.T, queue, partition, group string, batch int, wait bool) []obj {
	t.Helper()
	path := "/api/v1/pop/queue/" + url.PathEscape(queue)
	if partition != "" {
		path += "/partition/" + url.PathEscape(partition)
	}
	path += fmt.Sprintf("?consumerGroup=%s&batch=%d&wait=%v&timeout=2000", url.QueryEscape(group), batch, wait)
	var ans struct {
		Messages []obj `json:"messages"`
	}
	switch code := c.httpCall(t, "GET", path, nil, &ans); code {
	case http.StatusOK:
		return ans.Messages
	case http.StatusNoContent:
		return nil
	default:
		t.Fatalf("pop %s: %d", path, code)
		return nil
	}
}

// httpAck acks one popped message through a random broker and returns
// Queen's answer for it.
func (c *cluster3) httpAck(t *testing.T, m obj, group, status, errText string) obj {
	t.Helper()
	var res []obj
	body := obj{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"],
		"status": status, "consumerGroup": group}
	if errText != "" {
		body["error"] = errText
	}
	if code := c.httpCall(t, "POST", "/api/v1/ack", body, &res); code != http.StatusOK || len(res) != 1 {
		t.Fatalf("ack %v: %d %v", m["transactionId"], code, res)
	}
	return res[0]
}

// TestClusterSemanticsHTTP runs SEMANTICS.md's scenarios against three
// broker processes of one cluster through Queen's HTTP API, each request
// sent to the HTTP door of a random broker (which forwards it to the
// partition's owner): configure, deduplicated pushes, one lease per group
// and partition, the four acks, lease extension, independent groups, pops
// of any partition, and a transaction.
func TestClusterSemanticsHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	semanticsHTTP(t, startCluster3(t))
}

// TestReplicatedSemanticsHTTP runs the same scenarios on three brokers
// whose every shard has three replicas, once each shard's lead has
// settled (a first leader hands the lead to its preferred broker about
// 3 s after it took it): every request through a random broker's HTTP
// bridge, which forwards it to the shard's leader.
func TestReplicatedSemanticsHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	c := startCluster3Of(t, 3)
	c.waitLeadersSettled(t)
	semanticsHTTP(t, c)
}

// waitLeadersSettled waits until the map names a leader for every shard
// and the leaders have not moved for 4 s (at most 30 s).
func (c *cluster3) waitLeadersSettled(t *testing.T) {
	t.Helper()
	ctx := testContext(t, 45*time.Second)
	start := time.Now()
	var last []string
	moved := time.Now()
	for {
		m, err := c.clients[0].Cluster(ctx)
		if err == nil && len(m.Owners) > 0 && !slices.Contains(m.Owners, "") {
			if !slices.Equal(m.Owners, last) {
				last, moved = m.Owners, time.Now()
			}
			if time.Since(moved) >= 4*time.Second {
				return
			}
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("the shards' leaders did not settle in 30 s: %v %v", last, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startSettled starts three brokers whose every shard is on all three,
// waits until the leads have settled, and returns the cluster's map as b1
// sees it.
func startSettled(t *testing.T) (*cluster3, client.ClusterMap) {
	t.Helper()
	c := startCluster3Of(t, 3)
	c.waitLeadersSettled(t)
	m, err := c.clients[0].Cluster(testContext(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	return c, m
}

// semanticsHTTP is TestClusterSemanticsHTTP's scenarios on c.
func semanticsHTTP(t *testing.T, c *cluster3) {
	if code := c.httpCall(t, "POST", "/api/v1/configure", obj{"queue": "hq",
		"options": obj{"retryLimit": 1, "retryDelay": 50, "leaseTime": 2}}, nil); code != http.StatusOK {
		t.Fatalf("configure: %d", code)
	}
	const parts = 6
	for p := range parts {
		part := fmt.Sprintf("p%d", p)
		var first any
		for k := range 3 {
			var res []obj
			code := c.httpCall(t, "POST", "/api/v1/push", obj{"items": []obj{{"queue": "hq", "partition": part, "transactionId": "t-" + part, "payload": obj{"n": part + "-a"}}}}, &res)
			if code != http.StatusCreated && code != http.StatusOK || len(res) != 1 {
				t.Fatalf("push %s: %d %v", part, code, res)
			}
			if k == 0 {
				first = res[0]["messageId"]
			} else if res[0]["status"] != "duplicate" || res[0]["messageId"] != first {
				t.Fatalf("repeat %d of %s: %v, want a duplicate of %v", k, part, res[0], first)
			}
		}
		var res []obj
		if code := c.httpCall(t, "POST", "/api/v1/push", obj{"items": []obj{{"queue": "hq", "partition": part, "payload": obj{"n": part + "-b"}}}}, &res); code >= 300 {
			t.Fatalf("push: %d", code)
		}
		payload := func(m obj) string { return fmt.Sprint(m["data"].(map[string]any)["n"]) }
		// One lease per group and partition.
		ms := c.httpPop(t, "hq", part, "g1", 1, false)
		if len(ms) != 1 || payload(ms[0]) != part+"-a" {
			t.Fatalf("%s: first pop %v", part, ms)
		}
		if again := c.httpPop(t, "hq", part, "g1", 1, false); len(again) != 0 {
			t.Fatalf("%s: a second pop under a live lease got %v", part, again)
		}
		// The lease is extended through any broker.
		var ext []obj
		if code := c.httpCall(t, "POST", "/api/v1/lease/"+fmt.Sprint(ms[0]["leaseId"])+"/extend", obj{"seconds": 5}, &ext); code != http.StatusOK || len(ext) != 1 || ext[0]["success"] != true {
			t.Fatalf("%s: lease extend: %d %v", part, code, ext)
		}
		// failed: back after retryDelay with its retry spent.
		if r := c.httpAck(t, ms[0], "g1", "failed", "boom"); r["success"] != true {
			t.Fatalf("%s: failed ack: %v", part, r)
		}
		ms = c.httpPopWait(t, "hq", part, "g1")
		if payload(ms[0]) != part+"-a" || ms[0]["retryCount"] != 1.0 {
			t.Fatalf("%s: after failed: %v", part, ms[0])
		}
		// retry: back at once, no retry spent.
		if r := c.httpAck(t, ms[0], "g1", "retry", ""); r["success"] != true {
			t.Fatalf("%s: retry ack: %v", part, r)
		}
		ms = c.httpPopWait(t, "hq", part, "g1")
		if payload(ms[0]) != part+"-a" || ms[0]["retryCount"] != 1.0 {
			t.Fatalf("%s: after retry: %v", part, ms[0])
		}
		// dlq: filed at once; the next message follows.
		if r := c.httpAck(t, ms[0], "g1", "dlq", "bad "+part); r["success"] != true || r["dlq"] != true {
			t.Fatalf("%s: dlq ack: %v", part, r)
		}
		ms = c.httpPopWait(t, "hq", part, "g1")
		if payload(ms[0]) != part+"-b" {
			t.Fatalf("%s: after the dlq ack: %v", part, ms[0])
		}
		if r := c.httpAck(t, ms[0], "g1", "completed", ""); r["success"] != true {
			t.Fatalf("%s: completed ack: %v", part, r)
		}
		if left := c.httpPop(t, "hq", part, "g1", 10, false); len(left) != 0 {
			t.Fatalf("%s: a completed message came back: %v", part, left)
		}
		// Another group reads both from the start.
		if g2 := c.httpPop(t, "hq", part, "g2", 10, false); len(g2) != 2 {
			t.Fatalf("%s: group g2 read %v", part, g2)
		}
	}
	// Pops of any partition gather what every broker holds: two groups
	// more read all 12 messages, acked through random brokers.
	seen := map[string]int{}
	deadline := time.Now().Add(30 * time.Second)
	for len(seen) < 2*parts && time.Now().Before(deadline) {
		for _, m := range c.httpPop(t, "hq", "", "g3", 5, true) {
			seen[fmt.Sprint(m["transactionId"])]++
			if r := c.httpAck(t, m, "g3", "completed", ""); r["success"] != true {
				t.Fatalf("any-partition ack: %v", r)
			}
		}
	}
	if len(seen) != 2*parts {
		t.Fatalf("pops of any partition saw %d of %d messages: %v", len(seen), 2*parts, seen)
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%s delivered %d times", k, n)
		}
	}
	// A transaction within one partition: ack and push together.
	var res []obj
	c.httpCall(t, "POST", "/api/v1/push", obj{"items": []obj{{"queue": "hq", "partition": "tx", "payload": obj{"n": "job"}}}}, &res)
	ms := c.httpPop(t, "hq", "tx", "g4", 1, false)
	if len(ms) != 1 {
		t.Fatalf("tx pop: %v", ms)
	}
	var tr obj
	code := c.httpCall(t, "POST", "/api/v1/transaction", obj{"operations": []obj{
		{"type": "ack", "transactionId": ms[0]["transactionId"], "partitionId": ms[0]["partitionId"], "leaseId": ms[0]["leaseId"], "status": "completed", "consumerGroup": "g4"},
		{"type": "push", "items": []obj{{"queue": "hq", "partition": "tx", "payload": obj{"n": "result"}}}},
	}}, &tr)
	if code != http.StatusOK || tr["success"] != true {
		t.Fatalf("transaction: %d %v", code, tr)
	}
	if got := c.httpPop(t, "hq", "tx", "g5", 10, false); len(got) != 2 {
		t.Fatalf("partition tx holds %v, want the job and the result", got)
	}
}

// httpPopWait pops one message of a partition through random brokers until
// one comes (retry delays and lease expiry bring them back later).
func (c *cluster3) httpPopWait(t *testing.T, queue, partition, group string) []obj {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if ms := c.httpPop(t, queue, partition, group, 1, true); len(ms) > 0 {
			return ms
		}
	}
	t.Fatalf("%s/%s: nothing came back within 10 s", queue, partition)
	return nil
}

// TestReplicatedHTTPAcrossALeadersKill: Queen's clients on a replicated
// cluster lose nothing to a kill -9. Once the shards' leads have settled,
// 30 messages are pushed through the brokers' HTTP bridges; a broker
// leading a shard is killed while 60 more are pushed, one every 40 ms,
// through the other two: what is answered 503 or failed (a shard between
// two leaders) is sent again, as Queen's clients do, and deduplicated by
// its transactionId. Every message is then popped and acked once through
// the survivors, and nothing else comes.
func TestReplicatedHTTPAcrossALeadersKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	c, m := startSettled(t)
	victim := -1
	for i := range c.brokers {
		if slices.Contains(m.Owners, fmt.Sprintf("b%d", i+1)) {
			victim = i
			break
		}
	}
	if victim < 0 {
		t.Fatalf("no broker leads a shard: %v", m.Owners)
	}
	var alive []*broker
	for i, b := range c.brokers {
		if i != victim {
			alive = append(alive, b)
		}
	}
	const total = 90
	refused := 0
	push := func(k int, at *broker) {
		item := obj{"queue": "kq", "partition": fmt.Sprintf("p%d", k%8), "transactionId": fmt.Sprintf("k-%d", k), "payload": obj{"n": k}}
		deadline := time.Now().Add(30 * time.Second)
		for {
			var res []obj
			code := httpCallAt(t, at, "POST", "/api/v1/push", obj{"items": []obj{item}}, &res)
			if code == http.StatusCreated && len(res) == 1 && (res[0]["status"] == "queued" || res[0]["status"] == "duplicate") {
				return
			}
			if code != http.StatusServiceUnavailable && (code != http.StatusCreated || len(res) != 1 || res[0]["status"] != "failed") {
				t.Fatalf("push of k-%d: %d %v", k, code, res)
			}
			if time.Now().After(deadline) {
				t.Fatalf("push of k-%d not stored in 30 s: %d %v", k, code, res)
			}
			refused++
			time.Sleep(50 * time.Millisecond)
		}
	}
	for k := range 30 {
		push(k, c.brokers[k%3])
	}
	for k := 30; k < total; k++ {
		if k == 33 {
			c.brokers[victim].kill()
		}
		push(k, alive[k%2])
		time.Sleep(40 * time.Millisecond)
	}
	t.Logf("killed %s; pushes answered 503 or failed on the way, sent again: %d", c.brokers[victim].name(), refused)
	seen := map[string]int{}
	deadline := time.Now().Add(60 * time.Second)
	for p, k := 0, 0; p < 8; k++ {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages delivered in 60 s", len(seen), total)
		}
		var ans struct {
			Messages []obj `json:"messages"`
		}
		at := alive[k%2]
		code := httpCallAt(t, at, "GET", fmt.Sprintf("/api/v1/pop/queue/kq/partition/p%d?batch=100", p), nil, &ans)
		switch {
		case code == http.StatusServiceUnavailable:
			time.Sleep(50 * time.Millisecond)
			continue
		case code == http.StatusNoContent:
			p++
			continue
		case code != http.StatusOK:
			t.Fatalf("pop of p%d: %d", p, code)
		}
		var acks []obj
		for _, m := range ans.Messages {
			seen[fmt.Sprint(m["transactionId"])]++
			acks = append(acks, obj{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"], "status": "completed"})
		}
		var res []obj
		if code := httpCallAt(t, alive[(k+1)%2], "POST", "/api/v1/ack/batch", obj{"acknowledgments": acks}, &res); code != http.StatusOK || len(res) != len(acks) {
			t.Fatalf("ack of %d messages: %d %v", len(acks), code, res)
		}
	}
	for k := range total {
		if n := seen[fmt.Sprintf("k-%d", k)]; n != 1 {
			t.Fatalf("k-%d delivered %d times", k, n)
		}
	}
	if len(seen) != total {
		t.Fatalf("%d distinct messages delivered, want %d", len(seen), total)
	}
}

// TestReplicatedHTTPStoppedLeader: a push forwarded by a broker's HTTP
// bridge to a shard's leader that has just been stopped (SIGSTOP: its
// connections stay open, so nothing tells the bridge it is gone) is not
// held until the leader resumes: once the others have elected a new leader
// (an election timeout, 1 to 2 s), the bridge gives the call up and
// answers 503, the request's fate unknown (before, it waited there until
// the leader resumed). Sent again, the push is stored once, and the
// resumed broker stores nothing of it twice.
func TestReplicatedHTTPStoppedLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	c, m := startSettled(t)
	// A partition led by b1, pushed through b2.
	part := ""
	for i := 0; i < 1000 && part == ""; i++ {
		if p := fmt.Sprintf("p%d", i); m.Owners[m.ShardOf("sq", p)] == "b1" {
			part = p
		}
	}
	if part == "" {
		t.Fatalf("b1 leads no shard: %v", m.Owners)
	}
	item := obj{"queue": "sq", "partition": part, "transactionId": "stopped", "payload": obj{"n": 1}}
	leader, via := c.brokers[0], c.brokers[1]
	// A first push opens b2's link to b1: the next waits there.
	var warm []obj
	if code := httpCallAt(t, via, "POST", "/api/v1/push", obj{"items": []obj{{"queue": "sq", "partition": part, "transactionId": "warm", "payload": obj{"n": 0}}}}, &warm); code != http.StatusCreated {
		t.Fatalf("first push: %d %v", code, warm)
	}
	if err := leader.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			leader.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	defer resume()
	start := time.Now()
	var res []obj
	code := httpCallAt(t, via, "POST", "/api/v1/push", obj{"items": []obj{item}}, &res)
	took := time.Since(start)
	t.Logf("a push forwarded to the stopped leader answered %d after %v", code, took.Round(time.Millisecond))
	if took > 6*time.Second {
		t.Fatalf("the push waited %v at a stopped leader", took)
	}
	if code != http.StatusServiceUnavailable && (code != http.StatusCreated || len(res) != 1 || res[0]["status"] != "queued") {
		t.Fatalf("push: %d %v", code, res)
	}
	time.Sleep(time.Until(start.Add(8 * time.Second)))
	resume()
	for deadline := time.Now().Add(30 * time.Second); ; {
		res = nil
		code = httpCallAt(t, via, "POST", "/api/v1/push", obj{"items": []obj{item}}, &res)
		if code == http.StatusCreated && len(res) == 1 && (res[0]["status"] == "queued" || res[0]["status"] == "duplicate") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the push is not stored 30 s after the leader resumed: %d %v", code, res)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var got struct {
		Messages []obj `json:"messages"`
	}
	// Each attempt reads as a group of its own: a pop answered 503 may
	// have leased what it found (its answer lost on the way: CI once saw
	// b3's link to b2 closed under it while etcd re-elected), and a group
	// that tried before would find the partition leased.
	for attempt, deadline := 0, time.Now().Add(30*time.Second); ; attempt++ {
		got.Messages = nil
		code = httpCallAt(t, c.brokers[2], "GET", fmt.Sprintf("/api/v1/pop/queue/sq/partition/%s?batch=10&consumerGroup=audit-%d", part, attempt), nil, &got)
		if code == http.StatusOK || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code != http.StatusOK || len(got.Messages) != 2 || got.Messages[0]["transactionId"] != "warm" || got.Messages[1]["transactionId"] != "stopped" {
		t.Fatalf("partition %s holds %d %v, want the two pushes once each", part, code, got.Messages)
	}
}
