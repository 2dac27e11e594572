package bench

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/regentmq/regent/client"
)

// regentTarget drives Regent through the Go client (binary protocol).
type regentTarget struct {
	addr      string
	token     string      // a JWT, when the broker has auth on
	tls       *tls.Config // TLS to a terminator in front of the broker
	queue     string
	multiPart int // partitions one pop may lease
}

func (t *regentTarget) Name() string { return TargetRegent }

func (t *regentTarget) dial(ctx context.Context) (*client.Client, error) {
	opts := []client.Option{client.WithConns(1), client.WithName("regent-bench")}
	if t.token != "" {
		opts = append(opts, client.WithToken(t.token))
	}
	if t.tls != nil {
		opts = append(opts, client.WithTLS(t.tls))
	}
	return client.Dial(ctx, t.addr, opts...)
}

func (t *regentTarget) Setup(ctx context.Context, c *Config) error {
	t.queue = c.Queue
	t.multiPart = 1
	if c.spread() {
		t.multiPart = c.Batch
	}
	cl, err := t.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	o := queueOptions(c)
	_, err = cl.Configure(ctx, c.Queue, o)
	return err
}

// queueOptions: the broker's defaults, except a short lease (a consumer
// that stops mid-run gives its messages back soon) and, for retry-storm,
// retries without delay and without end.
func queueOptions(c *Config) client.QueueOptions {
	o := client.DefaultQueueOptions()
	o.LeaseTime = 30 * time.Second
	if c.failing() {
		o.RetryLimit = 1_000_000
		o.RetryDelay = 0
	}
	return o
}

func (t *regentTarget) Producer(ctx context.Context, id int) (Producer, error) {
	cl, err := t.dial(ctx)
	if err != nil {
		return nil, err
	}
	return &regentProducer{c: cl, queue: t.queue}, nil
}

func (t *regentTarget) Consumer(ctx context.Context, id int, group string) (Consumer, error) {
	cl, err := t.dial(ctx)
	if err != nil {
		return nil, err
	}
	return &regentConsumer{c: cl, req: client.PopRequest{Queue: t.queue, Group: group, Partitions: t.multiPart,
		Wait: true, Timeout: 200 * time.Millisecond}, free: make(chan *regentDelivery, 64)}, nil
}

func (t *regentTarget) Close() error { return nil }

type regentProducer struct {
	c     *client.Client
	queue string
}

func (p *regentProducer) Push(ctx context.Context, msgs []Msg) (int, error) {
	items := make([]client.Item, len(msgs))
	for i, m := range msgs {
		items[i] = client.Item{Queue: p.queue, Partition: m.Partition, Payload: m.Payload}
	}
	res, err := p.c.Push(ctx, items...)
	if err != nil {
		return 0, err
	}
	n := 0
	var first error
	for _, r := range res {
		if r.Status == client.PushQueued {
			n++
		} else if first == nil {
			first = r.Err
		}
	}
	return n, first
}

func (p *regentProducer) Close() error { return p.c.Close() }

type regentConsumer struct {
	c   *client.Client
	req client.PopRequest
	// free keeps deliveries whose ack is done, for the next pops: their
	// client.Batch memory is reused, as a consumer written for speed does.
	free chan *regentDelivery
}

func (c *regentConsumer) Pop(ctx context.Context, max int) (Delivery, error) {
	req := c.req
	req.Batch = max
	var d *regentDelivery
	select {
	case d = <-c.free:
	default:
		d = &regentDelivery{c: c}
	}
	if err := c.c.PopBatch(ctx, req, &d.b); err != nil {
		c.recycle(d)
		return nil, err
	}
	if len(d.b.Messages) == 0 {
		c.recycle(d)
		return emptyDelivery{}, nil
	}
	return d, nil
}

func (c *regentConsumer) recycle(d *regentDelivery) {
	select {
	case c.free <- d:
	default:
	}
}

func (c *regentConsumer) Close() error { return c.c.Close() }

type emptyDelivery struct{}

func (emptyDelivery) Len() int                                           { return 0 }
func (emptyDelivery) Payload(int) []byte                                 { return nil }
func (emptyDelivery) Ack(context.Context, func(i int) bool) (int, error) { return 0, nil }

type regentDelivery struct {
	c       *regentConsumer
	b       client.Batch
	sent    bool // SendAck was called; Ack waits for its answer
	sendErr error
}

// SendAck sends the completed ack of every message; Ack then waits for it.
func (d *regentDelivery) SendAck(ctx context.Context) {
	d.sent = true
	d.sendErr = d.c.c.SendAck(ctx, &d.b, client.Completed, client.AckOptions{})
}

func (d *regentDelivery) Len() int             { return len(d.b.Messages) }
func (d *regentDelivery) Payload(i int) []byte { return d.b.Messages[i].Payload }

func (d *regentDelivery) Ack(ctx context.Context, fail func(i int) bool) (int, error) {
	defer d.c.recycle(d)
	var res []client.AckResult
	var err error
	switch {
	case d.sent:
		d.sent = false
		if err = d.sendErr; err == nil {
			res, err = d.c.c.WaitAck(ctx, &d.b)
		}
	case fail == nil:
		res, err = d.c.c.AckBatch(ctx, &d.b, client.Completed, client.AckOptions{})
	default:
		acks := make([]client.Ack, len(d.b.Messages))
		for i, m := range d.b.Messages {
			acks[i] = client.Ack{Message: m, Status: client.Completed}
			if fail(i) {
				acks[i].Status, acks[i].Error = client.Failed, "bench: failed on purpose"
			}
		}
		res, err = d.c.c.AckEach(ctx, acks...)
		if err == nil {
			n := 0
			for i, r := range res {
				if r.Err == nil && acks[i].Status == client.Completed {
					n++
				}
			}
			return n, nil
		}
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range res {
		if r.Err == nil {
			n++
		}
	}
	return n, nil
}
