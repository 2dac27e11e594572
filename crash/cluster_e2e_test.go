package crash

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
)

// cluster3 starts three `regent serve --cluster` processes on 127.0.0.1
// (ports chosen first, directories under t.TempDir()) and a client
// dialled to each; any() picks one at random for each request.
type cluster3 struct {
	t       *testing.T
	brokers []*broker
	clients []*client.Client
	rng     *rand.Rand
}

func startCluster3(t *testing.T) *cluster3 { return startCluster3Of(t, 0) }

// startCluster3Of is startCluster3 with every shard on replicas brokers
// (0: stage 1, one owner per shard).
func startCluster3Of(t *testing.T, replicas int) *cluster3 {
	t.Helper()
	cfg := &Config{Binary: binary(t), Dir: t.TempDir(), StartTimeout: 60 * time.Second}
	if err := cfg.setDefaults(); err != nil {
		t.Fatal(err)
	}
	cfg.Brokers, cfg.Replicas = 3, replicas
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	bs, err := startBrokers(ctx, cfg)
	c := &cluster3{t: t, brokers: bs, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))}
	t.Cleanup(func() {
		for _, cl := range c.clients {
			cl.Close()
		}
		for _, b := range bs {
			b.kill()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		cl, err := client.Dial(ctx, b.tcpAddr, client.WithReconnectBackoff(10*time.Millisecond, 200*time.Millisecond), client.WithDialTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		c.clients = append(c.clients, cl)
	}
	return c
}

func (c *cluster3) any() *client.Client { return c.clients[c.rng.IntN(len(c.clients))] }

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestClusterSemantics runs SEMANTICS.md's scenarios against three broker
// processes of one cluster through the Go client, each request sent
// through a client dialled to a random broker: configure, deduplicated
// pushes, one lease per group and partition, the four acks (completed,
// failed with its retry, retry, dlq with its error), independent groups,
// a long poll woken by a push through another broker, lease expiry, and
// transactions within a shard and across shards.
func TestClusterSemantics(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	c := startCluster3(t)
	ctx := testContext(t, 2*time.Minute)
	o := client.DefaultQueueOptions()
	o.RetryLimit, o.RetryDelay, o.LeaseTime = 1, 50*time.Millisecond, 2*time.Second
	if _, err := c.any().Configure(ctx, "sem", o); err != nil {
		t.Fatal(err)
	}
	for p := range 6 {
		part := fmt.Sprintf("p%d", p)
		// Pushes deduplicated by transactionId, whichever broker they reach.
		var first client.ID
		for k := range 3 {
			res, err := c.any().Push(ctx, client.Item{Queue: "sem", Partition: part, TransactionID: "t-" + part, Payload: []byte(part + "-a")})
			if err != nil || res[0].Err != nil {
				t.Fatalf("push %s: %v %v", part, err, res)
			}
			if k == 0 {
				first = res[0].MessageID
			} else if res[0].Status != client.PushDuplicate || res[0].MessageID != first {
				t.Fatalf("repeat %d of %s: %v %s, want duplicate of %s", k, part, res[0].Status, res[0].MessageID, first)
			}
		}
		if _, err := c.any().Push(ctx, client.Item{Queue: "sem", Partition: part, Payload: []byte(part + "-b")}); err != nil {
			t.Fatal(err)
		}
		q := func() client.QueueBuilder { return c.any().Queue("sem").Partition(part).Group("g1").Batch(1) }
		// One lease per group and partition.
		m, err := q().Pop(ctx)
		if err != nil || len(m) != 1 || string(m[0].Payload) != part+"-a" {
			t.Fatalf("%s: first pop %v %v", part, m, err)
		}
		if again, err := q().Pop(ctx); err != nil || len(again) != 0 {
			t.Fatalf("%s: a second pop under a live lease got %d (%v)", part, len(again), err)
		}
		// failed: comes back after retryDelay with its retry spent.
		ackOne(t, ctx, c.any(), m[0], client.Failed)
		m = popWait(t, ctx, q)
		if string(m[0].Payload) != part+"-a" || m[0].RetryCount != 1 {
			t.Fatalf("%s: after failed: %s retry %d", part, m[0].Payload, m[0].RetryCount)
		}
		// retry: comes back at once, no retry spent.
		ackOne(t, ctx, c.any(), m[0], client.Retry)
		m = popWait(t, ctx, q)
		if string(m[0].Payload) != part+"-a" || m[0].RetryCount != 1 {
			t.Fatalf("%s: after retry: %s retry %d", part, m[0].Payload, m[0].RetryCount)
		}
		// dlq: filed at once with its error text; the next one follows.
		if res, err := c.any().Ack(ctx, m, client.DLQ, client.AckOptions{Error: "bad " + part}); err != nil || res[0].Err != nil || !res[0].DeadLettered {
			t.Fatalf("%s: dlq ack %v %v", part, err, res)
		}
		m = popWait(t, ctx, q)
		if string(m[0].Payload) != part+"-b" {
			t.Fatalf("%s: after the dlq ack: %s", part, m[0].Payload)
		}
		// Lease expiry: not acked, it comes back after leaseTime.
		start := time.Now()
		m = popWait(t, ctx, q)
		if string(m[0].Payload) != part+"-b" || time.Since(start) < time.Second {
			t.Fatalf("%s: redelivered %s after %v", part, m[0].Payload, time.Since(start))
		}
		ackOne(t, ctx, c.any(), m[0], client.Completed)
		if left, err := q().Pop(ctx); err != nil || len(left) != 0 {
			t.Fatalf("%s: a completed message came back (%d, %v)", part, len(left), err)
		}
		// Another group reads the same messages from the start.
		g2, err := c.any().Queue("sem").Partition(part).Group("g2").Batch(10).AutoAck(true).Pop(ctx)
		if err != nil || len(g2) != 2 {
			t.Fatalf("%s: group g2 read %d (%v)", part, len(g2), err)
		}
	}
	entries, total, err := c.any().DLQ(ctx, client.DLQFilter{Queue: "sem", Limit: 100})
	if err != nil || total != 6 || len(entries) != 6 || !strings.HasPrefix(entries[0].Error, "bad p") {
		t.Fatalf("the cluster's DLQ: %d of %d (%v)", len(entries), total, err)
	}
	// A long poll through one broker is woken by a push through another.
	for p := range 4 {
		part := fmt.Sprintf("w%d", p)
		done := make(chan []client.Message, 1)
		go func() {
			m, _ := c.clients[p%3].Queue("sem").Partition(part).Batch(1).Wait(true).Timeout(20 * time.Second).AutoAck(true).Pop(ctx)
			done <- m
		}()
		time.Sleep(100 * time.Millisecond) // the poll parks (a push before it is found too)
		if _, err := c.clients[(p+1)%3].Push(ctx, client.Item{Queue: "sem", Partition: part, Payload: []byte("wake")}); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-done:
			if len(m) != 1 {
				t.Fatalf("%s: the long poll answered %d", part, len(m))
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the long poll was not woken", part)
		}
	}
	// Transactions: a refused ack changes nothing; an accepted one acks
	// and pushes (across shards: pushes, then acks).
	if _, err := c.any().Push(ctx, client.Item{Queue: "sem", Partition: "tx", Payload: []byte("job")}); err != nil {
		t.Fatal(err)
	}
	m, err := c.any().Queue("sem").Partition("tx").Group("g1").Pop(ctx)
	if err != nil || len(m) != 1 {
		t.Fatalf("tx pop: %v %v", m, err)
	}
	stale := m[0]
	stale.LeaseID = client.ID{1}
	r, err := c.any().Transaction().Ack(stale, client.Completed).Push(client.Item{Queue: "sem", Partition: "tx", Payload: []byte("never")}).Commit(ctx)
	if err != nil || r.Err == nil {
		t.Fatalf("a transaction with a refused ack: %v %+v", err, r)
	}
	for _, sink := range []string{"tx", "out-1", "out-2", "out-3"} {
		r, err := c.any().Transaction().Ack(m[0], client.Completed).Push(client.Item{Queue: "sem", Partition: sink, TransactionID: "r-" + sink, Payload: []byte("result")}).Commit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if sink == "tx" && r.Err != nil {
			t.Fatalf("the transaction: %v", r.Err)
		}
	}
	got, err := c.any().Queue("sem").Partition("tx").Group("g3").Batch(10).AutoAck(true).Pop(ctx)
	if err != nil || len(got) != 2 || string(got[1].Payload) != "result" {
		t.Fatalf("partition tx holds %d messages, want the job and one result (%v)", len(got), err)
	}
	checkOperations(t, c)
}

// checkOperations: regent cluster status, /health and /metrics of each
// broker describe the same cluster: three brokers up, every shard owned
// once, a controller, etcd answering.
func checkOperations(t *testing.T, c *cluster3) {
	t.Helper()
	cmd := exec.Command(c.brokers[0].cfg.Binary, "cluster", "status", "--json", "--addr", c.brokers[2].tcpAddr)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("regent cluster status: %v\n%s", err, out)
	}
	var st struct {
		Cluster    string `json:"cluster"`
		Shards     int    `json:"shards"`
		Controller string `json:"controller"`
		Brokers    []struct {
			ID     string `json:"id"`
			Live   bool   `json:"live"`
			Shards int    `json:"shards"`
			Etcd   string `json:"etcd"`
		} `json:"brokers"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("regent cluster status --json: %v\n%s", err, out)
	}
	owned := 0
	for _, b := range st.Brokers {
		if !b.Live || b.Etcd != "ok" || b.Shards == 0 {
			t.Errorf("cluster status: broker %+v", b)
		}
		owned += b.Shards
	}
	if st.Cluster != "crash" || len(st.Brokers) != 3 || owned != st.Shards || st.Shards != 16 || st.Controller == "" {
		t.Fatalf("cluster status: %s", out)
	}
	metricsOwned := 0
	for _, b := range c.brokers {
		resp, err := http.Get("http://" + b.httpAddr + "/metrics/prometheus")
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "regent_cluster_shards_owned "); ok {
				n, _ := strconv.Atoi(v)
				metricsOwned += n
			}
		}
		resp.Body.Close()
	}
	if metricsOwned != 16 {
		t.Fatalf("the brokers' regent_cluster_shards_owned add up to %d, want 16", metricsOwned)
	}
}

func ackOne(t *testing.T, ctx context.Context, c *client.Client, m client.Message, st client.AckStatus) {
	t.Helper()
	res, err := c.Ack(ctx, []client.Message{m}, st, client.AckOptions{})
	if err != nil || res[0].Err != nil {
		t.Fatalf("ack %v of %s: %v %v", st, m.Payload, err, res)
	}
}

// popWait pops until a message comes (retryDelay and lease expiry make
// them come back later), within 10 s.
func popWait(t *testing.T, ctx context.Context, q func() client.QueueBuilder) []client.Message {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		m, err := q().Wait(true).Timeout(500 * time.Millisecond).Pop(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(m) > 0 {
			return m
		}
	}
	t.Fatal("nothing came back within 10 s")
	return nil
}

// TestClusterKill9 kills one broker of three with SIGKILL under push, pop
// and ack load: its partitions answer unavailable within a second while
// the others keep serving; after its restart nothing it acknowledged is
// lost and nothing completed comes back. Then a million messages go
// through the cluster with no write to etcd (its own metrics say so).
func TestClusterKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills broker processes")
	}
	c := startCluster3(t)
	ctx := testContext(t, 4*time.Minute)
	cl := c.clients[0]
	const parts = 24
	partition := func(i int) string { return fmt.Sprintf("k%d", i) }
	// Each partition gets 10 messages; 4 of them completed.
	for i := range parts {
		var items []client.Item
		for k := range 10 {
			items = append(items, client.Item{Queue: "k", Partition: partition(i), Payload: fmt.Appendf(nil, "%d-%d", i, k)})
		}
		if res, err := cl.Push(ctx, items...); err != nil || res.FirstErr() != nil {
			t.Fatalf("push: %v %v", err, res.FirstErr())
		}
		m, err := cl.Queue("k").Partition(partition(i)).Group("g").Batch(4).Pop(ctx)
		if err != nil || len(m) != 4 {
			t.Fatalf("pop: %d %v", len(m), err)
		}
		if _, err := cl.Ack(ctx, m, client.Completed, client.AckOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	victim := c.brokers[1]
	revoked := etcdCounters(t, c.brokers[0].etcdURL, "etcd_debugging_lease_revoked_total")
	killed := time.Now()
	victim.kill()
	// Within a second every partition answers: served, or unavailable.
	var down []int
	for i := range parts {
		start := time.Now()
		_, err := c.clients[2].Push(ctx, client.Item{Queue: "k", Partition: partition(i), Payload: []byte("after")})
		if took := time.Since(start); took > time.Second {
			t.Fatalf("partition %d answered after %v: %v", i, took, err)
		}
		switch protocol.CodeOf(err) {
		case protocol.CodeOK:
		case protocol.CodeUnavailable:
			down = append(down, i)
		default:
			t.Fatalf("partition %d: %v", i, err)
		}
	}
	if len(down) == 0 || len(down) == parts {
		t.Fatalf("%d of %d partitions unavailable with one broker of three down", len(down), parts)
	}
	t.Logf("%d partitions unavailable, the rest served, within %v of the kill", len(down), time.Since(killed).Round(time.Millisecond))
	if err := victim.start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, i := range down {
		var m []client.Message
		deadline := time.Now().Add(30 * time.Second)
		for {
			var err error
			m, err = c.clients[2].Queue("k").Partition(partition(i)).Group("g").Batch(100).Pop(ctx)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("partition %d after the restart: %v", i, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if len(m) != 6 || string(m[0].Payload) != fmt.Sprintf("%d-4", i) {
			t.Fatalf("partition %d after the restart: %d messages from %q, want the 6 not completed", i, len(m), firstPayload(m))
		}
	}
	// A million messages, and etcd's writes before and after. Membership
	// writes first settle: the killed broker's old registration lease
	// expires (a delete) SessionTTL (5 s) after the kill, or later: a new
	// etcd leader (the killed broker ran a voter) extends every lease by
	// the TTL when it takes over, and under load that came after a fixed
	// wait of 7 s, in the middle of the million (CI, once). So the wait is
	// for the revocation itself, then for the writes to stop.
	for deadline := time.Now().Add(60 * time.Second); etcdCounters(t, c.brokers[0].etcdURL, "etcd_debugging_lease_revoked_total") == revoked; {
		if time.Now().After(deadline) {
			t.Fatalf("the killed broker's session lease was not revoked within a minute of its restart (%v after the kill)", time.Since(killed).Round(time.Millisecond))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the killed broker's session lease revoked %v after the kill", time.Since(killed).Round(100*time.Millisecond))
	before := etcdWrites(t, c.brokers[0].etcdURL)
	for {
		time.Sleep(time.Second)
		now := etcdWrites(t, c.brokers[0].etcdURL)
		if now == before {
			break
		}
		before = now
	}
	const total, batch = 1_000_000, 1000
	for sent := 0; sent < total; {
		var items []client.Item
		for k := 0; k < batch; k++ {
			items = append(items, client.Item{Queue: "bulk", Partition: partition((sent + k) % parts), Payload: []byte("m")})
		}
		if res, err := c.any().Push(ctx, items...); err != nil || res.FirstErr() != nil {
			t.Fatalf("bulk push: %v %v", err, res.FirstErr())
		}
		sent += batch
	}
	for got := 0; got < total; {
		m, err := c.any().Queue("bulk").Group("g").Batch(batch).Partitions(parts).Pop(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(m) == 0 {
			t.Fatalf("bulk: %d of %d popped, then nothing", got, total)
		}
		if _, err := c.any().Ack(ctx, m, client.Completed, client.AckOptions{}); err != nil {
			t.Fatal(err)
		}
		got += len(m)
	}
	after := etcdWrites(t, c.brokers[0].etcdURL)
	t.Logf("etcd writes (puts, deletes, txns) around %d messages pushed, popped and acked: %d before, %d after", total, before, after)
	if after != before {
		t.Fatalf("etcd took %d writes during %d messages: the data path must write none", after-before, total)
	}
}

func firstPayload(m []client.Message) string {
	if len(m) == 0 {
		return ""
	}
	return string(m[0].Payload)
}

// etcdWrites sums etcd's counters of puts, deletes and transactions, from
// the member's Prometheus metrics.
func etcdWrites(t *testing.T, etcdURL string) int64 {
	t.Helper()
	return etcdCounters(t, etcdURL, "etcd_mvcc_put_total", "etcd_mvcc_delete_total", "etcd_mvcc_txn_total")
}

// etcdCounters sums the named counters of the member's Prometheus metrics;
// each must be there.
func etcdCounters(t *testing.T, etcdURL string, names ...string) int64 {
	t.Helper()
	resp, err := http.Get(etcdURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sum int64
	seen := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		for _, name := range names {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("%q: %v", line, err)
				}
				sum += int64(f)
				seen++
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if seen != len(names) {
		t.Fatal(fmt.Errorf("etcd's metrics lack one of %v", names))
	}
	return sum
}
