package httpapi_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/engine"
)

// streamRegister registers a query over HTTP and returns the answer.
func (h *harness) streamRegister(name, hash string, reset any) obj {
	h.t.Helper()
	var res obj
	body := obj{"name": name, "source_queue": "src", "sink_queue": "sink", "config_hash": hash}
	if reset != nil {
		body["reset"] = reset
	}
	h.call("POST", "/streams/v1/queries", body, 200, &res)
	return res
}

func (h *harness) cycle(body obj) obj {
	h.t.Helper()
	var res obj
	h.call("POST", "/streams/v1/cycle", body, 200, &res)
	return res
}

func (h *harness) stateRows(body obj) []obj {
	h.t.Helper()
	var res obj
	h.call("POST", "/streams/v1/state/get", body, 200, &res)
	if res["success"] != true {
		h.t.Fatalf("state/get: %v", res)
	}
	var rows []obj
	for _, r := range res["rows"].([]any) {
		rows = append(rows, r.(obj))
	}
	return rows
}

func keysOf(rows []obj) string {
	var ks []string
	for _, r := range rows {
		ks = append(ks, r["key"].(string))
	}
	return strings.Join(ks, ",")
}

// TestStreamsRegistrationMatrix: fresh, the same hash (state kept, reset
// or not), another hash refused with Queen's 200 success:false, then reset
// (state wiped, id kept); and the route's 400s.
func TestStreamsRegistrationMatrix(t *testing.T) {
	h := newHarness(t)
	r := h.streamRegister("q", "h1", false)
	if r["success"] != true || r["fresh"] != true || r["reset"] != false || r["name"] != "q" || r["config_hash"] != "h1" || !uuidRE.MatchString(r["query_id"].(string)) {
		t.Fatalf("fresh: %v", r)
	}
	id := r["query_id"]
	part := "11111111-1111-4111-8111-111111111111"
	if c := h.cycle(obj{"query_id": id, "partition_id": part, "state_ops": []obj{{"type": "upsert", "key": "k", "value": obj{"n": 1}}}}); c["success"] != true || c["state_ops_applied"] != 1.0 || c["ack_result"] != nil {
		t.Fatalf("state-only cycle: %v", c)
	}
	for _, reset := range []any{nil, false, true} {
		r := h.streamRegister("q", "h1", reset)
		if r["success"] != true || r["fresh"] != false || r["reset"] != false || r["query_id"] != id {
			t.Fatalf("same hash, reset %v: %v", reset, r)
		}
		if rows := h.stateRows(obj{"query_id": id, "partition_id": part}); len(rows) != 1 {
			t.Fatalf("same hash, reset %v: state %v", reset, rows)
		}
	}
	r = h.streamRegister("q", "h2", false)
	if r["success"] != false || r["query_id"] != id || !strings.Contains(r["error"].(string), "config_hash mismatch") || r["fresh"] != nil {
		t.Fatalf("mismatch: %v", r)
	}
	r = h.streamRegister("q", "h2", true)
	if r["success"] != true || r["fresh"] != false || r["reset"] != true || r["query_id"] != id || r["config_hash"] != "h2" {
		t.Fatalf("mismatch with reset: %v", r)
	}
	if rows := h.stateRows(obj{"query_id": id, "partition_id": part}); len(rows) != 0 {
		t.Fatalf("reset kept the state: %v", rows)
	}
	for _, c := range []struct {
		body any
		want string
	}{
		{"", "Empty request body"},
		{"{", "Invalid JSON"},
		{"[1]", "request body must be a JSON object"},
		{obj{"source_queue": "s", "config_hash": "h"}, "name is required"},
		{obj{"name": "", "source_queue": "s", "config_hash": "h"}, "name is required"},
		{obj{"name": "n", "config_hash": "h"}, "source_queue is required"},
		{obj{"name": "n", "source_queue": "s", "config_hash": 5}, "config_hash is required"},
		{obj{"name": "n", "source_queue": "s", "config_hash": "h", "reset": "yes"}, "reset must be a boolean"},
	} {
		code, b := h.do("POST", "/streams/v1/queries", c.body)
		if code != 400 || !strings.Contains(string(b), c.want) {
			t.Errorf("%v: %d %s, want 400 %q", c.body, code, b, c.want)
		}
	}
}

// TestStreamsCycleOverHTTP: the SDK's loop. A pop (group streams.q), a
// cycle with state, sink pushes and a partial ack that keeps the lease
// (release_lease false): the tail comes back in order after the lease
// expires; a cycle on the expired lease is rolled back whole (200,
// success false); null arrays and a null ack are taken; state/get filters.
func TestStreamsCycleOverHTTP(t *testing.T) {
	h := newHarness(t)
	h.call("POST", "/api/v1/configure", obj{"queue": "src", "options": obj{"leaseTime": 1}}, 200, nil)
	id := h.streamRegister("q", "h", false)["query_id"]
	h.pushN("src", "p", 5)
	p := h.pop("src/partition/p?consumerGroup=streams.q&batch=5")
	ms := msgsOf(p)
	if len(ms) != 5 {
		t.Fatalf("pop: %v", p)
	}
	part, lease := ms[0]["partitionId"], ms[0]["leaseId"]
	c := h.cycle(obj{"query_id": id, "partition_id": part, "consumer_group": "streams.q",
		"state_ops": []obj{
			{"type": "upsert", "key": "tumb:60\u001fa", "value": obj{"acc": 3, "windowStart": 0, "windowEnd": 60000}},
			{"type": "upsert", "key": "__wm__", "value": obj{"eventTimeMs": 5}},
			{"type": "upsert", "key": "empty"},
			{"type": "upsert", "key": "nothing", "value": nil},
			{"type": "delete", "key": "never-there"}},
		"push_items":    []obj{{"queue": "sink", "partition": "Default", "payload": obj{"sum": 3}}, {"queue": "sink", "payload": 7}},
		"ack":           obj{"transactionId": ms[2]["transactionId"], "leaseId": lease, "status": "completed", "count": 3},
		"release_lease": false})
	if c["success"] != true || c["state_ops_applied"] != 5.0 || c["queueName"] != "src" || c["partition_id"] != part {
		t.Fatalf("cycle: %v", c)
	}
	if a := c["ack_result"].(obj); a["success"] != true || a["count"] != 3.0 || a["lease_released"] != false || a["dlq"] != false {
		t.Fatalf("ack_result: %v", a)
	}
	prs := c["push_results"].([]any)
	if len(prs) != 2 || prs[0].(obj)["status"] != "queued" || prs[0].(obj)["index"] != 0.0 || prs[1].(obj)["queueName"] != "sink" ||
		!uuidRE.MatchString(prs[1].(obj)["message_id"].(string)) {
		t.Fatalf("push_results: %v", prs)
	}
	if got := msgsOf(h.pop("sink?batch=10&autoAck=true")); len(got) != 2 || fmt.Sprint(got[0]["data"]) != "map[sum:3]" || got[1]["data"] != 7.0 {
		t.Fatalf("sink: %v", got)
	}
	// The un-acked tail stays leased, then comes back in order.
	if got := h.pop("src/partition/p?consumerGroup=streams.q&batch=5"); got != nil {
		t.Fatalf("the tail came back while the lease was live: %v", got)
	}
	var again obj
	deadline := time.Now().Add(10 * time.Second)
	for again == nil && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		again = h.pop("src/partition/p?consumerGroup=streams.q&batch=5")
	}
	tail := msgsOf(again)
	if len(tail) != 2 || tail[0]["transactionId"] != ms[3]["transactionId"] || tail[1]["transactionId"] != ms[4]["transactionId"] {
		t.Fatalf("after the lease expired: %v", again)
	}
	// The old lease is gone: its cycle changes nothing.
	stale := h.cycle(obj{"query_id": id, "partition_id": part, "consumer_group": "streams.q",
		"state_ops":  []obj{{"type": "upsert", "key": "__wm__", "value": obj{"eventTimeMs": 99}}},
		"push_items": []obj{{"queue": "sink", "payload": "stale"}},
		"ack":        obj{"transactionId": ms[4]["transactionId"], "leaseId": lease}})
	if stale["success"] != false || stale["error"] != "Invalid or expired lease" || stale["ack_result"] != nil || len(stale["push_results"].([]any)) != 0 {
		t.Fatalf("stale cycle: %v", stale)
	}
	if got := h.pop("sink?batch=10&autoAck=true"); got != nil {
		t.Fatalf("a stale cycle pushed: %v", got)
	}
	// Null where the SDKs send it; the new lease's ack releases it.
	c = h.cycle(obj{"query_id": id, "partition_id": part, "consumer_group": "streams.q", "state_ops": nil, "push_items": nil,
		"ack": obj{"transactionId": tail[1]["transactionId"], "leaseId": tail[0]["leaseId"]}, "release_lease": nil})
	if c["success"] != true || c["ack_result"].(obj)["lease_released"] != true {
		t.Fatalf("null arrays: %v", c)
	}
	if c := h.cycle(obj{"query_id": id, "partition_id": part, "ack": nil}); c["success"] != true || c["ack_result"] != nil {
		t.Fatalf("ack null: %v", c)
	}
	if got := h.pop("src/partition/p?consumerGroup=streams.q&batch=5"); got != nil {
		t.Fatalf("acked messages came back: %v", got)
	}
	// State: as written, filtered.
	base := obj{"query_id": id, "partition_id": part}
	with := func(k string, v any) obj {
		o := obj{}
		for k, v := range base {
			o[k] = v
		}
		o[k] = v
		return o
	}
	rows := h.stateRows(with("keys", nil))
	if keysOf(rows) != "__wm__,empty,nothing,tumb:60\x1fa" {
		t.Fatalf("rows: %v", rows)
	}
	if rows[0]["value"].(obj)["eventTimeMs"] != 5.0 || len(rows[1]["value"].(obj)) != 0 || rows[2]["value"] != nil || rows[0]["updated_at"] == "" {
		t.Fatalf("values: %v", rows)
	}
	for _, c := range []struct {
		body obj
		want string
	}{
		{with("keys", []any{"empty", "missing", 5}), "empty"},
		{with("key_prefix", "tumb:60\u001f"), "tumb:60\x1fa"},
		{with("ripe_at_or_before", 60000), "tumb:60\x1fa"},
		{with("ripe_at_or_before", 59999), ""},
		{with("ripe_at_or_before", "60000"), "__wm__,empty,nothing,tumb:60\x1fa"}, // not a number: ignored
	} {
		if got := keysOf(h.stateRows(c.body)); got != c.want {
			t.Errorf("state/get %v: %q, want %q", c.body, got, c.want)
		}
	}
	// The cycle's own refusals: 200 with success false.
	for _, c := range []struct {
		body obj
		want string
	}{
		{obj{"query_id": id, "partition_id": part, "state_ops": []obj{{"type": "merge", "key": "k"}}}, "Unknown state_op type: merge"},
		{obj{"query_id": id, "partition_id": part, "ack": obj{"leaseId": lease}}, "ack.transactionId is required"},
		{obj{"query_id": id, "partition_id": part, "ack": obj{"transactionId": "t", "status": "maybe"}}, "Unknown ack.status: maybe"},
		{obj{"query_id": "not-a-uuid", "partition_id": part}, "invalid input syntax for type uuid"},
		{obj{"query_id": "22222222-2222-4222-8222-222222222222", "partition_id": part, "state_ops": []obj{{"type": "upsert", "key": "k"}}}, "query"},
	} {
		if got := h.cycle(c.body); got["success"] != false || !strings.Contains(got["error"].(string), c.want) {
			t.Errorf("cycle %v: %v, want success false and %q", c.body, got, c.want)
		}
	}
	for path, body := range map[string]obj{"/streams/v1/cycle": {"partition_id": part}, "/streams/v1/state/get": {"query_id": id}} {
		if code, b := h.do("POST", path, body); code != 400 || !strings.Contains(string(b), "is required") {
			t.Errorf("%s without an id: %d %s", path, code, b)
		}
	}
}

// TestStreamsSharedLeaseAcrossPartitions: a pop with partitions=N gives
// every partition the same lease id, and each partition's cycle acks and
// releases its own part of it.
func TestStreamsSharedLeaseAcrossPartitions(t *testing.T) {
	h := newHarness(t)
	id := h.streamRegister("multi", "h", false)["query_id"]
	for _, p := range []string{"a", "b", "c"} {
		h.pushN("src", p, 2)
	}
	ms := msgsOf(h.pop("src?consumerGroup=streams.multi&batch=10&partitions=3"))
	if len(ms) != 6 {
		t.Fatalf("pop over 3 partitions: %v", ms)
	}
	last := map[any]obj{}
	for _, m := range ms {
		if m["leaseId"] != ms[0]["leaseId"] {
			t.Fatalf("leases differ across partitions: %v and %v", m["leaseId"], ms[0]["leaseId"])
		}
		last[m["partitionId"]] = m
	}
	for part, m := range last {
		c := h.cycle(obj{"query_id": id, "partition_id": part, "consumer_group": "streams.multi",
			"state_ops": []obj{{"type": "upsert", "key": "n", "value": 2}},
			"ack":       obj{"transactionId": m["transactionId"], "leaseId": m["leaseId"], "count": 2}})
		if c["success"] != true {
			t.Fatalf("cycle of %v: %v", part, c)
		}
		if rows := h.stateRows(obj{"query_id": id, "partition_id": part}); len(rows) != 1 || rows[0]["value"] != 2.0 {
			t.Fatalf("shard %v: %v", part, rows)
		}
	}
	if got := h.pop("src?consumerGroup=streams.multi&batch=10&partitions=3"); got != nil {
		t.Fatalf("acked messages came back: %v", got)
	}
}

// TestStreamsSurviveRestartOverHTTP: registry and state are there after a
// restart of the broker on the same directory.
func TestStreamsSurviveRestartOverHTTP(t *testing.T) {
	dir := t.TempDir()
	h := harnessOn(t, dir, harnessEngine())
	id := h.streamRegister("keep", "h", false)["query_id"]
	part := "33333333-3333-4333-8333-333333333333"
	h.cycle(obj{"query_id": id, "partition_id": part, "state_ops": []obj{{"type": "upsert", "key": "k", "value": obj{"windowEnd": 5}}}})
	h.close()
	h = harnessOn(t, dir, engine.Config{Stripes: 8})
	if r := h.streamRegister("keep", "h", false); r["query_id"] != id || r["fresh"] != false {
		t.Fatalf("after restart: %v", r)
	}
	if rows := h.stateRows(obj{"query_id": id, "partition_id": part, "ripe_at_or_before": 5}); keysOf(rows) != "k" {
		t.Fatalf("state after restart: %v", rows)
	}
}
