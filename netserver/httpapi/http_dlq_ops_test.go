package httpapi_test

import (
	"fmt"
	"testing"
)

// TestHTTPDLQRedriveAndPurge: entries listed with their entryId, redriven
// one by id (back at the end of the partition, with a redrive trace on the
// new message), the rest purged.
func TestHTTPDLQRedriveAndPurge(t *testing.T) {
	h := newHarness(t)
	h.pushN("orders", "p", 3)
	msgs := msgsOf(h.pop("orders?batch=3"))
	h.ackBatch("", ackOf(msgs[0], "dlq"), ackOf(msgs[1], "dlq"), ackOf(msgs[2], "dlq"))
	var list struct {
		Messages []obj `json:"messages"`
		Total    int   `json:"total"`
	}
	h.call("GET", "/api/v1/dlq?queue=orders", nil, 200, &list)
	if list.Total != 3 || list.Messages[0]["entryId"] == nil {
		t.Fatalf("dlq: %+v", list)
	}
	var red struct {
		Redriven int   `json:"redriven"`
		Messages []obj `json:"messages"`
	}
	h.call("POST", "/api/v1/dlq/redrive", obj{"queue": "orders", "ids": []any{list.Messages[1]["entryId"]}}, 200, &red)
	if red.Redriven != 1 {
		t.Fatalf("redrive: %+v", red)
	}
	back := msgsOf(h.pop("orders?batch=10"))
	if len(back) != 1 || fmt.Sprint(back[0]["data"]) != "map[n:1]" {
		t.Fatalf("redriven message: %+v", back)
	}
	var traces struct {
		Traces []obj `json:"traces"`
	}
	h.call("GET", fmt.Sprintf("/api/v1/traces/%s/%s", red.Messages[0]["partitionId"], red.Messages[0]["messageId"]), nil, 200, &traces)
	if len(traces.Traces) != 1 || traces.Traces[0]["event_type"] != "redrive" {
		t.Fatalf("redrive trace: %+v", traces)
	}
	var purged struct {
		Purged int `json:"purged"`
	}
	h.call("POST", "/api/v1/dlq/purge", obj{"queue": "orders"}, 200, &purged)
	h.call("GET", "/api/v1/dlq?queue=orders", nil, 200, &list)
	if purged.Purged != 2 || list.Total != 0 {
		t.Fatalf("purge: %d, left %d", purged.Purged, list.Total)
	}
	h.call("POST", "/api/v1/dlq/redrive", obj{"ids": []any{"not-a-uuid"}}, 400, nil)
}

// TestHTTPPopByNamespaceAndTask: GET /api/v1/pop?namespace=&task= reads the
// queues that carry them, higher priority first.
func TestHTTPPopByNamespaceAndTask(t *testing.T) {
	h := newHarness(t)
	h.call("POST", "/api/v1/configure", obj{"queue": "jobs-low", "namespace": "media", "task": "resize", "options": obj{"priority": 1}}, 200, nil)
	h.call("POST", "/api/v1/configure", obj{"queue": "jobs-high", "namespace": "media", "task": "resize", "options": obj{"priority": 5}}, 200, nil)
	h.push(obj{"queue": "jobs-low", "payload": "low"}, obj{"queue": "jobs-high", "payload": "high"})
	var out obj
	h.call("GET", "/api/v1/pop?namespace=media&task=resize&autoAck=true", nil, 200, &out)
	if got := msgsOf(out); len(got) != 1 || got[0]["data"] != "high" {
		t.Fatalf("first pop by labels: %v", out)
	}
	h.call("GET", "/api/v1/pop?namespace=media&task=resize&autoAck=true", nil, 200, &out)
	if got := msgsOf(out); len(got) != 1 || got[0]["data"] != "low" {
		t.Fatalf("second pop by labels: %v", out)
	}
	h.call("GET", "/api/v1/pop", nil, 400, nil)
}
