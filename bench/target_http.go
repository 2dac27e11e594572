package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// httpTarget drives Regent through Queen's HTTP API v1 with keep-alive
// connections: a producer holds InFlight connections (HTTP/1.1 has one
// request at a time per connection), a consumer InFlight+1 (its pops and
// its acks in flight).
type httpTarget struct {
	base      string // http://host:port
	token     string // sent as "Authorization: Bearer" when set
	queue     string
	conns     int
	multiPart int
}

func (t *httpTarget) Name() string { return TargetRegentHTTP }

func (t *httpTarget) client(conns int) *http.Client {
	var rt http.RoundTripper = &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns,
		MaxConnsPerHost: conns, DisableCompression: true}
	if t.token != "" {
		rt = bearer{rt, "Bearer " + t.token}
	}
	return &http.Client{Transport: rt}
}

// bearer adds the token to every request.
type bearer struct {
	rt  http.RoundTripper
	hdr string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", b.hdr)
	return b.rt.RoundTrip(r)
}

func (b bearer) CloseIdleConnections() {
	if c, ok := b.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t *httpTarget) Setup(ctx context.Context, c *Config) error {
	t.queue, t.conns, t.multiPart = c.Queue, c.InFlight, 1
	if c.spread() {
		t.multiPart = c.Batch
	}
	o := queueOptions(c)
	body := fmt.Sprintf(`{"queue":%q,"options":{"leaseTime":%d,"retryLimit":%d,"retryDelay":%d}}`,
		c.Queue, int(o.LeaseTime.Seconds()), o.RetryLimit, o.RetryDelay.Milliseconds())
	hc := t.client(1)
	defer hc.CloseIdleConnections()
	_, err := t.post(ctx, hc, "/api/v1/configure", []byte(body), http.StatusOK, http.StatusCreated)
	return err
}

// post sends a JSON body and returns the answer's body, or an error when
// the status is not one of ok.
func (t *httpTarget) post(ctx context.Context, hc *http.Client, path string, body []byte, ok ...int) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return do(hc, req, ok...)
}

func do(hc *http.Client, req *http.Request, ok ...int) ([]byte, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	for _, s := range ok {
		if resp.StatusCode == s {
			return b, nil
		}
	}
	return nil, fmt.Errorf("bench: %s %s: status %d: %.200s", req.Method, req.URL.Path, resp.StatusCode, b)
}

func (t *httpTarget) Producer(ctx context.Context, id int) (Producer, error) {
	return &httpProducer{t: t, hc: t.client(t.conns)}, nil
}

func (t *httpTarget) Consumer(ctx context.Context, id int, group string) (Consumer, error) {
	url := fmt.Sprintf("%s/api/v1/pop/queue/%s?consumerGroup=%s&wait=true&timeout=200&partitions=%d&batch=",
		t.base, t.queue, group, t.multiPart)
	return &httpConsumer{t: t, hc: t.client(t.conns + 1), group: group, url: url}, nil
}

func (t *httpTarget) Close() error { return nil }

type httpProducer struct {
	t  *httpTarget
	hc *http.Client
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (p *httpProducer) Push(ctx context.Context, msgs []Msg) (int, error) {
	b := bufPool.Get().(*bytes.Buffer)
	defer bufPool.Put(b)
	b.Reset()
	b.WriteString(`{"items":[`)
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"queue":`)
		b.WriteString(strconv.Quote(p.t.queue))
		b.WriteString(`,"partition":`)
		b.WriteString(strconv.Quote(m.Partition))
		b.WriteString(`,"payload":`)
		b.Write(m.Payload)
		b.WriteByte('}')
	}
	b.WriteString(`]}`)
	ans, err := p.t.post(ctx, p.hc, "/api/v1/push", b.Bytes(), http.StatusCreated)
	if err != nil {
		return 0, err
	}
	n := bytes.Count(ans, []byte(`"status":"queued"`))
	if n < len(msgs) {
		return n, fmt.Errorf("bench: push: %d of %d items not queued: %.200s", len(msgs)-n, len(msgs), ans)
	}
	return n, nil
}

func (p *httpProducer) Close() error { p.hc.CloseIdleConnections(); return nil }

type httpConsumer struct {
	t     *httpTarget
	hc    *http.Client
	group string
	url   string
}

func (c *httpConsumer) Pop(ctx context.Context, max int) (Delivery, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+strconv.Itoa(max), nil)
	if err != nil {
		return nil, err
	}
	body, err := do(c.hc, req, http.StatusOK, http.StatusNoContent)
	if err != nil {
		return nil, err
	}
	d := &httpDelivery{c: c}
	if len(body) > 0 {
		if err := d.parse(body); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (c *httpConsumer) Close() error { c.hc.CloseIdleConnections(); return nil }

// httpDelivery is a pop answer, read with a scanner that knows the order in
// which Regent writes a message's keys (id, transactionId, ..., data, ...,
// partitionId, ..., leaseId): a full JSON decode would cost the client more
// CPU than the server spends, on a machine they share.
type httpDelivery struct {
	c    *httpConsumer
	msgs []httpMsg
}

type httpMsg struct {
	txn, partitionID, leaseID, data []byte
}

func (d *httpDelivery) parse(b []byte) error {
	i := bytes.Index(b, []byte(`"messages":[`))
	if i < 0 {
		return fmt.Errorf("bench: pop answer without messages: %.200s", b)
	}
	rest := b[i:]
	str := func(key string) []byte {
		k := bytes.Index(rest, []byte(`"`+key+`":"`))
		if k < 0 {
			return nil
		}
		rest = rest[k+len(key)+4:]
		e := bytes.IndexByte(rest, '"')
		if e < 0 {
			return nil
		}
		v := rest[:e]
		rest = rest[e:]
		return v
	}
	for {
		var m httpMsg
		if m.txn = str("transactionId"); m.txn == nil {
			return nil
		}
		k := bytes.Index(rest, []byte(`"data":`))
		if k < 0 {
			return fmt.Errorf("bench: pop answer: message without data")
		}
		rest = rest[k+7:]
		m.data = rest
		if m.partitionID = str("partitionId"); m.partitionID == nil {
			return fmt.Errorf("bench: pop answer: message without partitionId")
		}
		m.leaseID = str("leaseId")
		d.msgs = append(d.msgs, m)
	}
}

func (d *httpDelivery) Len() int { return len(d.msgs) }

// Payload is the message's data and whatever follows it in the answer: the
// stamp at its start is all the harness reads.
func (d *httpDelivery) Payload(i int) []byte { return d.msgs[i].data }

func (d *httpDelivery) Ack(ctx context.Context, fail func(i int) bool) (int, error) {
	b := bufPool.Get().(*bytes.Buffer)
	defer bufPool.Put(b)
	b.Reset()
	b.WriteString(`{"consumerGroup":"`)
	b.WriteString(d.c.group)
	b.WriteString(`","acknowledgments":[`)
	completed := make([]bool, len(d.msgs))
	for i, m := range d.msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"transactionId":"`)
		b.Write(m.txn)
		b.WriteString(`","partitionId":"`)
		b.Write(m.partitionID)
		b.WriteString(`","leaseId":"`)
		b.Write(m.leaseID)
		if fail != nil && fail(i) {
			b.WriteString(`","status":"failed","error":"bench: failed on purpose"}`)
		} else {
			completed[i] = true
			b.WriteString(`","status":"completed"}`)
		}
	}
	b.WriteString(`]}`)
	ans, err := d.c.t.post(ctx, d.c.hc, "/api/v1/ack/batch", b.Bytes(), http.StatusOK)
	if err != nil {
		return 0, err
	}
	// One result per ack, in order: count the completed ones that took effect.
	n, k := 0, 0
	for rest := ans; k < len(completed); k++ {
		i := bytes.Index(rest, []byte(`"success":`))
		if i < 0 {
			break
		}
		rest = rest[i+10:]
		if completed[k] && bytes.HasPrefix(rest, []byte("true")) {
			n++
		}
	}
	return n, nil
}
