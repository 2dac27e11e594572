package httpapi_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver/httpapi"
)

// configure sets a queue's options through the HTTP route.
func (h *harness) configure(queue string, opts obj) {
	h.t.Helper()
	h.call("POST", "/api/v1/configure", obj{"queue": queue, "options": opts}, 200, nil)
}

// A batch ack of offsets 0-3 acked completed, failed, completed, completed:
// the cursor moves past 0 only; the failed ack releases the lease, so the
// acks after it are refused; 1, 2 and 3 come back, in order.
func TestHTTPBatchAckCursorRule(t *testing.T) {
	h := newHarness(t)
	h.configure("cr", obj{"retryDelay": 0})
	h.pushN("cr", "p", 4)
	ms := msgsOf(h.pop("cr/partition/p?batch=4&consumerGroup=g"))
	if len(ms) != 4 {
		t.Fatalf("pop: %v", ms)
	}
	res := h.ackBatch("g", ackOf(ms[0], "completed"), obj{
		"transactionId": ms[1]["transactionId"], "partitionId": ms[1]["partitionId"], "leaseId": ms[1]["leaseId"],
		"status": "failed", "error": "boom",
	}, ackOf(ms[2], "completed"), ackOf(ms[3], "completed"))
	want := []bool{true, true, false, false}
	for i, r := range res {
		if r["success"] != want[i] || r["index"] != float64(i) || r["transactionId"] != ms[i]["transactionId"] {
			t.Errorf("ack %d: %v, want success %v", i, r, want[i])
		}
		if !want[i] && (r["error"] == nil || !strings.Contains(r["error"].(string), "lease")) {
			t.Errorf("refused ack %d should say why: %v", i, r)
		}
	}
	if res[0]["queueName"] != "cr" || res[0]["partitionName"] != "p" || res[1]["leaseReleased"] != true || res[1]["dlq"] != false {
		t.Errorf("ack results %v", res)
	}
	var again []obj
	brokertest.CheckFor(t, 10*time.Second, func() error {
		again = msgsOf(h.pop("cr/partition/p?batch=10&consumerGroup=g"))
		if len(again) == 0 {
			return errors.New("still waiting for the failed message to come back")
		}
		return nil
	})
	if len(again) != 3 {
		t.Fatalf("redelivered %d messages, want 3: %v", len(again), again)
	}
	for i, m := range again {
		if m["id"] != ms[i+1]["id"] {
			t.Errorf("redelivery %d is %v, want %v", i, m["id"], ms[i+1]["id"])
		}
	}
	if again[0]["retryCount"] != 1.0 || again[1]["retryCount"] != 0.0 {
		t.Errorf("retry counts %v %v", again[0]["retryCount"], again[1]["retryCount"])
	}
	// Repeating an ack that took effect answers success again.
	if r := h.ackBatch("g", ackOf(ms[0], "completed")); r[0]["success"] != true {
		t.Errorf("repeated ack: %v", r)
	}
}

// Refused acks are HTTP 200 with success:false and the reason.
func TestHTTPRefusedAcks(t *testing.T) {
	h := newHarness(t)
	h.pushN("ra", "Default", 2)
	ms := msgsOf(h.pop("ra?batch=2"))
	// Without a leaseId on a server that checks leases.
	var res []obj
	h.call("POST", "/api/v1/ack", obj{"transactionId": ms[0]["transactionId"], "partitionId": ms[0]["partitionId"], "status": "completed"}, 200, &res)
	if len(res) != 1 || res[0]["success"] != false || !strings.Contains(res[0]["error"].(string), "leaseId") {
		t.Errorf("ack without a lease: %v", res)
	}
	// With a lease that is not the live one.
	bad := ackOf(ms[0], "completed")
	bad["leaseId"] = "01a237b8-c402-7000-b52f-fce67ae431d3"
	h.call("POST", "/api/v1/ack", bad, 200, &res)
	if res[0]["success"] != false || !strings.Contains(res[0]["error"].(string), "Invalid or expired lease") {
		t.Errorf("ack with a wrong lease: %v", res)
	}
	// Unknown partition, malformed ids, unknown status: per item, never a 4xx.
	res = h.ackBatch("",
		obj{"transactionId": "x", "partitionId": "6e565da3-4ce8-85bb-8000-000000000009", "leaseId": ms[0]["leaseId"]},
		obj{"transactionId": "x", "partitionId": "not-a-uuid"},
		obj{"transactionId": ms[0]["transactionId"], "partitionId": ms[0]["partitionId"], "leaseId": ms[0]["leaseId"], "status": "maybe"},
		ackOf(ms[0], "completed"),
	)
	for i, want := range []bool{false, false, false, true} {
		if res[i]["success"] != want {
			t.Errorf("batch item %d: %v", i, res[i])
		}
	}
	// The single ack route: a boolean status, and the one-element array.
	h.call("POST", "/api/v1/ack", obj{"transactionId": ms[1]["transactionId"], "partitionId": ms[1]["partitionId"], "leaseId": ms[1]["leaseId"], "status": true, "consumerGroup": "__QUEUE_MODE__"}, 200, &res)
	if len(res) != 1 || res[0]["success"] != true || res[0]["leaseReleased"] != true {
		t.Errorf("single ack: %v", res)
	}
	// Missing fields are the client's mistake: 400.
	for body, want := range map[string]string{
		`{"partitionId":"x"}`:                         "transactionId is required",
		`{"transactionId":"x"}`:                       "partitionId is required",
		`{"transactionId":"x","partitionId":`:         "Invalid JSON",
		`{"acknowledgments":[{"transactionId":"x"}]}`: "",
	} {
		path := "/api/v1/ack"
		if strings.Contains(body, "acknowledgments") {
			path = "/api/v1/ack/batch"
			want = "valid partitionId"
		}
		code, b := h.do("POST", path, body)
		if code != 400 || !strings.Contains(string(b), want) {
			t.Errorf("%s %s: %d %s, want 400 %q", path, body, code, b, want)
		}
	}
	if code, b := h.do("POST", "/api/v1/ack/batch", `{"consumerGroup":"g"}`); code != 400 || !strings.Contains(string(b), "acknowledgments array is required") {
		t.Errorf("batch without acknowledgments: %d %s", code, b)
	}
}

// With UncheckedAcks (Queen-compatible mode) an ack without a lease is
// accepted for a message in flight.
func TestHTTPUncheckedAcks(t *testing.T) {
	h := newHarness(t, func(_ *httpapi.Config, ec *engineConfig) { ec.UncheckedAcks = true })
	h.pushN("ua", "Default", 1)
	ms := msgsOf(h.pop("ua"))
	var res []obj
	h.call("POST", "/api/v1/ack", obj{"transactionId": ms[0]["transactionId"], "partitionId": ms[0]["partitionId"]}, 200, &res)
	if res[0]["success"] != true {
		t.Errorf("unchecked ack: %v", res)
	}
}

// Queen takes a lease-less ack for any message of its partition, whoever
// holds it (lib/schema/procedures/003_ack.sql and 004_transaction.sql check
// a lease only when one is named; requiredLeases is never read). With
// UncheckedAcks the three doors of acks agree on Queen's clients' case: a
// worker whose lease expired acks, lease-less, what another worker now
// holds; a transaction that lists the expired lease in requiredLeases (as
// Queen's TransactionBuilder does) goes through too. Checked (the default),
// each of them is refused and nothing changes.
func TestHTTPUncheckedAcksOfAnotherWorkersLease(t *testing.T) {
	for _, unchecked := range []bool{false, true} {
		clock := engine.NewFakeClock(time.Now())
		h := newHarness(t, func(_ *httpapi.Config, ec *engineConfig) { ec.Clock, ec.UncheckedAcks = clock, unchecked })
		h.configure("mig", obj{"leaseTime": 10})
		h.pushN("mig", "Default", 3)
		a := h.pop("mig?consumerGroup=g&batch=3") // worker A
		clock.Advance(11 * time.Second)           // A's lease runs out
		var b obj                                 // worker B
		brokertest.CheckFor(t, 10*time.Second, func() error {
			if b = h.pop("mig?consumerGroup=g&batch=3"); b == nil {
				return errors.New("worker A's lease has not expired yet")
			}
			return nil
		})
		am := msgsOf(a)
		lessOf := func(m obj) obj { // A's ack, without its (expired) lease
			return obj{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "consumerGroup": "g", "status": "completed"}
		}
		var one []obj
		h.call("POST", "/api/v1/ack", lessOf(am[0]), 200, &one)
		batch := h.ackBatch("g", lessOf(am[1]))
		var tx obj
		h.call("POST", "/api/v1/transaction", obj{
			"operations":     []obj{{"type": "ack", "transactionId": am[2]["transactionId"], "partitionId": am[2]["partitionId"], "consumerGroup": "g", "status": "completed"}, {"type": "push", "items": []obj{{"queue": "mig-out", "payload": 1}}}},
			"requiredLeases": []any{a["leaseId"]},
		}, 200, &tx)
		// A's own lease, named, is refused in both modes (as in Queen).
		named := h.ackBatch("g", ackOf(am[0], "completed"))
		if named[0]["success"] != false || !strings.Contains(named[0]["error"].(string), "Invalid or expired lease") {
			t.Errorf("unchecked=%v: an ack naming an expired lease: %v", unchecked, named)
		}
		if !unchecked {
			if one[0]["success"] != false || !strings.Contains(one[0]["error"].(string), "Lease required") ||
				batch[0]["success"] != false || !strings.Contains(batch[0]["error"].(string), "Lease required") {
				t.Errorf("checked: lease-less acks of another worker's messages: %v %v", one, batch)
			}
			if tx["success"] != false || !strings.Contains(tx["error"].(string), "Invalid or expired lease") {
				t.Errorf("checked: transaction under an expired requiredLease: %v", tx)
			}
			if r := h.ackBatch("g", ackOf(msgsOf(b)[0], "completed"), ackOf(msgsOf(b)[1], "completed"), ackOf(msgsOf(b)[2], "completed")); r[0]["success"] != true || r[2]["success"] != true {
				t.Errorf("checked: worker B's acks after the refusals: %v", r)
			}
			continue
		}
		if one[0]["success"] != true || batch[0]["success"] != true || batch[0]["queueName"] != "mig" {
			t.Errorf("unchecked: lease-less acks of another worker's messages: %v %v", one, batch)
		}
		if tx["success"] != true {
			t.Fatalf("unchecked: transaction under an expired requiredLease: %v", tx)
		}
		// A finished B's lease for it: B's own acks repeat what took effect.
		if r := h.ackBatch("g", ackOf(msgsOf(b)[0], "completed")); r[0]["success"] != true {
			t.Errorf("unchecked: worker B's ack of a message A finished: %v", r)
		}
		if p := h.pop("mig?consumerGroup=g&batch=3"); p != nil {
			t.Errorf("unchecked: acked messages delivered again: %v", p)
		}
		if ms := msgsOf(h.pop("mig-out")); len(ms) != 1 {
			t.Errorf("unchecked: the transaction's push: %v", ms)
		}
	}
}

// A message dead-lettered after its last retry is listed with its error
// and payload; the list has a total, working filters and paging.
func TestHTTPDeadLetterAfterLastRetry(t *testing.T) {
	h := newHarness(t)
	h.configure("dq", obj{"retryLimit": 1, "retryDelay": 0})
	h.push(obj{"queue": "dq", "partition": "p", "payload": obj{"order": 7}, "transactionId": "t-7"})
	for round := 0; round < 2; round++ {
		var ms []obj
		brokertest.CheckFor(t, 10*time.Second, func() error {
			ms = msgsOf(h.pop("dq?consumerGroup=billing"))
			if len(ms) != 1 {
				return errors.New("still waiting for the message to be delivered")
			}
			return nil
		})
		a := ackOf(ms[0], "failed")
		a["error"] = "card declined"
		res := h.ackBatch("billing", a)
		if res[0]["success"] != true || res[0]["dlq"] != (round == 1) {
			t.Fatalf("round %d: %v", round, res)
		}
	}
	var dl obj
	h.call("GET", "/api/v1/dlq?queue=dq", nil, 200, &dl)
	if dl["total"] != 1.0 {
		t.Fatalf("dlq: %v", dl)
	}
	e := dl["messages"].([]any)[0].(obj)
	if e["errorMessage"] != "card declined" || e["retryCount"] != 1.0 || e["consumerGroup"] != "billing" ||
		e["transactionId"] != "t-7" || e["queue"] != "dq" || e["partition"] != "p" ||
		e["data"].(obj)["order"] != 7.0 || !timeRE.MatchString(e["failedAt"].(string)) || !timeRE.MatchString(e["createdAt"].(string)) {
		t.Errorf("dlq entry %v", e)
	}
	// A dlq ack files at once, with the group's other filters.
	h.push(obj{"queue": "dq", "partition": "q", "payload": 1})
	ms := msgsOf(h.pop("dq/partition/q?consumerGroup=audit"))
	a := ackOf(ms[0], "dlq")
	a["error"] = "unparseable"
	if r := h.ackBatch("audit", a); r[0]["dlq"] != true {
		t.Fatalf("dlq ack: %v", r)
	}
	for q, want := range map[string]float64{
		"queue=dq": 2, "queue=dq&consumerGroup=audit": 1, "queue=dq&partition=p": 1, "queue=dq&partition=zz": 0,
		"queue=dq&from=2200-01-01T00:00:00Z": 0, "queue=dq&to=2000-01-01T00:00:00Z": 0, "consumerGroup=billing": 1,
	} {
		h.call("GET", "/api/v1/dlq?"+q, nil, 200, &dl)
		if dl["total"] != want || len(dl["messages"].([]any)) != int(want) {
			t.Errorf("dlq?%s: %v, want %v", q, dl, want)
		}
	}
	h.call("GET", "/api/v1/dlq?queue=dq&limit=1&offset=1", nil, 200, &dl)
	if dl["total"] != 2.0 || len(dl["messages"].([]any)) != 1 || dl["messages"].([]any)[0].(obj)["consumerGroup"] != "audit" {
		t.Errorf("dlq page: %v", dl)
	}
	if p := dl["pagination"].(obj); p["limit"] != 1.0 || p["offset"] != 1.0 {
		t.Errorf("pagination %v", p)
	}
}

func TestHTTPLeaseExtend(t *testing.T) {
	h := newHarness(t)
	h.pushN("le", "Default", 1)
	p := h.pop("le")
	var res []obj
	h.call("POST", "/api/v1/lease/"+p["leaseId"].(string)+"/extend", obj{"seconds": 600}, 200, &res)
	if len(res) != 1 || res[0]["success"] != true || !timeRE.MatchString(res[0]["expiresAt"].(string)) || res[0]["leaseId"] != p["leaseId"] {
		t.Errorf("extend: %v", res)
	}
	// An empty body means the default 60 s.
	h.call("POST", "/api/v1/lease/"+p["leaseId"].(string)+"/extend", "", 200, &res)
	if res[0]["success"] != true {
		t.Errorf("extend without a body: %v", res)
	}
	h.call("POST", "/api/v1/lease/01a237b8-c402-7000-b52f-fce67ae431d3/extend", obj{}, 200, &res)
	if res[0]["success"] != false || res[0]["error"] == nil {
		t.Errorf("extend of an unknown lease: %v", res)
	}
	h.call("POST", "/api/v1/lease/nope/extend", obj{}, 200, &res)
	if res[0]["success"] != false {
		t.Errorf("extend of a malformed lease: %v", res)
	}
	if code, _ := h.do("POST", "/api/v1/lease/nope/extend", `{"seconds":"x"}`); code != 400 {
		t.Errorf("bad seconds: %d", code)
	}
}
