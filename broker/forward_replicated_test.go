package broker_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/broker"
)

// retry503 sends a request to broker i until it is answered other than
// 503 (a shard between two leaders, or led by a broker still building its
// engine: Queen's clients retry so), for up to 30 s.
func (b *bridge) retry503(i int, method, path string, body any) answer {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a := b.call(i, method, path, body)
		if a.status != 503 || time.Now().After(deadline) {
			return a
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestHTTPBridgeServesAReplicatedCluster: Queen's HTTP API on three
// brokers whose shards have three replicas each (before, a replicated
// broker did not open its HTTP door at all). A queue configured through
// one broker, 48 messages pushed over 8 partitions through brokers picked
// at random, popped by named partition and by any partition through
// others and acked through others again: each is delivered once and
// nothing is left. A lease is extended through a broker that does not
// lead its shard. A route that reads one engine's state answers 503.
func TestHTTPBridgeServesAReplicatedCluster(t *testing.T) {
	b := startBridgeOf(t, func(i int, o *broker.Options) {
		o.Cluster.Replicas = 3
		o.Cluster.Shards = 4
	})
	var cfg struct {
		Configured bool `json:"configured"`
		Options    struct {
			LeaseTime int `json:"leaseTime"`
		} `json:"options"`
	}
	b.json(b.retry503(1, "POST", "/api/v1/configure", map[string]any{"queue": "rq", "options": map[string]any{"leaseTime": 60}}), 200, &cfg)
	if !cfg.Configured || cfg.Options.LeaseTime != 60 {
		t.Fatalf("configure through b2: %+v", cfg)
	}

	const parts, per = 8, 6
	var items []pushItem
	for n := range parts * per {
		items = append(items, pushItem{Queue: "rq", Partition: fmt.Sprintf("p%d", n%parts), TransactionID: fmt.Sprintf("r-%d", n), Payload: map[string]int{"n": n}})
	}
	for k := 0; k < len(items); k += 8 {
		// A push answered 503 is sent again whole (its transactionIds
		// deduplicate what a part stored), and the items of a shard
		// refused while it had no leader (answered failed) again.
		todo := items[k : k+8]
		for tries := 0; len(todo) > 0; tries++ {
			if tries == 100 {
				t.Fatalf("%d items still refused: %v", len(todo), todo)
			}
			var res []pushResult
			b.json(b.retry503(b.any(), "POST", "/api/v1/push", map[string]any{"items": todo}), 201, &res)
			var again []pushItem
			for j, r := range res {
				switch {
				case r.Status == "queued" || r.Status == "duplicate":
				case r.Status == "failed" && strings.Contains(r.Error, "no leader"):
					again = append(again, todo[j])
				default:
					t.Fatalf("push: %+v", r)
				}
			}
			if todo = again; len(todo) > 0 {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}

	seen := map[string]int{}
	popAt := func(i int, path string) []popMsg {
		a := b.retry503(i, "GET", "/api/v1/pop/queue/"+path, nil)
		if a.status == 204 {
			return nil
		}
		var out struct {
			Messages []popMsg `json:"messages"`
		}
		b.json(a, 200, &out)
		return out.Messages
	}
	// Half by named partitions; one lease is extended through every broker
	// (two of which do not lead its shard) before its ack.
	for p := range parts / 2 {
		msgs := popAt(b.any(), fmt.Sprintf("rq/partition/p%d?batch=10&wait=true&timeout=5000", p))
		if len(msgs) != per {
			t.Fatalf("pop of p%d: %d messages, want %d", p, len(msgs), per)
		}
		if p == 0 {
			for i := range b.urls {
				a := b.retry503(i, "POST", "/api/v1/lease/"+msgs[0].LeaseID+"/extend", map[string]any{"seconds": 30})
				if a.status != 200 {
					t.Fatalf("lease extension through b%d: %d %s", i+1, a.status, a.body)
				}
			}
		}
		for _, m := range msgs {
			seen[m.TransactionID]++
		}
		b.ack(b.any(), msgs, p%2 == 0)
	}
	// The rest by any partition.
	deadline := time.Now().Add(60 * time.Second)
	for k := 0; len(seen) < parts*per; k++ {
		if time.Now().After(deadline) {
			t.Fatalf("after %d pops of any partition, %d of %d messages delivered", k, len(seen), parts*per)
		}
		msgs := popAt(b.any(), "rq?batch=10&wait=true&timeout=2000")
		for _, m := range msgs {
			seen[m.TransactionID]++
		}
		if len(msgs) > 0 {
			b.ack(b.any(), msgs, k%2 == 1)
		}
	}
	for n := range parts * per {
		if c := seen[fmt.Sprintf("r-%d", n)]; c != 1 {
			t.Fatalf("r-%d delivered %d times", n, c)
		}
	}
	for p := range parts {
		if msgs := popAt(b.any(), fmt.Sprintf("rq/partition/p%d?batch=10", p)); len(msgs) != 0 {
			t.Fatalf("p%d still gives %d messages", p, len(msgs))
		}
	}

	a := b.call(0, "GET", "/api/v1/resources/queues", nil)
	if a.status != 503 || !strings.Contains(string(a.body), "replicated") {
		t.Fatalf("a route reading one engine's state: %d %s, want 503 saying why", a.status, a.body)
	}
	var h map[string]any
	b.json(b.call(2, "GET", "/health", nil), 200, &h)
	if h["status"] != "healthy" {
		t.Fatalf("health: %v", h)
	}
}
