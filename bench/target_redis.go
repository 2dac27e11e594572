package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisTarget drives Redis Streams with go-redis (v9): one stream per
// partition, named queue:partition, like the NATS target's subjects, with
// no MAXLEN (entries stay in the stream after they are acked, as in a
// stream nobody trims). Push is one XADD per message, pipelined per batch,
// answered when the pipeline's replies are in. Each consumer group is a
// Redis consumer group on every stream (XGROUP CREATE ... 0 MKSTREAM, made
// in Setup); a consumer reads with XREADGROUP over all the streams (COUNT
// batch, which Redis applies per stream, BLOCK 200 ms), hands out what it
// read a batch at a time, and acks with one XACK per stream, pipelined.
//
// go-redis sends one request (or pipeline) at a time per connection, so a
// producer holds InFlight connections and a consumer InFlight+1 (its reads
// and its acks in flight), as the HTTP target does.
//
// A failed delivery would stay pending until XAUTOCLAIM took it after an
// idle time: there is no negative ack to retry it at once, as Regent and
// NATS are measured on in retry-storm, so that scenario is not offered
// (Config.Validate says so).
type redisTarget struct {
	opts     *redis.Options
	queue    string
	streams  []string          // the active partitions' streams, in order
	keys     map[string]string // partition name → stream; read-only after Setup
	inFlight int
}

// redisBlock is how long a read waits for the first entry (the other
// targets' pops wait as long).
const redisBlock = 200 * time.Millisecond

// redisField is the one field of a stream entry: the payload.
const redisField = "p"

// newRedisTarget parses addr: a redis:// URL or host:port.
func newRedisTarget(addr string) (*redisTarget, error) {
	var o *redis.Options
	if strings.Contains(addr, "://") {
		var err error
		if o, err = redis.ParseURL(addr); err != nil {
			return nil, fmt.Errorf("%w: redis URL %q: %v", ErrConfig, addr, err)
		}
	} else {
		o = &redis.Options{Addr: addr}
	}
	return &redisTarget{opts: o}, nil
}

func (t *redisTarget) Name() string { return TargetRedis }

// client opens a client with at most conns connections. Commands are not
// retried (a retried XADD could store a message twice), and pipelines use
// the same pool as single commands.
func (t *redisTarget) client(conns int) *redis.Client {
	o := *t.opts
	o.ClientName = "regent-bench"
	o.DisableIdentity = true
	o.PoolSize, o.MaxActiveConns, o.PipelinePoolSize = conns, conns, -1
	o.MaxRetries = -1
	o.ReadTimeout, o.WriteTimeout = opTimeout, opTimeout
	return redis.NewClient(&o)
}

func (t *redisTarget) streamOf(partition string) string {
	if k, ok := t.keys[partition]; ok {
		return k
	}
	return t.queue + ":" + partition
}

// Setup deletes the streams of the run's partitions (with their groups,
// as the NATS target deletes its stream) and creates every group on every
// stream, reading from the start.
func (t *redisTarget) Setup(ctx context.Context, c *Config) error {
	t.queue, t.inFlight = c.Queue, c.InFlight
	t.keys = make(map[string]string, c.Partitions)
	t.streams = t.streams[:0]
	for i := 0; i < c.Partitions; i++ {
		p := partitionName(i)
		t.keys[p] = c.Queue + ":" + p
		t.streams = append(t.streams, t.keys[p])
	}
	cl := t.client(1)
	defer cl.Close()
	if err := cl.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("bench: redis %s: %w", t.opts.Addr, err)
	}
	const chunk = 1000
	for i := 0; i < len(t.streams); i += chunk {
		if err := cl.Del(ctx, t.streams[i:min(i+chunk, len(t.streams))]...).Err(); err != nil {
			return fmt.Errorf("bench: redis delete streams: %w", err)
		}
	}
	_, err := cl.Pipelined(ctx, func(p redis.Pipeliner) error {
		for g := 0; g < c.Groups; g++ {
			for _, s := range t.streams {
				p.XGroupCreateMkStream(ctx, s, groupName(g), "0")
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("bench: redis create groups: %w", err)
	}
	return nil
}

func (t *redisTarget) Producer(ctx context.Context, id int) (Producer, error) {
	cl := t.client(t.inFlight)
	if err := cl.Ping(ctx).Err(); err != nil {
		cl.Close()
		return nil, fmt.Errorf("bench: redis %s: %w", t.opts.Addr, err)
	}
	return &redisProducer{t: t, cl: cl}, nil
}

func (t *redisTarget) Consumer(ctx context.Context, id int, group string) (Consumer, error) {
	cl := t.client(t.inFlight + 1)
	if err := cl.Ping(ctx).Err(); err != nil {
		cl.Close()
		return nil, fmt.Errorf("bench: redis %s: %w", t.opts.Addr, err)
	}
	args := append(append([]string(nil), t.streams...), make([]string, len(t.streams))...)
	for i := len(t.streams); i < len(args); i++ {
		args[i] = ">" // entries never delivered to this group
	}
	return &redisConsumer{t: t, cl: cl, group: group, name: fmt.Sprintf("c%d", id), args: args}, nil
}

func (t *redisTarget) Close() error { return nil }

type redisProducer struct {
	t  *redisTarget
	cl *redis.Client
}

// Push sends a pipeline of one XADD per message and answers how many were
// added.
func (p *redisProducer) Push(ctx context.Context, msgs []Msg) (int, error) {
	pipe := p.cl.Pipeline()
	cmds := make([]*redis.StringCmd, len(msgs))
	for i, m := range msgs {
		cmds[i] = pipe.XAdd(ctx, &redis.XAddArgs{Stream: p.t.streamOf(m.Partition), Values: []any{redisField, m.Payload}})
	}
	_, err := pipe.Exec(ctx)
	n := 0
	for _, c := range cmds {
		if c.Err() == nil {
			n++
		}
	}
	return n, err
}

func (p *redisProducer) Close() error { return p.cl.Close() }

// redisEntry is one entry read, kept until it is handed out.
type redisEntry struct {
	stream  int // index in the target's streams
	id      string
	payload string
}

type redisConsumer struct {
	t     *redisTarget
	cl    *redis.Client
	group string
	name  string
	args  []string     // streams, then ">" for each
	buf   []redisEntry // read, not yet handed out
}

// Pop hands out up to maxN entries: those left from the last read, or a
// new read's (XREADGROUP COUNT maxN per stream, BLOCK 200 ms).
func (c *redisConsumer) Pop(ctx context.Context, maxN int) (Delivery, error) {
	if len(c.buf) == 0 {
		res, err := c.cl.XReadGroup(ctx, &redis.XReadGroupArgs{Group: c.group, Consumer: c.name, Streams: c.args,
			Count: int64(maxN), Block: redisBlock}).Result()
		if errors.Is(err, redis.Nil) {
			return emptyDelivery{}, nil
		}
		if err != nil {
			return nil, err
		}
		for _, s := range res {
			si := c.indexOf(s.Stream)
			for _, m := range s.Messages {
				p, _ := m.Values[redisField].(string)
				c.buf = append(c.buf, redisEntry{stream: si, id: m.ID, payload: p})
			}
		}
		if len(c.buf) == 0 {
			return emptyDelivery{}, nil
		}
	}
	n := min(maxN, len(c.buf))
	d := &redisDelivery{c: c, entries: append([]redisEntry(nil), c.buf[:n]...)}
	c.buf = c.buf[:copy(c.buf, c.buf[n:])]
	return d, nil
}

func (c *redisConsumer) indexOf(stream string) int {
	for i, s := range c.t.streams {
		if s == stream {
			return i
		}
	}
	return -1
}

func (c *redisConsumer) Close() error { return c.cl.Close() }

type redisDelivery struct {
	c       *redisConsumer
	entries []redisEntry
}

func (d *redisDelivery) Len() int             { return len(d.entries) }
func (d *redisDelivery) Payload(i int) []byte { return []byte(d.entries[i].payload) }

// Ack sends one XACK per stream, pipelined, for the entries not failed
// (fail(i)): those stay pending. It answers how many XACK acknowledged.
func (d *redisDelivery) Ack(ctx context.Context, fail func(i int) bool) (int, error) {
	ids := map[int][]string{}
	var order []int
	for i, e := range d.entries {
		if fail != nil && fail(i) {
			continue
		}
		if _, ok := ids[e.stream]; !ok {
			order = append(order, e.stream)
		}
		ids[e.stream] = append(ids[e.stream], e.id)
	}
	if len(order) == 0 {
		return 0, nil
	}
	pipe := d.c.cl.Pipeline()
	cmds := make([]*redis.IntCmd, len(order))
	for k, si := range order {
		cmds[k] = pipe.XAck(ctx, d.c.t.streams[si], d.c.group, ids[si]...)
	}
	_, err := pipe.Exec(ctx)
	n := 0
	for _, c := range cmds {
		n += int(c.Val())
	}
	return n, err
}
