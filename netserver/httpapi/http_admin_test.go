package httpapi_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/netserver/httpapi"
)

// configure echoes all 15 of Queen's options exactly as sent.
func TestHTTPConfigureEcho(t *testing.T) {
	h := newHarness(t)
	opts := obj{
		"leaseTime": 120.0, "retryLimit": 5.0, "retryDelay": 2500.0, "priority": 3.0, "delayedProcessing": 0.0,
		"windowBuffer": 0.0, "maxSize": 1000.0, "ttl": 7200.0, "retentionSeconds": 86400.0,
		"completedRetentionSeconds": 3600.0, "retentionEnabled": true, "encryptionEnabled": false,
		"deadLetterQueue": true, "dlqAfterMaxRetries": true, "maxWaitTimeSeconds": 600.0,
	}
	var res obj
	h.call("POST", "/api/v1/configure", obj{"queue": "orders", "namespace": "billing", "task": "invoice", "options": opts}, 200, &res)
	if res["configured"] != true || res["queue"] != "orders" || res["namespace"] != "billing" || res["task"] != "invoice" ||
		!uuidRE.MatchString(res["queueId"].(string)) || !uuidRE.MatchString(res["partitionId"].(string)) || res["queueId"] == res["partitionId"] {
		t.Errorf("configure answer %v", res)
	}
	var qr obj
	h.call("GET", "/api/v1/resources/queues/orders", nil, 200, &qr)
	if qr["id"] != res["queueId"] {
		t.Errorf("the queue's resource says id %v, configure said %v", qr["id"], res["queueId"])
	}
	if got := res["options"].(obj); !reflect.DeepEqual(got, opts) {
		t.Errorf("options echoed\n got %v\nwant %v", got, opts)
	}
	// Configure replaces every option: one left out goes back to its default.
	h.call("POST", "/api/v1/configure", obj{"queue": "orders", "options": obj{"retryLimit": 1}}, 200, &res)
	o := res["options"].(obj)
	if len(o) != 15 || o["retryLimit"] != 1.0 || o["leaseTime"] != 300.0 || o["retryDelay"] != 1000.0 || o["ttl"] != 3600.0 ||
		o["retentionEnabled"] != false || res["namespace"] != "" {
		t.Errorf("reconfigure answer %v", res)
	}
	// The Default partition exists and its id is stable.
	var q obj
	h.call("GET", "/api/v1/resources/queues/orders", nil, 200, &q)
	if parts := q["partitions"].([]any); len(parts) != 1 || parts[0].(obj)["id"] != res["partitionId"] || parts[0].(obj)["name"] != "Default" {
		t.Errorf("queue after configure: %v", q)
	}
	for body, want := range map[string]string{
		`{"options":{}}`: "queue is required",
		`{"queue":"q","options":{"leaseTime":-5}}`:      "leaseTime",
		`{"queue":"q","options":{"retryLimit":"many"}}`: "options.retryLimit must be a number",
		`{"queue":"a/b"}`:            "must not contain",
		`{"queue":"q","options":[]}`: "options must be an object",
		`not json`:                   "Invalid JSON",
	} {
		code, b := h.do("POST", "/api/v1/configure", body)
		if code != 400 || !strings.Contains(string(b), want) {
			t.Errorf("configure %s: %d %s, want 400 %q", body, code, b, want)
		}
	}
}

func TestHTTPDeleteQueue(t *testing.T) {
	h := newHarness(t)
	h.pushN("doomed", "Default", 2)
	var res obj
	h.call("DELETE", "/api/v1/resources/queues/doomed", nil, 200, &res)
	if res["deleted"] != true || res["existed"] != true || res["queue"] != "doomed" {
		t.Errorf("delete: %v", res)
	}
	h.call("DELETE", "/api/v1/resources/queues/doomed", nil, 200, &res)
	if res["existed"] != false {
		t.Errorf("second delete: %v", res)
	}
	if p := h.pop("doomed"); p != nil {
		t.Errorf("pop after delete: %v", p)
	}
	if code, _ := h.do("GET", "/api/v1/resources/queues/doomed", nil); code != 404 {
		t.Errorf("queue detail after delete: %d", code)
	}
}

func TestHTTPResources(t *testing.T) {
	h := newHarness(t)
	h.pushN("shop.orders", "p1", 3)
	h.pushN("shop.orders", "p2", 2)
	h.pushN("shop.refunds", "Default", 1)
	h.pushN("plain", "Default", 1)
	ms := msgsOf(h.pop("shop.orders/partition/p1?batch=2"))
	h.ackBatch("", ackOf(ms[0], "completed"))

	var qs struct {
		Queues []httpapi.QueueSummary `json:"queues"`
	}
	h.call("GET", "/api/v1/resources/queues", nil, 200, &qs)
	if len(qs.Queues) != 3 || qs.Queues[1].Name != "shop.orders" || qs.Queues[1].Partitions != 2 ||
		qs.Queues[1].Messages.Total != 5 || qs.Queues[1].Messages.Processing != 1 || qs.Queues[1].Messages.Pending != 3 ||
		qs.Queues[1].Namespace != "shop" || qs.Queues[1].Task != "orders" {
		t.Errorf("queues: %+v", qs)
	}
	var q struct {
		Name       string                    `json:"name"`
		Partitions []httpapi.PartitionDetail `json:"partitions"`
		Totals     httpapi.MsgCounts         `json:"totals"`
	}
	h.call("GET", "/api/v1/resources/queues/shop.orders", nil, 200, &q)
	if len(q.Partitions) != 2 || q.Partitions[0].Stats != (httpapi.MsgCounts{Total: 3, Pending: 1, Processing: 1, Completed: 1}) ||
		q.Totals.Total != 5 || q.Partitions[0].OldestMessage == nil {
		t.Errorf("queue detail: %+v", q)
	}
	if code, b := h.do("GET", "/api/v1/resources/queues/nope", nil); code != 404 || !strings.Contains(string(b), "Queue not found") {
		t.Errorf("unknown queue: %d %s", code, b)
	}
	var ns, ts obj
	h.call("GET", "/api/v1/resources/namespaces", nil, 200, &ns)
	if l := ns["namespaces"].([]any); len(l) != 1 || l[0].(obj)["namespace"] != "shop" || l[0].(obj)["queues"] != 2.0 || l[0].(obj)["partitions"] != 3.0 {
		t.Errorf("namespaces: %v", ns)
	}
	h.call("GET", "/api/v1/resources/tasks", nil, 200, &ts)
	if l := ts["tasks"].([]any); len(l) != 2 || l[0].(obj)["task"] != "orders" {
		t.Errorf("tasks: %v", ts)
	}
	var ov obj
	h.call("GET", "/api/v1/resources/overview", nil, 200, &ov)
	m := ov["messages"].(obj)
	if ov["queues"] != 3.0 || ov["partitions"] != 4.0 || ov["namespaces"] != 1.0 || ov["tasks"] != 2.0 || m["total"] != 7.0 || m["completed"] != 1.0 {
		t.Errorf("overview: %v", ov)
	}
	for _, k := range []string{"lag", "throughput", "timestamp", "statsAge"} {
		if _, ok := ov[k]; !ok {
			t.Errorf("overview lacks %s", k)
		}
	}
	var ok obj
	h.call("POST", "/api/v1/stats/refresh", nil, 200, &ok)
	if ok["success"] != true {
		t.Errorf("stats refresh: %v", ok)
	}
}

func TestHTTPMessages(t *testing.T) {
	h := newHarness(t)
	pushed := h.push(
		obj{"queue": "mq", "partition": "p", "payload": obj{"a": 1}, "transactionId": "t-a"},
		obj{"queue": "mq", "partition": "p", "payload": []int{1, 2}},
		obj{"queue": "mq", "partition": "p", "payload": "third"},
	)
	ms := msgsOf(h.pop("mq?consumerGroup=__QUEUE_MODE__&batch=2"))
	h.ackBatch("", ackOf(ms[0], "completed"))

	var list struct {
		Messages []obj `json:"messages"`
		Mode     obj   `json:"mode"`
	}
	h.call("GET", "/api/v1/messages?queue=mq", nil, 200, &list)
	if len(list.Messages) != 3 || list.Mode["type"] != "queue" || list.Mode["hasQueueMode"] != true {
		t.Fatalf("messages: %+v", list)
	}
	want := []string{"completed", "processing", "pending"}
	for i, m := range list.Messages {
		if m["status"] != want[i] || m["id"] != pushed[i]["message_id"] || m["queuePath"] != "mq/p" {
			t.Errorf("message %d: %v, want status %s", i, m, want[i])
		}
		if _, has := m["data"]; has {
			t.Errorf("the list carries payloads: %v", m)
		}
	}
	h.call("GET", "/api/v1/messages?queue=mq&status=pending", nil, 200, &list)
	if len(list.Messages) != 1 {
		t.Errorf("status filter: %v", list.Messages)
	}
	h.call("GET", "/api/v1/messages?queue=mq&limit=1&offset=1", nil, 200, &list)
	if len(list.Messages) != 1 || list.Messages[0]["id"] != pushed[1]["message_id"] {
		t.Errorf("paging: %v", list.Messages)
	}
	h.call("GET", "/api/v1/messages?queue=mq&from=2200-01-01T00:00:00Z", nil, 200, &list)
	if len(list.Messages) != 0 {
		t.Errorf("time window: %v", list.Messages)
	}
	// Detail, by transactionId and (for a message pushed without one) by id.
	pid := pushed[0]["partition_id"].(string)
	var d obj
	h.call("GET", "/api/v1/messages/"+pid+"/t-a", nil, 200, &d)
	if d["id"] != pushed[0]["message_id"] || d["status"] != "completed" || d["payload"].(obj)["a"] != 1.0 || d["queue"] != "mq" ||
		d["partition"] != "p" || d["queueConfig"].(obj)["retryLimit"] != 3.0 || len(d["consumerGroups"].([]any)) != 1 {
		t.Errorf("detail: %v", d)
	}
	h.call("GET", "/api/v1/messages/"+pid+"/"+pushed[1]["message_id"].(string), nil, 200, &d)
	if d["status"] != "processing" || d["leaseExpiresAt"] == nil {
		t.Errorf("detail by id: %v", d)
	}
	if code, _ := h.do("GET", "/api/v1/messages/"+pid+"/nope", nil); code != 404 {
		t.Errorf("unknown message: %d", code)
	}
	if code, _ := h.do("GET", "/api/v1/messages/not-a-uuid/t-a", nil); code != 404 {
		t.Errorf("malformed partition id: %d", code)
	}
	// Delete: not found as Queen answers it.
	h.call("DELETE", "/api/v1/messages/"+pid+"/nope", nil, 200, &d)
	if d["success"] != false || d["message"] != "Message not found" {
		t.Errorf("delete of a missing message: %v", d)
	}
	var sm obj
	h.call("GET", "/api/v1/status/queues/mq/messages?limit=2", nil, 200, &sm)
	if l := sm["messages"].([]any); len(l) != 2 || l[0].(obj)["status"] != "completed" {
		t.Errorf("status queue messages: %v", sm)
	}
	// An existing message is deleted: never delivered or found again.
	h.call("DELETE", "/api/v1/messages/"+pid+"/t-a", nil, 200, &d)
	if d["success"] != true || d["message"] != "Message deleted successfully" {
		t.Errorf("delete of a message: %v", d)
	}
	if code, _ := h.do("GET", "/api/v1/messages/"+pid+"/t-a", nil); code != 404 {
		t.Errorf("a deleted message is still found: %d", code)
	}
}

func TestHTTPConsumerGroups(t *testing.T) {
	h := newHarness(t)
	h.pushN("cg", "p1", 3)
	h.pushN("cg", "p2", 2)
	ms := msgsOf(h.pop("cg/partition/p1?consumerGroup=audit&batch=10"))
	h.ackBatch("audit", ackOf(ms[0], "completed"))

	var list []obj
	h.call("GET", "/api/v1/consumer-groups", nil, 200, &list)
	if len(list) != 1 || list[0]["name"] != "audit" || list[0]["queueName"] != "cg" || list[0]["members"] != 1.0 ||
		list[0]["state"] != "Stable" || list[0]["subscriptionMode"] != "all" {
		t.Fatalf("groups: %v", list)
	}
	var g obj
	h.call("GET", "/api/v1/consumer-groups/audit", nil, 200, &g)
	parts := g["cg"].(obj)["partitions"].([]any)
	if len(parts) != 2 || parts[0].(obj)["partition"] != "p1" || parts[0].(obj)["offsetLag"] != 2.0 || parts[0].(obj)["leaseActive"] != true ||
		parts[0].(obj)["totalConsumed"] != 1.0 || parts[1].(obj)["leaseActive"] != false {
		t.Errorf("group detail: %v", g)
	}
	// A group that never read is an empty object, as Queen answers it.
	if code, b := h.do("GET", "/api/v1/consumer-groups/nobody", nil); code != 200 || strings.TrimSpace(string(b)) != "{}" {
		t.Errorf("unknown group: %d %s, want 200 {}", code, b)
	}
	var lag []obj
	h.call("GET", "/api/v1/consumer-groups/lagging?minLagSeconds=0", nil, 200, &lag)
	if len(lag) != 2 || lag[0]["consumer_group"] != "audit" || lag[0]["offset_lag"] != 2.0 {
		t.Errorf("lagging: %v", lag)
	}
	h.call("GET", "/api/v1/consumer-groups/lagging", nil, 200, &lag)
	if len(lag) != 0 {
		t.Errorf("lagging over an hour: %v", lag)
	}

	// Seek to the end: nothing left for the group; a new push arrives.
	var sk, ps obj
	h.call("POST", "/api/v1/consumer-groups/audit/queues/cg/seek", obj{"toEnd": true}, 200, &sk)
	if sk["success"] != true || sk["seekToEnd"] != true || sk["partitionsUpdated"] != 2.0 {
		t.Errorf("seek: %v", sk)
	}
	if p := h.pop("cg?consumerGroup=audit&batch=10&partitions=5"); p != nil {
		t.Errorf("pop after seek to end: %v", p)
	}
	// The lease was released by the seek: acks under it are refused.
	if r := h.ackBatch("audit", ackOf(ms[1], "completed")); r[0]["success"] != false {
		t.Errorf("ack after seek: %v", r)
	}
	h.pushN("cg", "p1", 1)
	if ms := msgsOf(h.pop("cg?consumerGroup=audit&batch=10")); len(ms) != 1 || ms[0]["data"].(obj)["n"] != 0.0 {
		t.Errorf("pop after seek and push: %v", ms)
	}
	// Seek back to a timestamp before everything: all delivered again.
	h.call("POST", "/api/v1/consumer-groups/audit/queues/cg/seek", obj{"timestamp": "2000-01-01T00:00:00Z"}, 200, &sk)
	if sk["targetTimestamp"] != "2000-01-01T00:00:00.000000Z" {
		t.Errorf("seek to a time: %v", sk)
	}
	got := 0
	for p := h.pop("cg?consumerGroup=audit&batch=10&partitions=5"); p != nil; p = h.pop("cg?consumerGroup=audit&batch=10&partitions=5") {
		got += len(msgsOf(p))
	}
	if got != 6 {
		t.Errorf("after seeking to the past %d messages came back, want 6", got)
	}
	if code, b := h.do("POST", "/api/v1/consumer-groups/audit/queues/cg/seek", obj{}); code != 400 {
		t.Errorf("seek without a target: %d %s", code, b)
	}
	// A seek creates no group and no queue. A group that has never read
	// the queue, or a queue that does not exist, has no cursor to move: as
	// in Queen, success with nothing moved.
	for _, c := range []struct {
		queue string
		body  obj
	}{{"cg", obj{"toEnd": true}}, {"cg", obj{"timestamp": "2000-01-01T00:00:00Z"}}, {"typo", obj{"toEnd": true}}} {
		var res obj
		h.call("POST", "/api/v1/consumer-groups/other/queues/"+c.queue+"/seek", c.body, 200, &res)
		if res["success"] != true || res["partitionsUpdated"] != 0.0 || res["consumerGroup"] != "other" || res["queueName"] != c.queue ||
			res["seekToEnd"] != (c.body["toEnd"] == true) {
			t.Errorf("seek of %s %v by a group that never read it: %v", c.queue, c.body, res)
		}
	}
	h.call("POST", "/api/v1/consumer-groups/other/queues/cg/partitions/p2/seek", nil, 200, &ps)
	if ps["success"] != true || ps["updated"] != false || ps["partitionName"] != "p2" {
		t.Errorf("partition seek by a group that never read the queue: %v", ps)
	}
	for _, path := range []string{
		"/api/v1/consumer-groups/other/queues/cg/partitions/nope/seek",
		"/api/v1/consumer-groups/other/queues/typo/partitions/p2/seek",
	} {
		if code, b := h.do("POST", path, nil); code != 404 {
			t.Errorf("%s: %d %s, want 404", path, code, b)
		}
	}
	h.call("GET", "/api/v1/consumer-groups", nil, 200, &list)
	for _, g := range list {
		if g["name"] == "other" {
			t.Errorf("a seek created a group: %v", g)
		}
	}
	if code, _ := h.do("GET", "/api/v1/resources/queues/typo", nil); code != 404 {
		t.Errorf("a seek created a queue: %d", code)
	}
	// Partition seek, of a group that read the queue.
	h.pop("cg/partition/p1?consumerGroup=other")
	h.call("POST", "/api/v1/consumer-groups/other/queues/cg/partitions/p2/seek", nil, 200, &ps)
	if ps["success"] != true || ps["updated"] != true || ps["cursorMovedTo"] != 2.0 || ps["partitionName"] != "p2" {
		t.Errorf("partition seek: %v", ps)
	}
	if p := h.pop("cg/partition/p2?consumerGroup=other"); p != nil {
		t.Errorf("pop after partition seek: %v", p)
	}
	if code, _ := h.do("POST", "/api/v1/consumer-groups/other/queues/cg/partitions/nope/seek", nil); code != 404 {
		t.Errorf("seek of an unknown partition: %d", code)
	}

	// Delete the group: it is gone, and a group of that name starts over.
	var del obj
	h.call("DELETE", "/api/v1/consumer-groups/audit?deleteMetadata=true", nil, 200, &del)
	if del["success"] != true || del["consumerGroup"] != "audit" || del["deletedPartitions"] != 2.0 || del["metadataDeleted"] != true {
		t.Errorf("delete group: %v", del)
	}
	h.call("GET", "/api/v1/consumer-groups", nil, 200, &list)
	for _, g := range list {
		if g["name"] == "audit" {
			t.Errorf("deleted group listed: %v", g)
		}
	}
	if ms := msgsOf(h.pop("cg/partition/p1?consumerGroup=audit&batch=10")); len(ms) != 4 {
		t.Errorf("recreated group read %d messages, want 4", len(ms))
	}
	h.call("DELETE", "/api/v1/consumer-groups/other/queues/cg", nil, 200, &del)
	if del["queueName"] != "cg" || del["deletedPartitions"] != 2.0 {
		t.Errorf("delete group on a queue: %v", del)
	}
	// A queue that does not exist: Queen deletes no row and says so.
	h.call("DELETE", "/api/v1/consumer-groups/other/queues/nope?deleteMetadata=false", nil, 200, &del)
	if len(del) != 5 || del["success"] != true || del["consumerGroup"] != "other" || del["queueName"] != "nope" ||
		del["deletedPartitions"] != 0.0 || del["metadataDeleted"] != false {
		t.Errorf("delete group on an unknown queue: %v", del)
	}
	if code, _ := h.do("GET", "/api/v1/resources/queues/nope", nil); code != 404 {
		t.Errorf("deleting a group of an unknown queue created it: %d", code)
	}
}

// The subscription route moves a group's start forward to a timestamp on
// the partitions it is not processing, and leaves the leased ones alone.
func TestHTTPSubscription(t *testing.T) {
	h := newHarness(t)
	h.pushN("sub", "busy", 2)
	h.pushN("sub", "idle", 2)
	ms := msgsOf(h.pop("sub/partition/busy?consumerGroup=g"))
	var res obj
	h.call("POST", "/api/v1/consumer-groups/g/subscription", obj{"subscriptionTimestamp": "2200-01-01T00:00:00Z"}, 200, &res)
	if res["success"] != true || res["rowsUpdated"] != 1.0 || res["newTimestamp"] != "2200-01-01T00:00:00.000000Z" {
		t.Fatalf("subscription: %v", res)
	}
	if p := h.pop("sub/partition/idle?consumerGroup=g"); p != nil {
		t.Errorf("idle partition after moving the start: %v", p)
	}
	h.ackBatch("g", ackOf(ms[0], "completed"))
	if ms := msgsOf(h.pop("sub/partition/busy?consumerGroup=g")); len(ms) != 1 {
		t.Errorf("busy partition kept its cursor: %v", ms)
	}
	if code, _ := h.do("POST", "/api/v1/consumer-groups/g/subscription", obj{}); code != 400 {
		t.Errorf("subscription without a timestamp: %d", code)
	}
}

func TestHTTPTraces(t *testing.T) {
	h := newHarness(t)
	pushed := h.push(obj{"queue": "tr", "payload": obj{"x": 1}, "transactionId": "t1"})
	pid := pushed[0]["partition_id"].(string)
	var res obj
	h.call("POST", "/api/v1/traces", obj{"transactionId": "t1", "partitionId": pid, "data": obj{"step": "parsed"}, "traceNames": "order-42"}, 201, &res)
	if res["success"] != true || !uuidRE.MatchString(res["traceId"].(string)) {
		t.Fatalf("trace: %v", res)
	}
	h.call("POST", "/api/v1/traces", obj{"transactionId": "t1", "partitionId": pid, "data": obj{"step": "paid"}, "eventType": "step", "consumerGroup": "g", "traceNames": []string{"order-42", "vip"}}, 201, nil)
	if code, _ := h.do("POST", "/api/v1/traces", obj{"transactionId": "nope", "partitionId": pid, "data": 1}); code != 404 {
		t.Errorf("trace of a missing message: %d", code)
	}
	if code, _ := h.do("POST", "/api/v1/traces", obj{"transactionId": "t1"}); code != 400 {
		t.Errorf("trace without fields: %d", code)
	}
	var tr struct {
		Traces []obj `json:"traces"`
	}
	h.call("GET", "/api/v1/traces/"+pid+"/t1", nil, 200, &tr)
	if len(tr.Traces) != 2 || tr.Traces[0]["event_type"] != "info" || tr.Traces[1]["consumer_group"] != "g" ||
		tr.Traces[0]["data"].(obj)["step"] != "parsed" || len(tr.Traces[1]["trace_names"].([]any)) != 2 {
		t.Errorf("traces: %v", tr)
	}
	var byName obj
	h.call("GET", "/api/v1/traces/by-name/vip", nil, 200, &byName)
	if byName["total"] != 1.0 || byName["traces"].([]any)[0].(obj)["message_payload"].(obj)["x"] != 1.0 ||
		byName["traces"].([]any)[0].(obj)["queue_name"] != "tr" {
		t.Errorf("by name: %v", byName)
	}
	var names obj
	h.call("GET", "/api/v1/traces/names", nil, 200, &names)
	if names["total"] != 2.0 {
		t.Errorf("names: %v", names)
	}
	for _, n := range names["trace_names"].([]any) {
		if n.(obj)["trace_name"] == "order-42" && (n.(obj)["trace_count"] != 2.0 || n.(obj)["message_count"] != 1.0) {
			t.Errorf("order-42: %v", n)
		}
	}
	// The trace store is not listed as a queue.
	var qs obj
	h.call("GET", "/api/v1/resources/queues", nil, 200, &qs)
	if l := qs["queues"].([]any); len(l) != 1 {
		t.Errorf("queues: %v", l)
	}
}

func TestHTTPStatusRoutes(t *testing.T) {
	h := newHarness(t)
	h.pushN("st", "Default", 2)
	h.pop("st")
	var st obj
	h.call("GET", "/api/v1/status", nil, 200, &st)
	for _, k := range []string{"timeRange", "bucketMinutes", "pointCount", "throughput", "queues", "messages", "leases", "deadLetterQueue", "workers", "statsAge"} {
		if _, ok := st[k]; !ok {
			t.Errorf("status lacks %s: %v", k, st)
		}
	}
	if st["leases"].(obj)["active"] != 1.0 || st["messages"].(obj)["total"] != 2.0 {
		t.Errorf("status: %v", st)
	}
	h.call("GET", "/api/v1/status/queues?limit=10", nil, 200, &st)
	if l := st["queues"].([]any); len(l) != 1 || st["pagination"].(obj)["total"] != 1.0 {
		t.Errorf("status queues: %v", st)
	}
	h.call("GET", "/api/v1/status/queues/st", nil, 200, &st)
	if st["queue"].(obj)["name"] != "st" || len(st["partitions"].([]any)) != 1 || st["totals"].(obj)["processing"] != 1.0 {
		t.Errorf("status queue: %v", st)
	}
	h.call("GET", "/api/v1/status/analytics?interval=day", nil, 200, &st)
	if st["interval"] != "day" {
		t.Errorf("analytics: %v", st)
	}
	h.call("GET", "/api/v1/status/buffers", nil, 200, &st)
	if st["pending"] != 0.0 || st["dbHealthy"] != true {
		t.Errorf("buffers: %v", st)
	}
	if code, _ := h.do("GET", "/api/v1/status?from=garbage", nil); code != 400 {
		t.Errorf("bad from: %d", code)
	}
}

func TestHTTPHealthMetricsCORS(t *testing.T) {
	// On the door alone: its JournalStats is the test's, where a broker
	// wires its journal's.
	h := newDoorHarness(t, func(c *httpapi.Config, _ *engineConfig) {
		c.JournalStats = func() netserver.JournalStats {
			return netserver.JournalStats{Fsyncs: 3, FsyncNanosTotal: 3e6, FsyncBuckets: []time.Duration{time.Millisecond}, FsyncHistogram: []uint64{2, 1}, Entries: 2, Records: 10}
		}
	})
	var hl obj
	h.call("GET", "/health", nil, 200, &hl)
	if hl["status"] != "healthy" || hl["database"] != "connected" {
		t.Errorf("health: %v", hl)
	}
	h.pushN("mx", "Default", 3)
	h.pop("mx?consumerGroup=g")
	var mj obj
	h.call("GET", "/metrics", nil, 200, &mj)
	if mj["messages"].(obj)["total"] != 3.0 {
		t.Errorf("metrics json: %v", mj)
	}
	code, b := h.do("GET", "/metrics/prometheus", nil)
	text := string(b)
	for _, want := range []string{
		"regent_messages_pushed_total 3", "regent_messages_popped_total 1", `regent_queue_messages{queue="mx"} 3`,
		`regent_group_lag_messages{queue="mx",group="g"} 3`, `regent_dlq_depth{queue="mx"} 0`,
		`regent_journal_fsync_seconds_bucket{le="0.001"} 2`, `regent_journal_fsync_seconds_bucket{le="+Inf"} 3`,
		"regent_journal_records_per_batch 5", "regent_http_connections", "regent_push_messages_per_second", "go_goroutines",
		"regent_journal_read_errors_total 0",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("prometheus text lacks %q", want)
		}
	}
	if code != 200 {
		t.Errorf("prometheus: %d", code)
	}
	// CORS: preflight 204 and the headers on every answer.
	req, _ := http.NewRequest("OPTIONS", h.url+"/api/v1/push", nil)
	resp, err := h.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "*" ||
		resp.Header.Get("Access-Control-Allow-Methods") != "GET, POST, PUT, DELETE, OPTIONS" ||
		resp.Header.Get("Access-Control-Allow-Headers") != "Content-Type, Authorization" || resp.Header.Get("Access-Control-Max-Age") != "86400" {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	resp, err = h.c.Get(h.url + "/api/v1/resources/queues")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("answer headers: %v", resp.Header)
	}
	// Unknown routes: 404 with a JSON error.
	code, b = h.do("GET", "/api/v1/nope", nil)
	var e obj
	if code != 404 || json.Unmarshal(b, &e) != nil || e["error"] != "Not Found" {
		t.Errorf("unknown route: %d %s", code, b)
	}
	// After the engine closes, health says so.
	h.e.Close()
	h.call("GET", "/health", nil, 503, &hl)
	if hl["status"] != "unhealthy" {
		t.Errorf("health after close: %v", hl)
	}
}
