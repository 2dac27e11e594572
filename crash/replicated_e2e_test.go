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
// resumes: every answer is a refusal, and a push refused before anything
// was taken is not stored (one the deposal answered not_leader may be:
// the contract's ambiguity). The lease it granted before the stop lives
// on at the next leader, which accepts its ack.
func TestReplicatedStoppedLeaderCompletesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops broker processes")
	}
	bs, c := startReplicated3(t)
	ctx := testContext(t, 2*time.Minute)
	// The partition is one whose shard the client's own broker (b1) leads:
	// the client must also find the next leader while the broker it asks
	// for the map hangs.
	var m client.ClusterMap
	p := ""
	pollUntil(t, 30*time.Second, func() error {
		var err error
		if m, err = c.Cluster(ctx); err != nil {
			return err
		}
		for i := 0; i < 1000 && p == ""; i++ {
			if name := fmt.Sprintf("p%d", i); m.Owners[m.ShardOf("q", name)] == "b1" {
				p = name
			}
		}
		if p == "" {
			return fmt.Errorf("b1 leads no shard yet: %v", m.Owners)
		}
		return nil
	})
	pushUntilStored(t, ctx, c, client.Item{Queue: "q", Partition: p, TransactionID: "before", Payload: []byte("before")})
	leader := bs[0]
	direct, err := client.Dial(ctx, leader.tcpAddr, client.WithoutCluster())
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	leased, err := direct.Pop(ctx, client.PopRequest{Queue: "q", Partition: p})
	if err != nil || len(leased) != 1 {
		t.Fatalf("pop at the leader: %v %v", leased, err)
	}

	if err := leader.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	// The signal stops the process soon, not at once: what is sent in
	// that moment could still be taken and replicated, then answered
	// not_leader on resume though the next leader commits it (the
	// contract's ambiguity, SEMANTICS.md). The requests go once it is
	// surely stopped.
	time.Sleep(200 * time.Millisecond)
	var mu sync.Mutex
	var completed []string
	refusedBefore := map[string]bool{} // pushes refused before anything was taken: never stored
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
			txn := fmt.Sprintf("stopped-%d", i)
			res, err := direct.Push(ctx, client.Item{Queue: "q", Partition: p, TransactionID: txn, Payload: []byte("x")})
			if err == nil {
				err = res.FirstErr()
			}
			if err != nil && strings.Contains(err.Error(), " is led by ") { // shardPlane's refusal, before the engine
				mu.Lock()
				refusedBefore[txn] = true
				mu.Unlock()
			}
			return err == nil, err
		})
	}
	call("pop", func(ctx context.Context) (bool, error) {
		msgs, err := direct.Pop(ctx, client.PopRequest{Queue: "q", Partition: p, Group: "other"})
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
	pushUntilStored(t, ctx, c, client.Item{Queue: "q", Partition: p, TransactionID: "during", Payload: []byte("during")})
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
	got, err := c.Pop(ctx, client.PopRequest{Queue: "q", Partition: p, Group: "audit", Batch: 100})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	ambiguous := 0
	for _, m := range got {
		switch {
		case refusedBefore[m.TransactionID]:
			t.Errorf("%s, refused by the resumed broker before it was taken, is stored", m.TransactionID)
		case strings.HasPrefix(m.TransactionID, "stopped-"):
			ambiguous++ // answered not_leader by the deposal, committed by the next leader: allowed
		default:
			ids = append(ids, m.TransactionID)
		}
	}
	if strings.Join(ids, ",") != "before,during" {
		t.Fatalf("partition %s holds %v besides what the stopped broker was sent, want before,during", p, ids)
	}
	t.Logf("%d of %d pushes refused before they were taken; %d answered not_leader by the deposal and stored by the next leader",
		len(refusedBefore), 10, ambiguous)
}

// pollUntil polls f until it returns nil, failing with its last
// error after d.
func pollUntil(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %v", d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
