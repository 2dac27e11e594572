package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver/httpapi"
)

func TestHTTPPopShapeAndEmpty(t *testing.T) {
	h := newHarness(t)
	if p := h.pop("nothing"); p != nil {
		t.Fatalf("pop of an unknown queue: %v, want 204", p)
	}
	pushed := h.push(obj{"queue": "shop", "partition": "p7", "payload": obj{"k": "v"}, "transactionId": "t1"})
	p := h.pop("shop?consumerGroup=g1")
	for _, k := range []string{"success", "queue", "partition", "partitionId", "leaseId", "consumerGroup", "partitionsClaimed", "messages"} {
		if _, ok := p[k]; !ok {
			t.Errorf("pop answer lacks %q: %v", k, p)
		}
	}
	if p["success"] != true || p["queue"] != "shop" || p["partition"] != "p7" || p["consumerGroup"] != "g1" || p["partitionsClaimed"] != 1.0 {
		t.Errorf("pop answer %v", p)
	}
	ms := msgsOf(p)
	if len(ms) != 1 {
		t.Fatalf("messages %v", ms)
	}
	m := ms[0]
	for _, k := range []string{"id", "transactionId", "traceId", "data", "producerSub", "createdAt", "partitionId", "partition", "leaseId", "consumerGroup"} {
		if _, ok := m[k]; !ok {
			t.Errorf("message lacks %q: %v", k, m)
		}
	}
	if m["id"] != pushed[0]["message_id"] || m["transactionId"] != "t1" || m["partitionId"] != pushed[0]["partition_id"] ||
		m["leaseId"] != p["leaseId"] || m["consumerGroup"] != "g1" || m["traceId"] != nil || m["producerSub"] != nil {
		t.Errorf("message %v (pushed %v)", m, pushed[0])
	}
	if !timeRE.MatchString(m["createdAt"].(string)) {
		t.Errorf("createdAt %q is not in Queen's format", m["createdAt"])
	}
	if !uuidRE.MatchString(p["leaseId"].(string)) {
		t.Errorf("leaseId %v", p["leaseId"])
	}
	// The partition is leased to g1: empty for g1, but another group reads it.
	if p := h.pop("shop?consumerGroup=g1"); p != nil {
		t.Errorf("second pop while leased: %v", p)
	}
	if ms := msgsOf(h.pop("shop/partition/p7?consumerGroup=g2")); len(ms) != 1 {
		t.Errorf("other group on the partition route: %v", ms)
	}
	// Queue mode by default, and autoAck answers with an empty lease.
	a := h.pop("shop?autoAck=true")
	if a["consumerGroup"] != "__QUEUE_MODE__" || a["leaseId"] != "" || msgsOf(a)[0]["leaseId"] != "" {
		t.Errorf("autoAck pop %v", a)
	}
	if p := h.pop("shop"); p != nil {
		t.Errorf("autoAck moved the cursor; got %v", p)
	}
}

func TestHTTPPopBatchPartitionsAndSubscription(t *testing.T) {
	h := newHarness(t)
	h.pushN("multi", "a", 3)
	h.pushN("multi", "b", 3)
	p := h.pop("multi?batch=10&partitions=2&consumerGroup=g")
	ms := msgsOf(p)
	if len(ms) != 6 || p["partitionsClaimed"] != 2.0 {
		t.Fatalf("multi-partition pop: %v", p)
	}
	for _, m := range ms {
		if m["leaseId"] != p["leaseId"] {
			t.Errorf("messages of one pop share one lease: %v", m)
		}
	}
	// subscriptionMode=new skips what exists when the group appears.
	if p := h.pop("multi?consumerGroup=late&subscriptionMode=new"); p != nil {
		t.Errorf("new group saw history: %v", p)
	}
	h.pushN("multi", "a", 1)
	if ms := msgsOf(h.pop("multi?consumerGroup=late&batch=10")); len(ms) != 1 {
		t.Errorf("new group after a push: %v", ms)
	}
	// subscriptionFrom a timestamp in the future: nothing yet.
	if p := h.pop("multi?consumerGroup=future&subscriptionFrom=2999-01-01T00:00:00Z"); p != nil {
		t.Errorf("subscriptionFrom the future: %v", p)
	}
	if code, b := h.do("GET", "/api/v1/pop/queue/multi?consumerGroup=x&subscriptionFrom=yesterday", nil); code != 400 {
		t.Errorf("bad subscriptionFrom: %d %s", code, b)
	}
	if code, b := h.do("GET", "/api/v1/pop/queue/multi?batch=1000000", nil); code != 400 {
		t.Errorf("batch above the engine's cap: %d %s", code, b)
	}
	// Every route's counts go through queryInt: refused when not a whole
	// number of at least 0, naming the parameter.
	for _, u := range []string{"/api/v1/pop/queue/multi?batch=-1", "/api/v1/pop/queue/multi?batch=ten",
		"/api/v1/pop/queue/multi?timeout=-5", "/api/v1/pop/queue/multi?partitions=-2", "/api/v1/pop/queue/multi?batch=1.5",
		"/api/v1/messages?limit=-1", "/api/v1/dlq?offset=x", "/api/v1/consumer-groups/lagging?minLagSeconds=-3",
		"/api/v1/status/queues?limit=lots", "/api/v1/traces/names?offset=-1"} {
		param := u[strings.LastIndexByte(u, '?')+1 : strings.IndexByte(u, '=')]
		if code, b := h.do("GET", u, nil); code != 400 || !strings.Contains(string(b), param+": want a whole number") {
			t.Errorf("%s: %d %s, want 400 naming %s", u, code, b, param)
		}
	}
}

// A long poll parks until a push makes a message deliverable.
func TestHTTPLongPollWokenByPush(t *testing.T) {
	h := newDoorHarness(t)
	type answer struct {
		code int
		b    []byte
	}
	ch := make(chan answer, 1)
	start := time.Now()
	go func() {
		code, b := h.do("GET", "/api/v1/pop/queue/lp?wait=true&timeout=20000", nil)
		ch <- answer{code, b}
	}()
	brokertest.CheckFor(t, 10*time.Second, func() error {
		if n := httpapi.ParkedPolls(h.s); n != 1 {
			return fmt.Errorf("%d polls parked, waiting for the poll to park", n)
		}
		return nil
	})
	h.push(obj{"queue": "lp", "payload": obj{"hello": 1}})
	select {
	case a := <-ch:
		if a.code != 200 {
			t.Fatalf("long poll: %d %s", a.code, a.b)
		}
		if time.Since(start) > 10*time.Second {
			t.Errorf("long poll answered after its timeout, not on the push")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("long poll not woken by the push")
	}
	// A long poll that times out answers 204. On a queue that does not
	// exist it waited for the queue without creating it, or its group.
	code, _ := h.do("GET", "/api/v1/pop/queue/lp2?wait=true&timeout=50", nil)
	if code != 204 {
		t.Errorf("expired long poll: %d", code)
	}
	code, _ = h.do("GET", "/api/v1/pop/queue/lp2?wait=true&timeout=50&consumerGroup=billing", nil)
	if code != 204 {
		t.Errorf("expired long poll of a group: %d", code)
	}
	if code, b := h.do("GET", "/api/v1/resources/queues/lp2", nil); code != 404 {
		t.Errorf("a long poll on a missing queue created it: %d %s", code, b)
	}
	var groups []obj
	h.call("GET", "/api/v1/consumer-groups", nil, 200, &groups)
	for _, g := range groups {
		if g["queueName"] == "lp2" {
			t.Errorf("a long poll on a missing queue created a group: %v", g)
		}
	}
}

// A long poll whose client goes away is withdrawn: the next push goes to a
// live consumer, not to the vanished one.
func TestHTTPLongPollCancelledOnDisconnect(t *testing.T) {
	h := newDoorHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.doCtx(ctx, "GET", "/api/v1/pop/queue/gone?wait=true&timeout=20000", nil)
	}()
	brokertest.CheckFor(t, 10*time.Second, func() error {
		if n := httpapi.ParkedPolls(h.s); n != 1 {
			return fmt.Errorf("%d polls parked, waiting for the poll to park", n)
		}
		return nil
	})
	cancel()
	<-done
	brokertest.CheckFor(t, 10*time.Second, func() error {
		if n := httpapi.ParkedPolls(h.s); n != 0 {
			return fmt.Errorf("%d polls parked, waiting for the poll to be withdrawn", n)
		}
		return nil
	})
	h.push(obj{"queue": "gone", "payload": 1})
	if ms := msgsOf(h.pop("gone")); len(ms) != 1 {
		t.Fatalf("message taken by the vanished poll: %v", ms)
	}
}

func TestHTTPPopMaintenance(t *testing.T) {
	h := newHarness(t)
	h.push(obj{"queue": "m", "payload": 1})
	var st obj
	h.call("POST", "/api/v1/system/maintenance/pop", obj{"enabled": true}, 200, &st)
	if st["popMaintenanceMode"] != true {
		t.Fatalf("pop maintenance: %v", st)
	}
	if p := h.pop("m"); p != nil {
		t.Errorf("pop while paused: %v", p)
	}
	h.call("POST", "/api/v1/system/maintenance/pop", obj{"enabled": false}, 200, nil)
	if ms := msgsOf(h.pop("m")); len(ms) != 1 {
		t.Errorf("pop after maintenance: %v", ms)
	}
	h.call("GET", "/api/v1/system/maintenance/pop", nil, 200, &st)
	if st["popMaintenanceMode"] != false {
		t.Errorf("pop maintenance state: %v", st)
	}
	// Push maintenance is reported; pushes are still stored.
	h.call("POST", "/api/v1/system/maintenance", obj{"enabled": true}, 200, &st)
	if st["maintenanceMode"] != true {
		t.Errorf("maintenance: %v", st)
	}
	if r := h.push(obj{"queue": "m", "payload": 2}); r[0]["status"] != "queued" {
		t.Errorf("push in maintenance: %v", r)
	}
	h.call("GET", "/api/v1/system/maintenance", nil, 200, &st)
	if st["maintenanceMode"] != true || st["popMaintenanceMode"] != false {
		t.Errorf("maintenance state: %v", st)
	}
	if code, _ := h.do("POST", "/api/v1/system/maintenance", obj{}); code != 400 {
		t.Errorf("maintenance without enabled: %d", code)
	}
}

// Messages handed to a poll whose client is already gone are given back at
// once, with no retry spent.
func TestHTTPGiveBack(t *testing.T) {
	h := newDoorHarness(t)
	h.pushN("gb", "a", 2)
	h.pushN("gb", "b", 1)
	msgs, err := h.e.Pop(context.Background(), engine.PopRequest{Queue: "gb", Group: "g", Batch: 10, Partitions: 2})
	if err != nil || len(msgs) != 3 {
		t.Fatalf("pop: %v %v", msgs, err)
	}
	httpapi.GiveBack(h.s, msgs)
	var got []obj
	brokertest.CheckFor(t, 10*time.Second, func() error {
		got = append(got, msgsOf(h.pop("gb?consumerGroup=g&batch=10&partitions=2"))...)
		if len(got) != 3 {
			return errors.New("still waiting for the messages to come back")
		}
		return nil
	})
	for _, m := range got {
		if m["retryCount"] != 0.0 {
			t.Errorf("given back message spent a retry: %v", m)
		}
	}
	// Acks of a multi-partition pop share one lease id.
	res := h.ackBatch("g", ackOf(got[0], "completed"), ackOf(got[1], "completed"), ackOf(got[2], "completed"))
	for i, r := range res {
		if r["success"] != true {
			t.Errorf("ack %d: %v", i, r)
		}
	}
}
