package httpapi_test

import (
	"strings"
	"testing"
)

// A transaction as Queen's clients send it: acks without leaseId (the
// leases are listed in requiredLeases) and a push.
func TestHTTPTransactionCommit(t *testing.T) {
	h := newHarness(t)
	h.pushN("in", "Default", 1)
	p := h.pop("in?consumerGroup=g")
	m := msgsOf(p)[0]
	var res obj
	h.call("POST", "/api/v1/transaction", obj{
		"operations": []obj{
			{"type": "ack", "transactionId": m["transactionId"], "partitionId": m["partitionId"], "status": "completed", "consumerGroup": "g"},
			{"type": "push", "items": []obj{{"queue": "out", "partition": "p2", "payload": obj{"done": true}}, {"queue": "out", "data": 5}}},
		},
		"requiredLeases": []any{p["leaseId"]},
	}, 200, &res)
	if res["success"] != true || !uuidRE.MatchString(res["transactionId"].(string)) {
		t.Fatalf("transaction: %v", res)
	}
	rs := res["results"].([]any)
	if len(rs) != 3 {
		t.Fatalf("results: %v", rs)
	}
	if a := rs[0].(obj); a["type"] != "ack" || a["success"] != true || a["transactionId"] != m["transactionId"] || a["dlq"] != false {
		t.Errorf("ack result %v", a)
	}
	if pr := rs[1].(obj); pr["type"] != "push" || pr["success"] != true || pr["queueName"] != "out" || !uuidRE.MatchString(pr["messageId"].(string)) || pr["index"] != 1.0 {
		t.Errorf("push result %v", pr)
	}
	if ms := msgsOf(h.pop("out/partition/p2")); len(ms) != 1 || ms[0]["data"].(obj)["done"] != true {
		t.Errorf("pushed message: %v", ms)
	}
	if ms := msgsOf(h.pop("out")); len(ms) != 1 || ms[0]["data"] != 5.0 {
		t.Errorf("message pushed with data: %v", ms)
	}
	// The ack took effect: the group's cursor passed the message.
	if p := h.pop("in?consumerGroup=g"); p != nil {
		t.Errorf("acked input delivered again: %v", p)
	}
}

// One refused ack rolls the whole transaction back: no push, no ack.
func TestHTTPTransactionRollback(t *testing.T) {
	h := newHarness(t)
	h.pushN("in", "a", 1)
	h.pushN("in", "b", 1)
	pa := h.pop("in/partition/a?consumerGroup=g")
	pb := h.pop("in/partition/b?consumerGroup=g")
	ma, mb := msgsOf(pa)[0], msgsOf(pb)[0]
	var res obj
	h.call("POST", "/api/v1/transaction", obj{"operations": []obj{
		{"type": "ack", "transactionId": ma["transactionId"], "partitionId": ma["partitionId"], "leaseId": ma["leaseId"], "consumerGroup": "g"},
		{"type": "push", "items": []obj{{"queue": "out", "payload": 1}}},
		{"type": "ack", "transactionId": mb["transactionId"], "partitionId": mb["partitionId"], "leaseId": ma["leaseId"], "consumerGroup": "g"}, // wrong lease
	}}, 200, &res)
	if res["success"] != false || !strings.HasPrefix(res["error"].(string), "ACK operation failed") {
		t.Fatalf("transaction with a bad ack: %v", res)
	}
	if rs := res["results"].([]any); rs[2].(obj)["success"] != false || rs[0].(obj)["success"] != false {
		t.Errorf("results of a rolled back transaction: %v", rs)
	}
	if p := h.pop("out"); p != nil {
		t.Errorf("push of a rolled back transaction applied: %v", p)
	}
	// Nothing was acked: both leases still take their acks.
	r := h.ackBatch("g", ackOf(ma, "completed"), ackOf(mb, "completed"))
	if r[0]["success"] != true || r[1]["success"] != true {
		t.Errorf("acks after the rollback: %v", r)
	}
	// Client mistakes are 400; an unknown operation type is a failed
	// transaction.
	for body, want := range map[string]string{
		`{}`:                              "operations array required",
		`{"operations":[]}`:               "operations array cannot be empty",
		`{"operations":[{"type":"ack"}]}`: "needs transactionId and partitionId",
		`{"operations":`:                  "Invalid JSON",
	} {
		code, b := h.do("POST", "/api/v1/transaction", body)
		if code != 400 || !strings.Contains(string(b), want) {
			t.Errorf("transaction %s: %d %s", body, code, b)
		}
	}
	h.call("POST", "/api/v1/transaction", `{"operations":[{"type":"delete"}]}`, 200, &res)
	if res["success"] != false || !strings.Contains(res["error"].(string), "unknown operation type") {
		t.Errorf("unknown op: %v", res)
	}
}
