package crash

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/regentmq/regent/client"
)

// startReplicated3 starts three `regent serve --cluster --replicas 3`
// processes and a client of the cluster dialled to the first.
func startReplicated3(t *testing.T) ([]*broker, *client.Client) {
	t.Helper()
	cfg := &Config{Binary: binary(t), Dir: t.TempDir(), StartTimeout: 60 * time.Second}
	if err := cfg.setDefaults(); err != nil {
		t.Fatal(err)
	}
	cfg.Brokers, cfg.Replicas = 3, 3
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	bs, err := startBrokers(ctx, cfg)
	t.Cleanup(func() {
		for _, b := range bs {
			b.kill()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctx, bs[0].tcpAddr, client.WithReconnectBackoff(10*time.Millisecond, 200*time.Millisecond), client.WithDialTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return bs, c
}

// pushUntilStored pushes it until a broker answers it stored (elections
// and failovers answer errors meanwhile).
func pushUntilStored(t *testing.T, ctx context.Context, c *client.Client, it client.Item) {
	t.Helper()
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		res, err := c.Push(cctx, it)
		cancel()
		if err == nil {
			err = res.FirstErr()
		}
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("push of %s never stored: %v", it.TransactionID, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReplicatedStoppedLeaderCompletesNothing: a shard's leader stopped
// for 5 s (SIGSTOP) is replaced by another replica meanwhile; what reached
// it while it was stopped (pushes, a pop, an ack) completes nothing when it
// resumes: every answer is a refusal, nothing of it is stored. The lease
// it granted before the stop lives on at the next leader, which accepts
// its ack.
func TestReplicatedStoppedLeaderCompletesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops broker processes")
	}
	bs, c := startReplicated3(t)
	ctx := testContext(t, 2*time.Minute)
	pushUntilStored(t, ctx, c, client.Item{Queue: "q", Partition: "p", TransactionID: "before", Payload: []byte("before")})
	m, err := c.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lead := m.Owners[m.ShardOf("q", "p")]
	var leader *broker
	for _, b := range bs {
		if fmt.Sprintf("b%d", b.n) == lead {
			leader = b
		}
	}
	if leader == nil {
		t.Fatalf("shard %d's leader %q is none of the brokers", m.ShardOf("q", "p"), lead)
	}
	direct, err := client.Dial(ctx, leader.tcpAddr, client.WithoutCluster())
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	leased, err := direct.Pop(ctx, client.PopRequest{Queue: "q", Partition: "p"})
	if err != nil || len(leased) != 1 {
		t.Fatalf("pop at the leader: %v %v", leased, err)
	}

	if err := leader.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	var mu sync.Mutex
	var completed []string
	var wg sync.WaitGroup
	call := func(what string, f func(context.Context) (bool, error)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			ok, err := f(cctx)
			mu.Lock()
			defer mu.Unlock()
			if ok {
				completed = append(completed, what)
			} else {
				t.Logf("%s at the stopped leader: %v", what, err)
			}
		}()
	}
	for i := range 10 {
		call(fmt.Sprintf("push %d", i), func(ctx context.Context) (bool, error) {
			res, err := direct.Push(ctx, client.Item{Queue: "q", Partition: "p", TransactionID: fmt.Sprintf("stopped-%d", i), Payload: []byte("x")})
			if err == nil {
				err = res.FirstErr()
			}
			return err == nil, err
		})
	}
	call("pop", func(ctx context.Context) (bool, error) {
		msgs, err := direct.Pop(ctx, client.PopRequest{Queue: "q", Partition: "p", Group: "other"})
		return err == nil && len(msgs) > 0, err
	})
	call("ack", func(ctx context.Context) (bool, error) {
		res, err := direct.Ack(ctx, leased, client.Completed, client.AckOptions{})
		if err == nil && res[0].Err != nil {
			err = res[0].Err
		}
		return err == nil, err
	})

	// The others elect a leader and serve the shard meanwhile.
	pushUntilStored(t, ctx, c, client.Item{Queue: "q", Partition: "p", TransactionID: "during", Payload: []byte("during")})
	served := time.Since(stopped)
	time.Sleep(5*time.Second - served)
	if err := leader.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	t.Logf("the shard was served again %v after its leader stopped", served.Round(time.Millisecond))
	if len(completed) > 0 {
		t.Fatalf("the leader stopped for 5 s completed %v when it resumed", completed)
	}
	// Nothing sent to it is stored; the lease it granted lives on.
	res, err := c.Ack(ctx, leased, client.Completed, client.AckOptions{})
	if err != nil || res[0].Err != nil {
		t.Fatalf("the lease granted before the stop, acked at the next leader: %v %v", res, err)
	}
	got, err := c.Pop(ctx, client.PopRequest{Queue: "q", Partition: "p", Group: "audit", Batch: 100})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range got {
		ids = append(ids, m.TransactionID)
		if strings.HasPrefix(m.TransactionID, "stopped-") {
			t.Errorf("%s, sent to the stopped leader and refused, is stored", m.TransactionID)
		}
	}
	if strings.Join(ids, ",") != "before,during" {
		t.Fatalf("partition p holds %v, want before,during", ids)
	}
}
