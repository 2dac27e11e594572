package netserver_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
)

// stallWorkload is one shape of the load: producers pushing batches of
// large messages over several partitions, each producer one push at a
// time, while two consumer groups pop and ack them.
type stallWorkload struct {
	http       bool // push, pop and ack over the HTTP bridge; the Go client over TCP otherwise
	producers  int
	batch      int // messages per push
	size       int // payload bytes
	partitions int
	pushes     int // per producer
	popBatch   int
}

func (w stallWorkload) total() int { return w.producers * w.pushes * w.batch }

func (w stallWorkload) String() string {
	door := "tcp"
	if w.http {
		door = "http"
	}
	return fmt.Sprintf("%s/%dx%dx%dx%s/%dp", door, w.producers, w.pushes, w.batch, sizeName(w.size), w.partitions)
}

func sizeName(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// The workloads that stalled the broker when this test was written: 6
// producers pushing 2 × 1 MiB at a time over 8 partitions, 8 pushing 16 ×
// 64 KiB over 16, over either door; and one producer pushing 1 MiB messages
// long enough for several snapshots, each followed by compaction (the live
// messages of the oldest segment copied forward while pushes go on).
func stallWorkloads(pushesBig, pushesSmall, pushesSingle int) []stallWorkload {
	big := stallWorkload{producers: 6, batch: 2, size: 1 << 20, partitions: 8, pushes: pushesBig, popBatch: 4}
	small := stallWorkload{producers: 8, batch: 16, size: 64 << 10, partitions: 16, pushes: pushesSmall, popBatch: 32}
	single := stallWorkload{producers: 1, batch: 1, size: 1 << 20, partitions: 4, pushes: pushesSingle, popBatch: 4}
	bigHTTP, smallHTTP := big, small
	bigHTTP.http, smallHTTP.http = true, true
	return []stallWorkload{big, small, bigHTTP, smallHTTP, single}
}

const (
	stallQueue = "stall"
	// consumersPerGroup pop and ack concurrently in each of stallGroups.
	consumersPerGroup = 2
)

var stallGroups = [...]string{"g1", "g2"}

// stallResult is what one run saw.
// (Its fields are exported for the long test, whose runs report in JSON.)
type stallResult struct {
	Pushes      int64 // messages answered queued
	Overloaded  int64 // overloaded answers (to pushes, pops or acks), each retried
	Acks        int64 // messages acked
	Snapshots   int64
	Truncations int64 // snapshots that dropped old journal segments
	Moved       int64 // records that compaction copied forward
	Stalled     bool
	Dump        string   // the broker's goroutines when it stalled
	Problems    []string // anything else wrong
	Elapsed     time.Duration
	// BrokerErrors are the lines the broker logged at level error.
	BrokerErrors []string
}

// stallPayload is message id's payload: size random bytes drawn from seed
// and id, or for HTTP a JSON string of size bytes (quotes included) of
// random base64 letters.
func stallPayload(seed uint64, id, size int, asJSON bool) []byte {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[0:], seed)
	binary.LittleEndian.PutUint64(key[8:], uint64(id))
	r := rand.NewChaCha8(key)
	b := make([]byte, size)
	r.Read(b)
	if asJSON {
		const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
		for i := range b {
			b[i] = letters[b[i]&63]
		}
		b[0], b[size-1] = '"', '"'
	}
	return b
}

func stallTxn(id int) string { return fmt.Sprintf("m%06d", id) }

func stallPartition(w stallWorkload, id int) string { return fmt.Sprintf("p%02d", id%w.partitions) }

// stallRun is one run of a workload on a broker: the producers, the
// consumers, the watchdog, and the ledger of what was pushed and delivered.
type stallRun struct {
	w    stallWorkload
	seed uint64
	b    *stallBroker
	ctx  context.Context
	stop context.CancelFunc // ends the run (a stall or a problem)
	wd   *watchdog
	hc   *http.Client

	pushes, overloaded, acks atomic.Int64

	mu       sync.Mutex
	queued   []bool    // per message: answered queued
	seen     [][]uint8 // per group, per message: deliveries
	left     []int     // per group: messages not yet delivered
	complete []chan struct{}
	problems []string
}

// problem notes what went wrong and ends the run: a producer or consumer
// that gave up would otherwise pass for a stall.
func (r *stallRun) problem(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.problems) < 20 {
		r.problems = append(r.problems, fmt.Sprintf(format, args...))
	}
	r.stop()
}

// backoff waits before trying an overloaded request again; false when the
// run is over.
func (r *stallRun) backoff(attempt int) bool {
	t := time.NewTimer(min(time.Duration(5<<min(attempt, 6))*time.Millisecond, 200*time.Millisecond))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.ctx.Done():
		return false
	}
}

// runStall runs w once on b. It returns when every message was pushed and
// delivered to both groups, or when the watchdog found a stall.
func runStall(w stallWorkload, seed uint64, b *stallBroker) stallResult {
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &stallRun{w: w, seed: seed, b: b, ctx: ctx, stop: cancel, wd: startWatchdog(b, cancel),
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	defer r.hc.CloseIdleConnections()
	n := w.total()
	r.queued = make([]bool, n)
	for range stallGroups {
		r.seen = append(r.seen, make([]uint8, n))
		r.left = append(r.left, n)
		r.complete = append(r.complete, make(chan struct{}))
	}
	setup, err := r.dial()
	if err == nil {
		_, err = setup.Configure(ctx, stallQueue, client.DefaultQueueOptions())
		setup.Close()
	}
	if err != nil {
		r.wd.finish()
		return stallResult{Problems: []string{"setup: " + err.Error()}}
	}

	var wg sync.WaitGroup
	for g := range stallGroups {
		for range consumersPerGroup {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.consume(g)
			}()
		}
	}
	for p := range w.producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.produce(p)
		}()
	}
	wg.Wait()
	stalled := r.wd.finish()
	res := stallResult{
		Pushes: r.pushes.Load(), Overloaded: r.overloaded.Load(), Acks: r.acks.Load(),
		Snapshots: b.j.snapshots.Load(), Truncations: b.j.truncations.Load(), Moved: b.logs.moved.Load(),
		Stalled: stalled, Dump: r.wd.dump, Elapsed: time.Since(start),
	}
	if !stalled && len(r.problems) == 0 {
		r.checkDrained()
		r.checkLedger()
	}
	res.Problems = r.problems
	return res
}

// checkLedger: every message answered queued once, and delivered exactly
// once to each group.
func (r *stallRun) checkLedger() {
	r.mu.Lock()
	defer r.mu.Unlock()
	var bad []string
	for id, q := range r.queued {
		if !q {
			bad = append(bad, fmt.Sprintf("%s never answered queued", stallTxn(id)))
		}
		for g := range stallGroups {
			if d := r.seen[g][id]; d != 1 {
				bad = append(bad, fmt.Sprintf("%s delivered %d times to %s", stallTxn(id), d, stallGroups[g]))
			}
		}
	}
	if len(bad) > 10 {
		bad = append(bad[:10], fmt.Sprintf("and %d more", len(bad)-10))
	}
	r.problems = append(r.problems, bad...)
}

// deliver notes a delivery to group g and checks its payload.
func (r *stallRun) deliver(g int, txn string, payload []byte) {
	id, err := strconv.Atoi(strings.TrimPrefix(txn, "m"))
	if err != nil || id < 0 || id >= len(r.queued) || stallTxn(id) != txn {
		r.problem("%s: delivered a message never pushed: %q", stallGroups[g], txn)
		return
	}
	if !bytes.Equal(payload, stallPayload(r.seed, id, r.w.size, r.w.http)) {
		r.problem("%s: %s delivered with another payload (%d bytes, %d pushed)", stallGroups[g], txn, len(payload), r.w.size)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[g][id] < 255 {
		r.seen[g][id]++
	}
	if r.seen[g][id] == 1 {
		r.left[g]--
		if r.left[g] == 0 {
			close(r.complete[g])
		}
	}
}

func (r *stallRun) dial() (*client.Client, error) {
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	return client.Dial(ctx, r.b.b.TCPAddr().String(), client.WithConns(1))
}

// produce pushes producer p's messages, w.batch per push, one push at a
// time.
func (r *stallRun) produce(p int) {
	var c *client.Client
	if !r.w.http {
		var err error
		if c, err = r.dial(); err != nil {
			r.problem("producer %d: %v", p, err)
			return
		}
		defer c.Close()
	}
	ids := make([]int, r.w.batch)
	for i := range r.w.pushes {
		for k := range ids {
			ids[k] = (p*r.w.pushes+i)*r.w.batch + k
		}
		if !r.push(c, ids) {
			return
		}
	}
}

// push pushes messages ids in one request until each is answered queued
// (what is answered overloaded is pushed again after a backoff); false when
// the run must stop.
func (r *stallRun) push(c *client.Client, ids []int) bool {
	payloads := make(map[int][]byte, len(ids))
	for _, id := range ids {
		payloads[id] = stallPayload(r.seed, id, r.w.size, r.w.http)
	}
	for attempt := 0; len(ids) > 0; attempt++ {
		var status []string
		var err error
		if r.w.http {
			status, err = r.pushHTTP(ids, payloads)
		} else {
			status, err = r.pushTCP(c, ids, payloads)
		}
		switch {
		case r.ctx.Err() != nil:
			return false
		case err != nil:
			r.problem("push %s...: %v", stallTxn(ids[0]), err)
			return false
		}
		var again []int
		for k, id := range ids {
			switch status[k] {
			case "queued":
				r.pushes.Add(1)
				r.wd.progress()
				r.mu.Lock()
				r.queued[id] = true
				r.mu.Unlock()
			case "overloaded":
				again = append(again, id)
			default:
				r.problem("push %s answered %s", stallTxn(id), status[k])
				return false
			}
		}
		if len(again) > 0 {
			r.overloaded.Add(1)
			if !r.backoff(attempt) {
				return false
			}
		}
		ids = again
	}
	return true
}

// pushTCP pushes ids and returns each one's answer: queued, overloaded,
// or what else it was.
func (r *stallRun) pushTCP(c *client.Client, ids []int, payloads map[int][]byte) ([]string, error) {
	items := make([]client.Item, len(ids))
	for k, id := range ids {
		items[k] = client.Item{Queue: stallQueue, Partition: stallPartition(r.w, id), TransactionID: stallTxn(id), Payload: payloads[id]}
	}
	status := make([]string, len(ids))
	res, err := c.Push(r.ctx, items...)
	if err != nil {
		if protocol.CodeOf(err) != protocol.CodeOverloaded {
			return nil, err
		}
		for k := range status {
			status[k] = "overloaded"
		}
		return status, nil
	}
	for k, a := range res {
		switch {
		case a.Status == client.PushQueued:
			status[k] = "queued"
		case protocol.CodeOf(a.Err) == protocol.CodeOverloaded:
			status[k] = "overloaded"
		default:
			status[k] = fmt.Sprintf("%v (%v)", a.Status, a.Err)
		}
	}
	return status, nil
}

// overloadedStatus: the HTTP statuses of an overloaded broker (429 is the
// overloaded code's own; 503 is what a proxy or a busy bridge says).
func overloadedStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable
}

func (r *stallRun) pushHTTP(ids []int, payloads map[int][]byte) ([]string, error) {
	var body bytes.Buffer
	body.WriteString(`{"items":[`)
	for k, id := range ids {
		if k > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"queue":%q,"partition":%q,"transactionId":%q,"payload":`, stallQueue, stallPartition(r.w, id), stallTxn(id))
		body.Write(payloads[id])
		body.WriteByte('}')
	}
	body.WriteString("]}")
	code, out, err := r.httpDo("POST", "/api/v1/push", &body)
	if err != nil {
		return nil, err
	}
	status := make([]string, len(ids))
	if overloadedStatus(code) {
		for k := range status {
			status[k] = "overloaded"
		}
		return status, nil
	}
	if code != http.StatusCreated {
		return nil, fmt.Errorf("status %d: %.200s", code, out)
	}
	var res []struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res) != len(ids) {
		return nil, fmt.Errorf("answer %.200s: %v", out, err)
	}
	for k, a := range res {
		switch {
		case a.Status == "failed" && strings.Contains(strings.ToLower(a.Error), "overloaded"):
			status[k] = "overloaded"
		case a.Status == "failed":
			status[k] = "failed: " + a.Error
		default:
			status[k] = a.Status
		}
	}
	return status, nil
}

func (r *stallRun) httpDo(method, path string, body io.Reader) (int, []byte, error) {
	return r.httpDoCtx(r.ctx, method, path, body)
}

func (r *stallRun) httpDoCtx(ctx context.Context, method, path string, body io.Reader) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, r.b.url+path, body)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// consume pops and acks for group g until the group has every message.
func (r *stallRun) consume(g int) {
	gctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	go func() {
		select {
		case <-r.complete[g]:
			cancel() // ends a long poll that can find nothing more
		case <-gctx.Done():
		}
	}()
	var c *client.Client
	if !r.w.http {
		var err error
		if c, err = r.dial(); err != nil {
			r.problem("consumer %s: %v", stallGroups[g], err)
			return
		}
		defer c.Close()
	}
	for attempt := 0; gctx.Err() == nil; {
		var overloaded bool
		var err error
		if r.w.http {
			overloaded, err = r.popAckHTTP(gctx, g)
		} else {
			overloaded, err = r.popAckTCP(gctx, c, g)
		}
		switch {
		case r.ctx.Err() != nil:
			return
		case err != nil:
			r.problem("consumer %s: %v", stallGroups[g], err)
			return
		case overloaded:
			r.overloaded.Add(1)
			if !r.backoff(attempt) {
				return
			}
			attempt++
		default:
			attempt = 0
		}
	}
}

const stallPollTimeout = 500 * time.Millisecond

func (r *stallRun) popAckTCP(gctx context.Context, c *client.Client, g int) (overloaded bool, err error) {
	msgs, err := c.Pop(gctx, client.PopRequest{Queue: stallQueue, Group: stallGroups[g], Batch: r.w.popBatch,
		Wait: true, Timeout: stallPollTimeout})
	if err != nil {
		if gctx.Err() != nil {
			return false, nil
		}
		if protocol.CodeOf(err) == protocol.CodeOverloaded {
			return true, nil
		}
		return false, fmt.Errorf("pop: %w", err)
	}
	for _, m := range msgs {
		r.deliver(g, m.TransactionID, m.Payload)
	}
	if len(msgs) == 0 {
		return false, nil
	}
	for attempt := 0; ; attempt++ {
		res, err := c.Ack(r.ctx, msgs, client.Completed, client.AckOptions{})
		if err != nil && protocol.CodeOf(err) != protocol.CodeOverloaded {
			return false, fmt.Errorf("ack: %w", err)
		}
		again := err != nil
		for i, a := range res {
			switch {
			case a.Err == nil:
			case protocol.CodeOf(a.Err) == protocol.CodeOverloaded:
				again = true
			default:
				return false, fmt.Errorf("ack of %s refused: %w", msgs[i].TransactionID, a.Err)
			}
		}
		if !again {
			r.acks.Add(int64(len(msgs)))
			r.wd.progress()
			return false, nil
		}
		r.overloaded.Add(1)
		if !r.backoff(attempt) {
			return false, nil
		}
	}
}

// httpPop is the part of Queen's pop answer the consumers read.
type httpPop struct {
	Messages []struct {
		TransactionID string          `json:"transactionId"`
		PartitionID   string          `json:"partitionId"`
		LeaseID       string          `json:"leaseId"`
		Data          json.RawMessage `json:"data"`
	} `json:"messages"`
}

func (r *stallRun) popPath(g int, wait bool) string {
	return fmt.Sprintf("/api/v1/pop/queue/%s?consumerGroup=%s&batch=%d&wait=%t&timeout=%d",
		stallQueue, stallGroups[g], r.w.popBatch, wait, stallPollTimeout.Milliseconds())
}

func (r *stallRun) popAckHTTP(gctx context.Context, g int) (overloaded bool, err error) {
	code, out, err := r.httpDoCtx(gctx, "GET", r.popPath(g, true), nil)
	switch {
	case gctx.Err() != nil:
		return false, nil
	case err != nil:
		return false, fmt.Errorf("pop: %w", err)
	case code == http.StatusNoContent:
		return false, nil
	case overloadedStatus(code):
		return true, nil
	case code != http.StatusOK:
		return false, fmt.Errorf("pop: status %d: %.200s", code, out)
	}
	var pop httpPop
	if err := json.Unmarshal(out, &pop); err != nil {
		return false, fmt.Errorf("pop: %w", err)
	}
	type ack struct {
		TransactionID string `json:"transactionId"`
		PartitionID   string `json:"partitionId"`
		LeaseID       string `json:"leaseId"`
		Status        string `json:"status"`
	}
	acks := make([]ack, len(pop.Messages))
	for i, m := range pop.Messages {
		r.deliver(g, m.TransactionID, m.Data)
		acks[i] = ack{m.TransactionID, m.PartitionID, m.LeaseID, "completed"}
	}
	if len(acks) == 0 {
		return false, nil
	}
	body, err := json.Marshal(map[string]any{"consumerGroup": stallGroups[g], "acknowledgments": acks})
	if err != nil {
		return false, err
	}
	for attempt := 0; ; attempt++ {
		code, out, err := r.httpDo("POST", "/api/v1/ack/batch", bytes.NewReader(body))
		if err != nil {
			if r.ctx.Err() != nil {
				return false, nil
			}
			return false, fmt.Errorf("ack: %w", err)
		}
		again := overloadedStatus(code)
		if !again {
			if code != http.StatusOK {
				return false, fmt.Errorf("ack: status %d: %.200s", code, out)
			}
			var res []struct {
				Success bool   `json:"success"`
				Error   string `json:"error"`
			}
			if err := json.Unmarshal(out, &res); err != nil || len(res) != len(acks) {
				return false, fmt.Errorf("ack: answer %.200s: %v", out, err)
			}
			for i, a := range res {
				switch {
				case a.Success:
				case strings.Contains(strings.ToLower(a.Error), "overloaded"):
					again = true
				default:
					return false, fmt.Errorf("ack of %s refused: %s", acks[i].TransactionID, a.Error)
				}
			}
		}
		if !again {
			r.acks.Add(int64(len(acks)))
			r.wd.progress()
			return false, nil
		}
		r.overloaded.Add(1)
		if !r.backoff(attempt) {
			return false, nil
		}
	}
}

// checkDrained: once each group had every message, a pop that does not
// wait finds nothing more for it (no message is delivered twice).
func (r *stallRun) checkDrained() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var c *client.Client
	if !r.w.http {
		var err error
		if c, err = r.dial(); err != nil {
			r.problem("drain check: %v", err)
			return
		}
		defer c.Close()
	}
	for g, group := range stallGroups {
		n := 0
		if r.w.http {
			code, out, err := r.httpDoCtx(ctx, "GET", r.popPath(g, false), nil)
			switch {
			case err != nil:
				r.problem("drain check %s: %v", group, err)
				continue
			case code == http.StatusOK:
				var pop httpPop
				json.Unmarshal(out, &pop)
				n = len(pop.Messages)
			case code != http.StatusNoContent:
				r.problem("drain check %s: status %d: %.200s", group, code, out)
			}
		} else {
			msgs, err := c.Pop(ctx, client.PopRequest{Queue: stallQueue, Group: group, Batch: r.w.popBatch})
			if err != nil {
				r.problem("drain check %s: %v", group, err)
				continue
			}
			n = len(msgs)
		}
		if n > 0 {
			r.problem("%s: %d more messages delivered after every message was", group, n)
		}
	}
}
