package broker_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/client"
)

// TestHTTPBridgeListsTheClusterDeadLetters: Queen's clients list the dead
// letters on whichever broker they ask, and each broker answers with the
// whole cluster's, merged in one order, paged exactly: in a cluster of
// owners (before, each broker listed its own engine's alone) and in a
// replicated one (before, the route answered 503).
func TestHTTPBridgeListsTheClusterDeadLetters(t *testing.T) {
	for _, replicas := range []int{0, 3} {
		t.Run(fmt.Sprintf("replicas=%d", replicas), func(t *testing.T) {
			b := startBridgeOf(t, func(i int, o *broker.Options) {
				o.Cluster.Replicas = replicas
				o.Cluster.Shards = 4
			})
			const parts, per = 8, 3
			var items []pushItem
			for n := range parts * per {
				items = append(items, pushItem{Queue: "dq", Partition: fmt.Sprintf("p%d", n%parts), TransactionID: fmt.Sprintf("d-%d", n), Payload: n})
			}
			b.pushUntilStored(items)
			for p := range parts {
				msgs := b.popRetrying(b.any(), fmt.Sprintf("dq/partition/p%d?batch=10&wait=true&timeout=5000", p))
				if len(msgs) != per {
					t.Fatalf("pop of p%d: %d messages, want %d", p, len(msgs), per)
				}
				var acks []map[string]any
				for _, m := range msgs {
					a := ackOf(m)
					a["status"], a["error"] = "dlq", "refused by the test"
					acks = append(acks, a)
				}
				var res []ackResult
				b.json(b.retry503(b.any(), "POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": acks}), 200, &res)
				for _, r := range res {
					if !r.Success {
						t.Fatalf("dlq ack: %+v", res)
					}
				}
			}
			type page struct {
				Messages []struct {
					TransactionID string `json:"transactionId"`
					Partition     string `json:"partition"`
					ErrorMessage  string `json:"errorMessage"`
				} `json:"messages"`
				Total int `json:"total"`
			}
			list := func(i int, query string) (ids []string, total int) {
				t.Helper()
				var pg page
				b.json(b.retry503(i, "GET", "/api/v1/dlq?queue=dq"+query, nil), 200, &pg)
				for _, m := range pg.Messages {
					if m.ErrorMessage != "refused by the test" {
						t.Fatalf("entry %+v", m)
					}
					ids = append(ids, m.TransactionID)
				}
				return ids, pg.Total
			}
			var whole []string
			for i := range 3 {
				ids, total := list(i, "&limit=100")
				if total != parts*per || len(ids) != parts*per {
					t.Fatalf("b%d lists %d entries of a total of %d, want %d", i+1, len(ids), total, parts*per)
				}
				if i == 0 {
					whole = ids
				} else if !slices.Equal(ids, whole) {
					t.Fatalf("b%d lists %v, b1 %v: not one order", i+1, ids, whole)
				}
			}
			sorted := slices.Clone(whole)
			slices.Sort(sorted)
			if n := len(slices.Compact(sorted)); n != parts*per {
				t.Fatalf("%d distinct entries listed, want %d", n, parts*per)
			}
			// Pages of 5 through another broker make the same list.
			var paged []string
			for off := 0; off < parts*per; off += 5 {
				ids, total := list(2, fmt.Sprintf("&limit=5&offset=%d", off))
				if total != parts*per || len(ids) != min(5, parts*per-off) {
					t.Fatalf("page at %d: %d entries of a total of %d", off, len(ids), total)
				}
				paged = append(paged, ids...)
			}
			if !slices.Equal(paged, whole) {
				t.Fatalf("paged %v, whole %v", paged, whole)
			}
			if ids, total := list(1, "&partition=p3"); total != per || len(ids) != per {
				t.Fatalf("p3's entries: %v of a total of %d, want %d", ids, total, per)
			}
			// The Go client merges the brokers' listings (each, replicated,
			// its led engines' merged by its binary door) into the same list.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := client.Dial(ctx, b.cl.Brokers[1].TCPAddr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			got, total, err := c.DLQ(ctx, client.DLQFilter{Queue: "dq", Limit: 100})
			var ids []string
			for _, e := range got {
				ids = append(ids, e.Message.TransactionID)
			}
			if err != nil || total != parts*per || !slices.Equal(ids, whole) {
				t.Fatalf("the Go client lists %v of a total of %d (%v), the bridge %v", ids, total, err, whole)
			}
		})
	}
}
