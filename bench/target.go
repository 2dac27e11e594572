package bench

import (
	"context"
	"crypto/tls"
	"fmt"
)

// Msg is one message to push.
type Msg struct {
	Partition string
	Payload   []byte
}

// Target is a broker the harness drives: Regent over TCP or HTTP, or a
// peer (NATS JetStream, Redis Streams).
type Target interface {
	// Name is the target's name (TargetRegent, TargetRegentHTTP, TargetNATS,
	// TargetRedis).
	Name() string
	// Setup creates the queue (stream) and the consumer groups of c.
	Setup(ctx context.Context, c *Config) error
	// Producer opens a producer with its own connection. Its Push is called
	// from InFlight goroutines at once.
	Producer(ctx context.Context, id int) (Producer, error)
	// Consumer opens a consumer of group with its own connection.
	Consumer(ctx context.Context, id int, group string) (Consumer, error)
	Close() error
}

// Producer pushes batches.
type Producer interface {
	// Push stores msgs and answers how many were stored (durable under the
	// server's policy) once the server said so.
	Push(ctx context.Context, msgs []Msg) (int, error)
	Close() error
}

// Consumer pops batches.
type Consumer interface {
	// Pop returns up to max messages, waiting a short while for the first
	// one; an empty Delivery is a normal answer.
	Pop(ctx context.Context, max int) (Delivery, error)
	Close() error
}

// Delivery is what one pop handed over.
type Delivery interface {
	Len() int
	Payload(i int) []byte
	// Ack acks every message: failed where fail(i), completed otherwise
	// (fail may be nil). It answers how many completed acks took effect.
	// It is the Delivery's last use: a target may reuse its memory for a
	// later Pop once Ack has returned.
	Ack(ctx context.Context, fail func(i int) bool) (int, error)
}

// ackSender is a Delivery that can send its completed ack at once and wait
// for the answer in Ack: the consumer sends it before its next pop, so that
// both go out together.
type ackSender interface {
	SendAck(ctx context.Context)
}

// Endpoints says where a target's server listens.
type Endpoints struct {
	RegentTCP  string // host:port of Regent's binary protocol
	RegentHTTP string // host:port of Regent's HTTP API
	NATS       string // nats://host:port
	Redis      string // host:port, or a redis:// URL
	// Token is the JWT the Regent targets send (a broker with auth on: the
	// binary protocol checks it once per connection, HTTP on every request).
	Token string
	// TLS, when set, makes the regent target speak TLS (a Regent behind a
	// TLS terminator).
	TLS *tls.Config
}

// NewTarget connects the target named name to its server.
func NewTarget(name string, ep Endpoints) (Target, error) {
	switch name {
	case TargetRegent, TargetRegentReplicated: // the Go client routes to each shard's leader
		if ep.RegentTCP == "" {
			return nil, fmt.Errorf("%w: target regent needs a TCP address (--addr, or let the harness start the server)", ErrConfig)
		}
		return &regentTarget{addr: ep.RegentTCP, token: ep.Token, tls: ep.TLS}, nil
	case TargetRegentHTTP:
		if ep.RegentHTTP == "" {
			return nil, fmt.Errorf("%w: target regent-http needs an HTTP address (--http-addr, or let the harness start the server)", ErrConfig)
		}
		return &httpTarget{base: "http://" + ep.RegentHTTP, token: ep.Token}, nil
	case TargetNATS:
		if ep.NATS == "" {
			return nil, fmt.Errorf("%w: target nats needs a server URL (--peer-url) or --start-peer", ErrConfig)
		}
		return &natsTarget{url: ep.NATS}, nil
	case TargetRedis:
		if ep.Redis == "" {
			return nil, fmt.Errorf("%w: target redis needs a server (--redis-url) or --start-peer", ErrConfig)
		}
		return newRedisTarget(ep.Redis)
	}
	return nil, fmt.Errorf("%w: unknown target %q", ErrConfig, name)
}

// partitionName is the name of active partition i; idle ones are named
// idleName(i).
func partitionName(i int) string { return fmt.Sprintf("p%d", i) }
func idleName(i int) string      { return fmt.Sprintf("idle%d", i) }

// groupName is the name of consumer group i.
func groupName(i int) string { return fmt.Sprintf("g%d", i) }
