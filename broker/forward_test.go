package broker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/cluster"
)

// bridge is a cluster of three brokers driven through their HTTP doors as
// Queen's clients drive one: each request to a broker picked at random.
type bridge struct {
	t      *testing.T
	cl     *brokertest.Cluster
	urls   []string
	down   []bool
	hc     *http.Client
	rnd    *rand.Rand
	seed   uint64
	shards int
	owners []string // by shard, the owner's id (b1..b3)
}

func startBridge(t *testing.T) *bridge { return startBridgeOf(t, nil) }

// startBridgeOf is startBridge with the brokers' options tuned.
func startBridgeOf(t *testing.T, tune func(i int, o *broker.Options)) *bridge {
	t.Helper()
	cl := brokertest.StartCluster(t, 3, tune)
	b := &bridge{t: t, cl: cl, down: make([]bool, 3), hc: &http.Client{Timeout: 30 * time.Second}, rnd: rand.New(rand.NewPCG(7, 11))}
	t.Cleanup(b.hc.CloseIdleConnections)
	for _, br := range cl.Brokers {
		b.urls = append(b.urls, "http://"+br.HTTPAddr().String())
	}
	var m struct {
		Seed   string   `json:"seed"`
		Shards int      `json:"shards"`
		Owners []string `json:"owners"`
	}
	b.json(b.call(0, "GET", "/api/v1/cluster", nil), 200, &m)
	seed, err := strconv.ParseUint(m.Seed, 10, 64)
	if err != nil || m.Shards == 0 || len(m.Owners) != m.Shards {
		t.Fatalf("the cluster's map: %+v %v", m, err)
	}
	b.seed, b.shards, b.owners = seed, m.Shards, m.Owners
	return b
}

// answer is an HTTP answer.
type answer struct {
	status  int
	body    []byte
	elapsed time.Duration
}

// call sends a request to broker i; body, when not nil, goes as JSON.
func (b *bridge) call(i int, method, path string, body any) answer {
	b.t.Helper()
	var rd io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			b.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, b.urls[i]+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s at b%d: %v", method, path, i+1, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatalf("%s %s at b%d: %v", method, path, i+1, err)
	}
	return answer{resp.StatusCode, out, time.Since(start)}
}

// json checks a's status and decodes its body into v.
func (b *bridge) json(a answer, status int, v any) {
	b.t.Helper()
	if a.status != status {
		b.t.Fatalf("answer %d, want %d: %s", a.status, status, a.body)
	}
	if v != nil {
		if err := json.Unmarshal(a.body, v); err != nil {
			b.t.Fatalf("answer %s: %v", a.body, err)
		}
	}
}

// any is a broker that is up, picked at random.
func (b *bridge) any() int {
	for {
		if i := b.rnd.IntN(len(b.urls)); !b.down[i] {
			return i
		}
	}
}

// owner is the index of the broker owning partition of queue.
func (b *bridge) owner(queue, partition string) int {
	o := b.owners[cluster.Shard(b.seed, queue, partition, b.shards)]
	n, err := strconv.Atoi(o[1:])
	if err != nil {
		b.t.Fatalf("owner %q", o)
	}
	return n - 1
}

// partitionOwnedBy is the first partition p<n> of queue that broker i owns.
func (b *bridge) partitionOwnedBy(queue string, i int) string {
	for n := 0; ; n++ {
		if p := fmt.Sprintf("p%d", n); b.owner(queue, p) == i {
			return p
		}
	}
}

type pushItem struct {
	Queue         string `json:"queue"`
	Partition     string `json:"partition"`
	TransactionID string `json:"transactionId"`
	Payload       any    `json:"payload"`
}

type pushResult struct {
	Status        string `json:"status"`
	TransactionID string `json:"transaction_id"`
	PartitionID   string `json:"partition_id"`
	Error         string `json:"error"`
}

// push sends items through broker i and returns the results.
func (b *bridge) push(i int, items ...pushItem) []pushResult {
	b.t.Helper()
	var res []pushResult
	b.json(b.call(i, "POST", "/api/v1/push", map[string]any{"items": items}), 201, &res)
	if len(res) != len(items) {
		b.t.Fatalf("a push of %d items answered %d results", len(items), len(res))
	}
	return res
}

type popMsg struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	Partition     string          `json:"partition"`
	Queue         string          `json:"queue"`
	LeaseID       string          `json:"leaseId"`
	Data          json.RawMessage `json:"data"`
}

// pop pops through broker i (path after /api/v1/pop/queue/); 204 is an
// empty answer.
func (b *bridge) pop(i int, path string) []popMsg {
	b.t.Helper()
	return b.popAnswer(path, b.call(i, "GET", "/api/v1/pop/queue/"+path, nil))
}

// popAnswer decodes a pop's answer a.
func (b *bridge) popAnswer(path string, a answer) []popMsg {
	b.t.Helper()
	if a.status == 204 {
		return nil
	}
	var out struct {
		Messages []popMsg `json:"messages"`
	}
	b.json(a, 200, &out)
	if len(out.Messages) == 0 {
		b.t.Fatalf("pop %s: 200 without messages: %s", path, a.body)
	}
	return out.Messages
}

type ackResult struct {
	TransactionID string `json:"transactionId"`
	Success       bool   `json:"success"`
	Error         string `json:"error"`
	LeaseReleased bool   `json:"leaseReleased"`
}

func ackOf(m popMsg) map[string]any {
	return map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": "completed"}
}

// ack acks msgs through broker i, one POST /api/v1/ack each when single,
// else with one POST /api/v1/ack/batch, and checks every ack succeeded.
func (b *bridge) ack(i int, msgs []popMsg, single bool) {
	b.t.Helper()
	var res []ackResult
	if single {
		for _, m := range msgs {
			var r []ackResult
			b.json(b.call(i, "POST", "/api/v1/ack", ackOf(m)), 200, &r)
			res = append(res, r...)
		}
	} else {
		var acks []map[string]any
		for _, m := range msgs {
			acks = append(acks, ackOf(m))
		}
		b.json(b.call(i, "POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": acks}), 200, &res)
	}
	if len(res) != len(msgs) {
		b.t.Fatalf("%d acks answered %d results", len(msgs), len(res))
	}
	for k, r := range res {
		if !r.Success || r.TransactionID != msgs[k].TransactionID {
			b.t.Fatalf("ack of %s through b%d: %+v", msgs[k].TransactionID, i+1, r)
		}
	}
}

// TestHTTPBridgeServesTheCluster: Queen's data plane through any broker
// of three. 120 messages pushed over 24 partitions (each push request
// mixing partitions of every broker) come back through named-partition
// pops and any-partition long polls sent to brokers picked at random, are
// acked there with Queen's bodies (single and batch), each delivered
// exactly once, and nothing is left. A long poll of any partition parked
// at one broker is answered by a push to another's partition.
func TestHTTPBridgeServesTheCluster(t *testing.T) {
	b := startBridge(t)
	const parts, per = 24, 5
	var items []pushItem
	for n := range parts * per {
		items = append(items, pushItem{Queue: "jobs", Partition: fmt.Sprintf("p%d", n%parts), TransactionID: fmt.Sprintf("m-%d", n), Payload: map[string]int{"n": n}})
	}
	for k := 0; k < len(items); k += 10 {
		for _, r := range b.push(b.any(), items[k:k+10]...) {
			if r.Status != "queued" {
				t.Fatalf("push: %+v", r)
			}
		}
	}
	var total uint64
	for i, br := range b.cl.Brokers {
		st := br.Engine().Stats()
		if st.Pushed == 0 {
			t.Fatalf("b%d stored nothing: the partitions are not spread", i+1)
		}
		total += st.Pushed
	}
	if total != parts*per {
		t.Fatalf("%d messages stored, want %d", total, parts*per)
	}

	seen := map[string]int{}
	take := func(msgs []popMsg) {
		for _, m := range msgs {
			seen[m.TransactionID]++
		}
	}
	// The first half by named partitions.
	for p := range parts / 2 {
		i := b.any()
		msgs := b.pop(i, fmt.Sprintf("jobs/partition/p%d?batch=10&wait=true&timeout=5000", p))
		if len(msgs) != per {
			t.Fatalf("pop of p%d through b%d (owner b%d): %d messages", p, i+1, b.owner("jobs", fmt.Sprintf("p%d", p))+1, len(msgs))
		}
		take(msgs)
		b.ack(b.any(), msgs, p%2 == 0)
	}
	// The rest by any-partition long polls.
	deadline := time.Now().Add(60 * time.Second)
	for k := 0; len(seen) < parts*per; k++ {
		if time.Now().After(deadline) {
			t.Fatalf("after %d pops of any partition, %d of %d messages delivered", k, len(seen), parts*per)
		}
		msgs := b.pop(b.any(), "jobs?batch=10&wait=true&timeout=5000")
		take(msgs)
		b.ack(b.any(), msgs, k%2 == 1)
	}
	for n := range parts * per {
		if c := seen[fmt.Sprintf("m-%d", n)]; c != 1 {
			t.Fatalf("m-%d delivered %d times", n, c)
		}
	}
	for i := range b.urls {
		if msgs := b.pop(i, "jobs?batch=10"); len(msgs) != 0 {
			t.Fatalf("b%d still gives %d messages of any partition", i+1, len(msgs))
		}
	}
	for p := range parts {
		if msgs := b.pop(b.any(), fmt.Sprintf("jobs/partition/p%d?batch=10", p)); len(msgs) != 0 {
			t.Fatalf("p%d still gives %d messages", p, len(msgs))
		}
	}

	// A long poll of any partition at b1 is answered by a push to a
	// partition of b3's, leased or autoAck.
	for _, auto := range []bool{false, true} {
		q := fmt.Sprintf("later-%v", auto)
		p := b.partitionOwnedBy(q, 2)
		got := make(chan []popMsg, 1)
		go func() {
			a := b.call(0, "GET", fmt.Sprintf("/api/v1/pop/queue/%s?wait=true&timeout=20000&autoAck=%v", q, auto), nil)
			var out struct {
				Messages []popMsg `json:"messages"`
			}
			if a.status == 200 {
				json.Unmarshal(a.body, &out)
			}
			got <- out.Messages
		}()
		b.push(1, pushItem{Queue: q, Partition: p, TransactionID: "late", Payload: "x"})
		msgs := <-got
		if len(msgs) != 1 || msgs[0].TransactionID != "late" || msgs[0].Partition != p || (msgs[0].LeaseID == "") != auto {
			t.Fatalf("long poll at b1 (autoAck %v) for a push to b3's %s: %+v", auto, p, msgs)
		}
		if !auto {
			b.ack(b.any(), msgs, true)
		}
	}
}

// TestHTTPBridgeForwardsToOwner: a partition owned by b1 is pushed to
// through b2, popped through b3, its lease extended through b2, and its
// message acked through b3; a transaction sent to b2 whose items are all
// b1's is applied there; one whose items belong to two brokers is applied
// as pushes, then acks.
func TestHTTPBridgeForwardsToOwner(t *testing.T) {
	b := startBridge(t)
	p := b.partitionOwnedBy("jobs", 0)
	if r := b.push(1, pushItem{Queue: "jobs", Partition: p, TransactionID: "t-1", Payload: 1}); r[0].Status != "queued" {
		t.Fatalf("push through b2: %+v", r)
	}
	if st := b.cl.Brokers[0].Engine().Stats(); st.Pushed != 1 {
		t.Fatalf("the owner stored %d messages", st.Pushed)
	}
	msgs := b.pop(2, "jobs/partition/"+p+"?wait=true&timeout=5000")
	if len(msgs) != 1 || msgs[0].TransactionID != "t-1" || msgs[0].LeaseID == "" || msgs[0].Partition != p || msgs[0].Queue != "jobs" {
		t.Fatalf("pop through b3: %+v", msgs)
	}
	var ext []struct {
		Success   bool   `json:"success"`
		Error     string `json:"error"`
		ExpiresAt string `json:"expiresAt"`
	}
	b.json(b.call(1, "POST", "/api/v1/lease/"+msgs[0].LeaseID+"/extend", map[string]int{"seconds": 600}), 200, &ext)
	if exp, err := time.Parse(time.RFC3339Nano, ext[0].ExpiresAt); !ext[0].Success || err != nil || time.Until(exp) < 500*time.Second {
		t.Fatalf("extend through b2: %+v (%v)", ext, err)
	}
	b.json(b.call(2, "POST", "/api/v1/lease/0190a4c8-0000-7000-8000-000000000000/extend", map[string]int{"seconds": 60}), 200, &ext)
	if ext[0].Success {
		t.Fatalf("extend of a lease no broker holds: %+v", ext)
	}
	b.ack(2, msgs, true)

	// Transactions: b1's items only, through b2.
	q := b.partitionOwnedBy("next", 0)
	b.push(2, pushItem{Queue: "jobs", Partition: p, TransactionID: "t-2", Payload: 2})
	msgs = b.pop(1, "jobs/partition/"+p+"?wait=true&timeout=5000")
	if len(msgs) != 1 {
		t.Fatalf("pop of t-2: %+v", msgs)
	}
	type txnAnswer struct {
		Success bool   `json:"success"`
		Error   string `json:"error"`
		Results []struct {
			Type    string `json:"type"`
			Success bool   `json:"success"`
		} `json:"results"`
	}
	var tr txnAnswer
	ack := ackOf(msgs[0])
	ack["type"] = "ack"
	b.json(b.call(1, "POST", "/api/v1/transaction", map[string]any{"operations": []any{ack,
		map[string]any{"type": "push", "items": []pushItem{{Queue: "next", Partition: q, TransactionID: "n-1", Payload: 3}}}}}), 200, &tr)
	if !tr.Success || len(tr.Results) != 2 || !tr.Results[0].Success || !tr.Results[1].Success {
		t.Fatalf("a transaction of b1's items through b2: %+v", tr)
	}
	if got := b.pop(2, "next/partition/"+q+"?wait=true&timeout=5000"); len(got) != 1 || got[0].TransactionID != "n-1" {
		t.Fatalf("the transaction's push: %+v", got)
	}
	if got := b.pop(2, "jobs/partition/"+p); len(got) != 0 {
		t.Fatalf("the transaction's ack did not take: %+v", got)
	}
	// An ack of b1's message and pushes to b1's and b2's partitions: no
	// broker applies them as one step, so the bridge pushes, then acks (as
	// the Go client does). The push without a transactionId gets one
	// derived from the acked message, so a resend pushes nothing twice.
	b.push(0, pushItem{Queue: "jobs", Partition: p, TransactionID: "t-3", Payload: 4})
	msgs = b.pop(1, "jobs/partition/"+p+"?wait=true&timeout=5000")
	if len(msgs) != 1 || msgs[0].TransactionID != "t-3" {
		t.Fatalf("pop of t-3: %+v", msgs)
	}
	ack = ackOf(msgs[0])
	ack["type"] = "ack"
	mine, other := b.partitionOwnedBy("next2", 0), b.partitionOwnedBy("next2", 1)
	across := map[string]any{"operations": []any{ack,
		map[string]any{"type": "push", "items": []pushItem{{Queue: "next2", Partition: mine, TransactionID: "n-3", Payload: 4},
			{Queue: "next2", Partition: other, Payload: 5}}}}}
	for k := range 2 { // the second is the resend of a client that lost the answer
		tr = txnAnswer{}
		b.json(b.call(2, "POST", "/api/v1/transaction", across), 200, &tr)
		if !tr.Success || len(tr.Results) != 3 || !tr.Results[0].Success || !tr.Results[1].Success || !tr.Results[2].Success {
			t.Fatalf("a transaction across brokers (sending %d): %+v", k+1, tr)
		}
	}
	if got := b.pop(2, "next2/partition/"+mine+"?wait=true&timeout=5000"); len(got) != 1 || got[0].TransactionID != "n-3" {
		t.Fatalf("the transaction's push to b1: %+v", got)
	}
	if got := b.pop(2, "next2/partition/"+other+"?wait=true&timeout=5000"); len(got) != 1 || !strings.HasSuffix(got[0].TransactionID, "-txn-1") {
		t.Fatalf("the transaction's push to b2, sent twice: %+v", got)
	}
	if got := b.pop(2, "jobs/partition/"+p); len(got) != 0 {
		t.Fatalf("the transaction's ack did not take: %+v", got)
	}
}

// TestHTTPBridgeBrokerDown: with b3 stopped, its partitions answer 503
// within a second through the other brokers (a push of its partition
// alone, a pop of it), a push mixing its partitions with others' stores
// the others' and fails its own, and pops of any partition serve what the
// live brokers hold.
func TestHTTPBridgeBrokerDown(t *testing.T) {
	b := startBridge(t)
	const parts = 12
	var items []pushItem
	for n := range parts {
		items = append(items, pushItem{Queue: "jobs", Partition: fmt.Sprintf("p%d", n), TransactionID: fmt.Sprintf("m-%d", n), Payload: n})
	}
	b.push(b.any(), items...)
	deadP, liveP := b.partitionOwnedBy("jobs", 2), b.partitionOwnedBy("jobs", 0)
	b.cl.Stop(2)
	b.down[2] = true

	fast := func(a answer, what string) answer {
		t.Helper()
		if a.elapsed > time.Second {
			t.Fatalf("%s took %v", what, a.elapsed)
		}
		return a
	}
	for range 5 {
		i := b.any()
		if a := fast(b.call(i, "POST", "/api/v1/push", map[string]any{"items": []pushItem{{Queue: "jobs", Partition: deadP, Payload: 1}}}), "a push to a stopped broker's partition"); a.status != 503 {
			t.Fatalf("a push to the stopped b3's %s through b%d: %d %s", deadP, i+1, a.status, a.body)
		}
		if a := fast(b.call(i, "GET", "/api/v1/pop/queue/jobs/partition/"+deadP+"?wait=true&timeout=5000", nil), "a pop of a stopped broker's partition"); a.status != 503 {
			t.Fatalf("a pop of the stopped b3's %s through b%d: %d %s", deadP, i+1, a.status, a.body)
		}
	}
	i := b.any()
	var res []pushResult
	b.json(fast(b.call(i, "POST", "/api/v1/push", map[string]any{"items": []pushItem{{Queue: "jobs", Partition: deadP, Payload: 1},
		{Queue: "jobs", Partition: liveP, TransactionID: "live", Payload: 2}}}), "a mixed push"), 201, &res)
	if res[0].Status != "failed" || res[0].Error == "" || res[1].Status != "queued" {
		t.Fatalf("a push to b3's and b1's partitions through b%d: %+v", i+1, res)
	}
	// Pops of any partition give what b1 and b2 hold, and then nothing.
	got := 0
	for {
		a := fast(b.call(b.any(), "GET", "/api/v1/pop/queue/jobs?batch=10", nil), "a pop of any partition")
		if a.status == 204 {
			break
		}
		var out struct {
			Messages []popMsg `json:"messages"`
		}
		b.json(a, 200, &out)
		for _, m := range out.Messages {
			if b.owner("jobs", m.Partition) == 2 {
				t.Fatalf("a message of the stopped b3's %s was delivered", m.Partition)
			}
		}
		got += len(out.Messages)
		b.ack(b.any(), out.Messages, false)
	}
	want := 1 // "live"
	for n := range parts {
		if b.owner("jobs", fmt.Sprintf("p%d", n)) != 2 {
			want++
		}
	}
	if got != want {
		t.Fatalf("pops of any partition with b3 down gave %d messages, want %d", got, want)
	}
}

// parked is how many HTTP long polls broker i holds (its
// /metrics/prometheus).
func (b *bridge) parked(i int) int {
	b.t.Helper()
	a := b.call(i, "GET", "/metrics/prometheus", nil)
	for line := range strings.Lines(string(a.body)) {
		if v, ok := strings.CutPrefix(line, "regent_http_parked_polls "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				b.t.Fatalf("regent_http_parked_polls %q", v)
			}
			return n
		}
	}
	b.t.Fatalf("no regent_http_parked_polls in b%d's metrics", i+1)
	return 0
}

// abandon starts a long poll at broker i, waits until it is parked there,
// then goes away, and waits until the broker saw it go.
func (b *bridge) abandon(i int, path string) {
	b.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", b.urls[i]+"/api/v1/pop/queue/"+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		if resp, err := b.hc.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	brokertest.CheckFor(b.t, 10*time.Second, func() error {
		if n := b.parked(i); n != 1 {
			return fmt.Errorf("b%d holds %d long polls", i+1, n)
		}
		return nil
	})
	cancel()
	<-ended
	brokertest.CheckFor(b.t, 10*time.Second, func() error {
		if n := b.parked(i); n != 0 {
			return fmt.Errorf("b%d still holds %d long polls after its client went", i+1, n)
		}
		return nil
	})
}

// TestHTTPBridgeGivesBack: what forwarded pops take for nobody comes back.
// A long poll of a named partition of b3's, and one of any partition,
// both at b1 and both abandoned by their client, leave what they take
// afterwards to the next pop (their leases given back at b3, not left to
// expire); an abandoned autoAck long poll's take reaches the next autoAck
// pop. A long poll of any partition answered while messages land on every
// broker at once takes one broker's and leaves the rest: every message is
// then delivered exactly once.
func TestHTTPBridgeGivesBack(t *testing.T) {
	b := startBridge(t)
	cases := []struct {
		queue, pop, next string
	}{
		{"named", "named/partition/%s?wait=true&timeout=20000", "named/partition/%s"},
		{"any", "any?wait=true&timeout=20000", "any"},
		{"auto", "auto?wait=true&timeout=20000&autoAck=true", "auto?autoAck=true"},
	}
	for _, c := range cases {
		p := b.partitionOwnedBy(c.queue, 2)
		pop, next := c.pop, c.next
		if c.queue == "named" {
			pop, next = fmt.Sprintf(pop, p), fmt.Sprintf(next, p)
		}
		b.abandon(0, pop)
		b.push(1, pushItem{Queue: c.queue, Partition: p, TransactionID: "x", Payload: 1})
		brokertest.CheckFor(t, 10*time.Second, func() error {
			msgs := b.pop(0, next)
			if len(msgs) != 1 || msgs[0].TransactionID != "x" {
				return fmt.Errorf("%s: the next pop after an abandoned one got %+v", c.queue, msgs)
			}
			return nil
		})
	}

	// Messages on every broker at once, for a long poll of any partition.
	got := make(chan []popMsg, 1)
	go func() { got <- b.pop(0, "race?batch=10&wait=true&timeout=20000") }()
	brokertest.CheckFor(t, 10*time.Second, func() error {
		if n := b.parked(0); n != 1 {
			return fmt.Errorf("b1 holds %d long polls", n)
		}
		return nil
	})
	var items []pushItem
	for i := range 3 {
		for k := range 4 {
			items = append(items, pushItem{Queue: "race", Partition: b.partitionOwnedBy("race", i), TransactionID: fmt.Sprintf("r-%d-%d", i, k), Payload: k})
		}
	}
	b.push(1, items...)
	seen := map[string]int{}
	first := <-got
	for _, m := range first {
		seen[m.TransactionID]++
	}
	b.ack(2, first, false)
	brokertest.CheckFor(t, 10*time.Second, func() error {
		msgs := b.pop(b.any(), "race?batch=10")
		for _, m := range msgs {
			seen[m.TransactionID]++
		}
		b.ack(b.any(), msgs, false)
		if len(seen) < len(items) {
			return fmt.Errorf("%d of %d messages delivered", len(seen), len(items))
		}
		return nil
	})
	for _, it := range items {
		if seen[it.TransactionID] != 1 {
			t.Fatalf("%s delivered %d times", it.TransactionID, seen[it.TransactionID])
		}
	}
}
