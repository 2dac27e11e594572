package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestStreamsSurviveKill9: a streams query's registration, its state and
// what its cycles pushed and acked are all there after `regent serve` is
// killed with SIGKILL and started again on the same directory: every cycle
// answered was durable (fsync before the answer), and none is applied
// twice.
func TestStreamsSurviveKill9(t *testing.T) {
	_, bin := buildRegent(t)
	data := t.TempDir()
	tcp, hp := freePort(t), freePort(t)
	srv := startServe(t, bin, data, tcp, hp)
	first := srv
	t.Cleanup(func() { first.Process.Kill(); first.Wait() }) // a failure before the kill leaves no broker behind
	base := "http://" + hp
	call := func(method, path string, body any) (int, map[string]any) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, base+path, rd)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		b, _ := io.ReadAll(resp.Body)
		if len(b) > 0 && b[0] == '{' && json.Unmarshal(b, &out) != nil {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return resp.StatusCode, out
	}
	_, reg := call("POST", "/streams/v1/queries", map[string]any{"name": "sum", "source_queue": "src", "sink_queue": "sink", "config_hash": "h1"})
	id := reg["query_id"]
	if reg["success"] != true || id == nil {
		t.Fatalf("register: %v", reg)
	}
	var items []map[string]any
	for i := 1; i <= 20; i++ {
		items = append(items, map[string]any{"queue": "src", "partition": "p", "payload": map[string]any{"v": i}})
	}
	if code, _ := call("POST", "/api/v1/push", map[string]any{"items": items}); code != 201 {
		t.Fatalf("push: %d", code)
	}
	// Four cycles of five: a running sum in the state, one sink message each.
	var part any
	sum := 0.0
	for round := 0; round < 4; round++ {
		code, p := call("GET", "/api/v1/pop/queue/src/partition/p?consumerGroup=streams.sum&batch=5", nil)
		if code != 200 {
			t.Fatalf("pop %d: %d", round, code)
		}
		ms := p["messages"].([]any)
		for _, m := range ms {
			sum += m.(map[string]any)["data"].(map[string]any)["v"].(float64)
		}
		last := ms[len(ms)-1].(map[string]any)
		part = last["partitionId"]
		_, c := call("POST", "/streams/v1/cycle", map[string]any{"query_id": id, "partition_id": part, "consumer_group": "streams.sum",
			"state_ops":  []any{map[string]any{"type": "upsert", "key": "sum", "value": map[string]any{"total": sum}}},
			"push_items": []any{map[string]any{"queue": "sink", "payload": map[string]any{"round": round, "total": sum}}},
			"ack":        map[string]any{"transactionId": last["transactionId"], "leaseId": last["leaseId"], "count": len(ms)}})
		if c["success"] != true {
			t.Fatalf("cycle %d: %v", round, c)
		}
	}
	// kill -9, then start again on the same directory.
	if err := srv.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	srv.Wait()
	srv = startServe(t, bin, data, tcp, hp)
	defer func() { srv.Process.Kill(); srv.Wait() }()

	if _, r := call("POST", "/streams/v1/queries", map[string]any{"name": "sum", "source_queue": "src", "config_hash": "h1"}); r["query_id"] != id || r["fresh"] != false {
		t.Fatalf("registration after kill -9: %v (want query %v, not fresh)", r, id)
	}
	_, st := call("POST", "/streams/v1/state/get", map[string]any{"query_id": id, "partition_id": part, "keys": nil})
	rows, _ := st["rows"].([]any)
	if len(rows) != 1 || rows[0].(map[string]any)["value"].(map[string]any)["total"] != 210.0 {
		t.Fatalf("state after kill -9: %v (want total 210)", st)
	}
	code, sink := call("GET", "/api/v1/pop/queue/sink?batch=10&autoAck=true", nil)
	if code != 200 || len(sink["messages"].([]any)) != 4 {
		t.Fatalf("sink after kill -9: %d %v (want the 4 cycles' messages)", code, sink)
	}
	for i, m := range sink["messages"].([]any) {
		if d := m.(map[string]any)["data"].(map[string]any); d["round"] != float64(i) {
			t.Fatalf("sink message %d after kill -9: %v", i, d)
		}
	}
	// The source group's cursor is past the 20 acked messages.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if code, p := call("GET", "/api/v1/pop/queue/src/partition/p?consumerGroup=streams.sum&batch=5", nil); code != 204 {
			t.Fatalf("acked source messages came back after kill -9: %d %s", code, fmt.Sprint(p))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
