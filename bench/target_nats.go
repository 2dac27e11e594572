package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsTarget drives NATS JetStream with the nats.go client: one stream with
// file storage whose subjects are queue.<partition>; push is an async
// publish (InFlight×Batch publishes pending per producer, the same
// allowance as a Regent producer's InFlight batches) whose batch is
// answered when every publish was acknowledged; each consumer group is a
// durable pull consumer with explicit acks, read by Consume (the client
// keeps pull requests outstanding) and acked with Ack (not awaited, as
// nats.go's usual use) or Nak for a failure.
type natsTarget struct {
	url      string
	stream   string
	subject  string
	inFlight int
	batch    int
}

func (t *natsTarget) Name() string { return TargetNATS }

func (t *natsTarget) connect() (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(t.url, nats.Name("regent-bench"), nats.MaxReconnects(0))
	if err != nil {
		return nil, nil, fmt.Errorf("bench: nats connect %s: %w", t.url, err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(max(t.inFlight*t.batch, 1)))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

func (t *natsTarget) Setup(ctx context.Context, c *Config) error {
	t.stream = strings.ToUpper(c.Queue)
	t.subject = c.Queue
	t.inFlight, t.batch = c.InFlight, c.Batch
	nc, js, err := t.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := js.DeleteStream(ctx, t.stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("bench: nats delete stream: %w", err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: t.stream, Subjects: []string{t.subject + ".>"},
		Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy, Replicas: 1}); err != nil {
		return fmt.Errorf("bench: nats create stream: %w", err)
	}
	for g := 0; g < c.Groups; g++ {
		if _, err := js.CreateOrUpdateConsumer(ctx, t.stream, jetstream.ConsumerConfig{Durable: groupName(g),
			AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy, AckWait: 30 * time.Second,
			MaxAckPending: max(4*c.Consumers*c.InFlight*c.Batch, 1000), MaxDeliver: -1}); err != nil {
			return fmt.Errorf("bench: nats create consumer: %w", err)
		}
	}
	return nil
}

func (t *natsTarget) Producer(ctx context.Context, id int) (Producer, error) {
	nc, js, err := t.connect()
	if err != nil {
		return nil, err
	}
	return &natsProducer{t: t, nc: nc, js: js}, nil
}

func (t *natsTarget) Consumer(ctx context.Context, id int, group string) (Consumer, error) {
	nc, js, err := t.connect()
	if err != nil {
		return nil, err
	}
	cons, err := js.Consumer(ctx, t.stream, group)
	if err != nil {
		nc.Close()
		return nil, err
	}
	buf := max(t.inFlight*t.batch, t.batch)
	c := &natsConsumer{nc: nc, ch: make(chan jetstream.Msg, buf), done: make(chan struct{})}
	c.cc, err = cons.Consume(func(m jetstream.Msg) {
		select {
		case c.ch <- m:
		case <-c.done: // closed: the message comes back after AckWait
		}
	}, jetstream.PullMaxMessages(buf))
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

func (t *natsTarget) Close() error { return nil }

type natsProducer struct {
	t  *natsTarget
	nc *nats.Conn
	js jetstream.JetStream
}

func (p *natsProducer) Push(ctx context.Context, msgs []Msg) (int, error) {
	futs := make([]jetstream.PubAckFuture, 0, len(msgs))
	var first error
	for _, m := range msgs {
		f, err := p.js.PublishAsync(p.t.subject+"."+m.Partition, m.Payload)
		if err != nil {
			first = err
			break
		}
		futs = append(futs, f)
	}
	n := 0
	for _, f := range futs {
		select {
		case <-f.Ok():
			n++
		case err := <-f.Err():
			if first == nil {
				first = err
			}
		case <-ctx.Done():
			if first == nil {
				first = ctx.Err()
			}
			return n, first
		}
	}
	return n, first
}

func (p *natsProducer) Close() error { p.nc.Close(); return nil }

type natsConsumer struct {
	nc   *nats.Conn
	cc   jetstream.ConsumeContext
	ch   chan jetstream.Msg
	done chan struct{}
}

func (c *natsConsumer) Pop(ctx context.Context, maxN int) (Delivery, error) {
	d := &natsDelivery{}
	t := time.NewTimer(200 * time.Millisecond)
	defer t.Stop()
	select {
	case m := <-c.ch:
		d.msgs = append(d.msgs, m)
	case <-t.C:
		return d, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for len(d.msgs) < maxN {
		select {
		case m := <-c.ch:
			d.msgs = append(d.msgs, m)
			continue
		default:
		}
		break
	}
	return d, nil
}

func (c *natsConsumer) Close() error {
	close(c.done)
	c.cc.Stop()
	c.nc.Close()
	return nil
}

type natsDelivery struct{ msgs []jetstream.Msg }

func (d *natsDelivery) Len() int             { return len(d.msgs) }
func (d *natsDelivery) Payload(i int) []byte { return d.msgs[i].Data() }

func (d *natsDelivery) Ack(ctx context.Context, fail func(i int) bool) (int, error) {
	n := 0
	var first error
	for i, m := range d.msgs {
		var err error
		if fail != nil && fail(i) {
			err = m.Nak()
		} else if err = m.Ack(); err == nil {
			n++
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return n, first
}
