package bench

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Scenario names.
const (
	Push       = "push"
	Consume    = "consume"
	Pipeline   = "pipeline"
	Fanout     = "fanout"
	Backlog    = "backlog"
	Partitions = "partitions"
	RetryStorm = "retry-storm"
	HTTP       = "http"
)

// Scenarios lists every scenario, in the order help and reports show them.
var Scenarios = []string{Push, Consume, Pipeline, Fanout, Backlog, Partitions, RetryStorm, HTTP}

// Target names.
const (
	TargetRegent     = "regent"      // Regent over its binary protocol (the Go client)
	TargetRegentHTTP = "regent-http" // Regent over Queen's HTTP API v1
	TargetNATS       = "nats"        // NATS JetStream, file storage (nats.go)
	TargetRedis      = "redis"       // Redis Streams, AOF persistence (go-redis)
	// TargetRegentReplicated is three Regent brokers on this machine, every
	// shard replicated on all three (regent serve --cluster --replicas 3),
	// over the binary protocol: the cost of replication, side by side with
	// one broker (TargetRegent).
	TargetRegentReplicated = "regent-replicated"
)

// ReplicatedScenarios are the scenarios the regent-replicated target runs
// (those that need none of the operator's requests a broker of a
// replicated cluster does not serve yet).
var ReplicatedScenarios = []string{Push, Consume}

// RedisScenarios are the scenarios the redis target runs (see
// Config.Validate for why not the others).
var RedisScenarios = []string{Push, Consume, Pipeline, Fanout, Backlog}

// Config is one run: a scenario, a target and the load. Zero fields take
// the defaults of Defaults.
type Config struct {
	Scenario string `json:"scenario"`
	Target   string `json:"target"`

	MsgSize   int `json:"msg_size"`  // payload bytes (default 128)
	Batch     int `json:"batch"`     // messages per push and per pop (default 100)
	Producers int `json:"producers"` // producer connections (default 4; consume, fanout: 0, the pre-fill uses 4)
	Consumers int `json:"consumers"` // consumers per group (default 4, fanout 2; 0 for push)
	Groups    int `json:"groups"`    // consumer groups (default 1; fanout 10)
	// InFlight is how many batches each producer keeps unanswered (pushes
	// from that many goroutines on its one connection; NATS gets
	// InFlight×Batch pending async publishes), and how many acks each
	// consumer keeps unanswered (default 8).
	InFlight int `json:"in_flight"`
	// Partitions receiving traffic (default 16; partitions: 1000).
	Partitions int `json:"partitions"`
	// IdlePartitions are created before the run (one message each, read by
	// every group) and then left alone: they cost memory, not traffic.
	IdlePartitions int `json:"idle_partitions"`
	// Duration of the measured phase (default 10 s); with Messages set it
	// is the cap. Backlog: the cap of its drain phase (default 30 min; the
	// run ends when the backlog is drained).
	Duration time.Duration `json:"duration_ns"`
	// Messages to push (push, pipeline...) or to pre-fill (consume, fanout);
	// 0 = as many as Duration allows (consume and fanout pre-fill for
	// FillTime). Backlog: the backlog's size (default 1,000,000).
	Messages int64 `json:"messages"`
	// FillTime caps the pre-fill of consume and fanout, and the push phase
	// of backlog (default: Duration).
	FillTime time.Duration `json:"fill_time_ns"`
	// Rate is the target rate in messages per second over all producers
	// (consumers in consume and fanout); 0 = as fast as possible (closed
	// loop).
	Rate float64 `json:"rate"`
	// FailFraction of deliveries acked failed (retry-storm; default 0.2).
	FailFraction float64 `json:"fail_fraction"`
	// Queue (or stream subject prefix) used (default "bench").
	Queue string `json:"queue"`
	// DropCaches (backlog only) empties the kernel's page cache between the
	// push and the drain (sync, then 3 into /proc/sys/vm/drop_caches: root
	// only), so that the drain reads the backlog from the disk, not from
	// memory.
	DropCaches bool `json:"drop_caches,omitempty"`
}

// Defaults fills the zero fields of c.
func (c *Config) Defaults() {
	if c.Target == "" {
		c.Target = TargetRegent
		if c.Scenario == HTTP {
			c.Target = TargetRegentHTTP
		}
	}
	if c.MsgSize == 0 {
		c.MsgSize = 128
	}
	if c.Batch == 0 {
		c.Batch = 100
	}
	if c.Producers == 0 && !c.prefilled() {
		c.Producers = 4
	}
	if c.Consumers == 0 && c.Scenario != Push {
		c.Consumers = 4
		if c.Scenario == Fanout {
			c.Consumers = 2
		}
	}
	if c.Groups == 0 {
		c.Groups = 1
		if c.Scenario == Fanout {
			c.Groups = 10
		}
	}
	if c.InFlight == 0 {
		c.InFlight = 8
	}
	if c.Partitions == 0 {
		c.Partitions = 16
		if c.Scenario == Partitions {
			c.Partitions = 1000
		}
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
		if c.Scenario == Backlog {
			c.Duration = 30 * time.Minute
		}
	}
	if c.Messages == 0 && c.Scenario == Backlog {
		c.Messages = 1_000_000
	}
	if c.FillTime == 0 {
		c.FillTime = c.Duration
	}
	if c.FailFraction == 0 && c.Scenario == RetryStorm {
		c.FailFraction = 0.2
	}
	if c.Queue == "" {
		c.Queue = "bench"
	}
}

// ErrConfig: a configuration that cannot run.
var ErrConfig = errors.New("bench: bad configuration")

// Validate checks a defaulted Config.
func (c *Config) Validate() error {
	bad := func(f string, a ...any) error { return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(f, a...)) }
	known := false
	for _, s := range Scenarios {
		known = known || s == c.Scenario
	}
	switch {
	case !known:
		return bad("unknown scenario %q", c.Scenario)
	case c.Target != TargetRegent && c.Target != TargetRegentHTTP && c.Target != TargetNATS && c.Target != TargetRedis &&
		c.Target != TargetRegentReplicated:
		return bad("unknown target %q (regent, regent-http, regent-replicated, nats or redis)", c.Target)
	case c.Target == TargetRegentReplicated && !slices.Contains(ReplicatedScenarios, c.Scenario):
		return bad("target regent-replicated runs %s, not %s", strings.Join(ReplicatedScenarios, ", "), c.Scenario)
	case c.Target == TargetRedis && c.Scenario == RetryStorm:
		return bad("retry-storm is not offered for redis: a failed Redis Streams delivery has no negative ack; it " +
			"stays pending until XAUTOCLAIM takes it after an idle time, not the immediate retry Regent and NATS are measured on")
	case c.Target == TargetRedis && !slices.Contains(RedisScenarios, c.Scenario):
		return bad("target redis runs %s, not %s", strings.Join(RedisScenarios, ", "), c.Scenario)
	case c.Target == TargetRedis && (c.IdlePartitions > 0 || c.failing()):
		return bad("target redis takes no idle partitions and no fail fraction")
	case c.MsgSize < 1 || c.MsgSize > 1<<20:
		return bad("message size %d out of 1..1048576", c.MsgSize)
	case c.Batch < 1 || c.Batch > 10000:
		return bad("batch %d out of 1..10000", c.Batch)
	case c.Producers < 0 || c.Consumers < 0 || c.Groups < 1 || c.InFlight < 1:
		return bad("producers, consumers, groups and in-flight must be positive")
	case c.Partitions < 1 || c.Partitions > 1_000_000 || c.IdlePartitions < 0 || c.IdlePartitions > 1_000_000:
		return bad("partitions %d (idle %d) out of range", c.Partitions, c.IdlePartitions)
	case c.Duration <= 0 || c.Messages < 0 || c.Rate < 0:
		return bad("duration, messages and rate must not be negative")
	case c.FailFraction < 0 || c.FailFraction >= 1:
		return bad("fail fraction %v out of [0, 1)", c.FailFraction)
	case c.pushes() && c.Producers == 0:
		return bad("scenario %s needs producers", c.Scenario)
	case c.consumes() && c.Consumers == 0:
		return bad("scenario %s needs consumers", c.Scenario)
	case c.backlog() && c.Rate > 0:
		return bad("backlog pushes and drains as fast as it can: it takes no rate")
	case c.backlog() && c.IdlePartitions > 0:
		return bad("backlog takes no idle partitions (no consumer may exist while it pushes)")
	case c.backlog() && c.failing():
		return bad("backlog acks every message completed: it takes no fail fraction")
	case c.DropCaches && !c.backlog():
		return bad("only backlog drops the page cache (between its push and its drain)")
	}
	return nil
}

// prefilled: the queue is filled before the measured phase, which only
// consumes (unless producers were asked for too).
func (c *Config) prefilled() bool { return c.Scenario == Consume || c.Scenario == Fanout }

// pushes: producers run during the measured phase (backlog: its push
// phase).
func (c *Config) pushes() bool { return !c.prefilled() }

// backlog: a push phase with no consumer, then a drain phase with no
// producer, measured each on its own.
func (c *Config) backlog() bool { return c.Scenario == Backlog }

// live: producers and consumers run at the same time (the consumers then
// measure end-to-end latency, and a rate paces the producers).
func (c *Config) live() bool { return c.pushes() && c.consumes() && !c.backlog() }

// consumes: consumers run during the measured phase.
func (c *Config) consumes() bool { return c.Scenario != Push }

// spread: the items of one batch go to consecutive partitions (rather than
// a whole batch to one partition).
func (c *Config) spread() bool { return c.Scenario == Partitions }

// failing: a fraction of deliveries is acked failed.
func (c *Config) failing() bool { return c.FailFraction > 0 }
