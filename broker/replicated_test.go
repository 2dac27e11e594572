package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
)

// startReplicated starts three brokers of a cluster whose shards have
// three replicas each.
func startReplicated(t *testing.T) *brokertest.Cluster {
	t.Helper()
	return brokertest.StartCluster(t, 3, func(_ int, o *broker.Options) {
		o.Cluster.Replicas = 3
		o.Cluster.Shards = 4
	})
}

// pushRetrying pushes one item until a broker stores it, through
// elections and a stopped broker, and says how long it took.
func pushRetrying(t *testing.T, ctx context.Context, c *client.Client, it client.Item) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		res, err := c.Push(ctx, it)
		if err == nil {
			err = res.FirstErr()
		}
		if err == nil {
			return time.Since(start)
		}
		switch protocol.CodeOf(err) {
		case protocol.CodeNotLeader, protocol.CodeNotOwner, protocol.CodeUnavailable, protocol.CodeClosed:
		default:
			t.Fatalf("push of %s: %v", it.TransactionID, err)
		}
		if ctx.Err() != nil {
			t.Fatalf("push of %s not stored in %v: %v", it.TransactionID, time.Since(start), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReplicatedClusterKeepsEveryAnsweredPushAcrossALeadersStop: three
// brokers, every shard on all three. Pushes answered stored before the
// broker leading some shards stops are all there after it, once each, with
// the ones answered during and after the failover; the shards it led are
// served by the others within seconds.
func TestReplicatedClusterKeepsEveryAnsweredPushAcrossALeadersStop(t *testing.T) {
	cl := startReplicated(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if cl.Brokers[0].Engine() != nil {
		t.Fatal("a broker of a replicated cluster has one engine")
	}
	c, err := client.Dial(ctx, cl.Brokers[0].TCPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	const parts, perRound = 8, 80
	item := func(n int) client.Item {
		return client.Item{Queue: "orders", Partition: fmt.Sprintf("p%d", n%parts), TransactionID: fmt.Sprintf("t%d", n), Payload: []byte(fmt.Sprint(n))}
	}
	for n := range perRound {
		pushRetrying(t, ctx, c, item(n))
	}

	// Stop a broker other than the one the client dialled that leads a
	// shard.
	victim := -1
	for i := 1; i < 3 && victim < 0; i++ {
		if len(cl.Brokers[i].Shards()) > 0 {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("b2 and b3 lead no shard: b1 leads %d", len(cl.Brokers[0].Shards()))
	}
	led := len(cl.Brokers[victim].Shards())
	cl.Stop(victim)
	var slowest time.Duration
	for n := perRound; n < 2*perRound; n++ {
		slowest = max(slowest, pushRetrying(t, ctx, c, item(n)))
	}
	t.Logf("b%d led %d of 4 shards; the slowest push after its stop took %v", victim+1, led, slowest)
	brokertest.CheckFor(t, 10*time.Second, func() error {
		n := 0
		for i, b := range cl.Brokers {
			if i != victim {
				n += len(b.Shards())
			}
		}
		if n != 4 {
			return fmt.Errorf("the two brokers left lead %d of 4 shards", n)
		}
		return nil
	})

	// Every push answered stored is there once, nothing else is.
	seen := map[string]int{}
	deadline := time.Now().Add(20 * time.Second)
	for len(seen) < 2*perRound && time.Now().Before(deadline) {
		msgs, err := c.Pop(ctx, client.PopRequest{Queue: "orders", Batch: 50, Partitions: parts, Wait: true, Timeout: 200 * time.Millisecond})
		if err != nil {
			if c := protocol.CodeOf(err); c == protocol.CodeUnavailable || c == protocol.CodeNotLeader {
				continue
			}
			t.Fatal(err)
		}
		for _, m := range msgs {
			seen[m.TransactionID]++
		}
		if len(msgs) > 0 {
			if res, err := c.Ack(ctx, msgs, client.Completed, client.AckOptions{}); err != nil {
				t.Fatalf("ack: %v", err)
			} else {
				for i := range res {
					if res[i].Err != nil {
						t.Fatalf("ack of %s: %v", msgs[i].TransactionID, res[i].Err)
					}
				}
			}
		}
	}
	for n := range 2 * perRound {
		if k := seen[fmt.Sprintf("t%d", n)]; k != 1 {
			t.Errorf("push t%d, answered stored, was delivered %d times", n, k)
		}
	}
	if len(seen) != 2*perRound {
		t.Errorf("%d distinct messages delivered, %d pushed", len(seen), 2*perRound)
	}
}

// TestReplicatedClusterConfiguresAndListsDeadLetters: a queue's
// configuration reaches the engines of every shard (a message failed once
// past its retry limit is a dead letter), and the dead-letter listing
// gathers them from every shard's engine.
func TestReplicatedClusterConfiguresAndListsDeadLetters(t *testing.T) {
	cl := startReplicated(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, cl.Brokers[1].TCPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o := client.DefaultQueueOptions()
	o.RetryLimit = 0
	brokertest.CheckFor(t, 20*time.Second, func() error {
		_, err := c.Configure(ctx, "jobs", o)
		return err
	})
	if _, err := c.Configure(ctx, "no/slash", o); protocol.CodeOf(err) != protocol.CodeInvalid {
		t.Fatalf("a queue name with a slash: %v", err)
	}
	const n = 12
	for i := range n {
		pushRetrying(t, ctx, c, client.Item{Queue: "jobs", Partition: fmt.Sprintf("p%d", i), TransactionID: fmt.Sprintf("j%d", i), Payload: []byte("x")})
	}
	failed := 0
	for failed < n {
		msgs, err := c.Pop(ctx, client.PopRequest{Queue: "jobs", Batch: n, Partitions: n})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			t.Fatalf("%d of %d messages failed, then none to pop", failed, n)
		}
		res, err := c.Ack(ctx, msgs, client.Failed, client.AckOptions{Error: "boom"})
		if err != nil {
			t.Fatal(err)
		}
		for i := range res {
			if res[i].Err != nil {
				t.Fatalf("failed ack: %v", res[i].Err)
			}
		}
		failed += len(msgs)
	}
	entries, total, err := c.DLQ(ctx, client.DLQFilter{Queue: "jobs", Limit: 5})
	if err != nil || total != n || len(entries) != 5 {
		t.Fatalf("dead letters: %d listed of %d, %v; want 5 of %d (retry limit 0 on every shard)", len(entries), total, err, n)
	}
	all, _, err := c.DLQ(ctx, client.DLQFilter{Queue: "jobs", Limit: 100})
	if err != nil || len(all) != n {
		t.Fatalf("every dead letter: %d, %v", len(all), err)
	}
	for i := 1; i < len(all); i++ {
		if all[i].FailedAt.Before(all[i-1].FailedAt) {
			t.Fatalf("dead letters out of order at %d", i)
		}
	}
}
