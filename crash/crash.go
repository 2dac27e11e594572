package crash

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/regentmq/regent/client"
)

// Config configures Run. Only Binary is required; zero values take the
// documented defaults.
type Config struct {
	// Binary is the regent executable to run as `Binary serve ...`.
	Binary string
	// Dir holds the broker's data (Dir/data) and logs (Dir/broker-N.log);
	// default a new temporary directory, removed after a run without
	// violations.
	Dir string
	// Cycles is how many times the broker is killed with SIGKILL; default 5.
	Cycles int
	// MinUp and MaxUp bound how long the broker runs under load before each
	// kill (uniformly random between them); default 300ms and 1.5s.
	MinUp, MaxUp time.Duration
	// Producers, Consumers (group g1) and TxnWorkers (group g2); default 4,
	// 3 and 2.
	Producers, Consumers, TxnWorkers int
	// Partitions of queue "crash"; default 4.
	Partitions int
	// PushRate caps the items pushed per second by all producers together
	// (so that long runs stay within memory); default 2000.
	PushRate int
	// Seed makes the workload's choices and the kill times repeatable
	// (as far as timing allows); 0 picks one, reported in Report.Seed.
	Seed uint64
	// Env is added to the broker's environment (e.g. a test hook).
	Env []string
	// Args are added to the broker's command line after the harness's own
	// flags (--data, --tcp, --http, --log-level).
	Args []string
	// Brokers, above 1, runs a cluster of that many brokers on 127.0.0.1,
	// each an embedded etcd voter (regent serve --cluster); each cycle
	// kills one of them at random and restarts it, and the client follows
	// the cluster's shard map. Transactions whose ack and push fall in
	// different shards are then push-then-ack: a refused one may leave its
	// push stored, answered queued, which the checks count as a push.
	Brokers int
	// Replicas, above 0 with Brokers, replicates every shard on that many
	// brokers (regent serve --replicas: one Raft group per shard). Each
	// cycle then kills the broker leading the most shards, measures from
	// the client's side how long each shard it led takes to answer a push
	// again (Report.Failovers), and restarts it.
	Replicas int
	// StartTimeout bounds each start of the broker; default 30s.
	StartTimeout time.Duration
	// Logf, when set, receives progress lines.
	Logf func(format string, args ...any)
}

func (c *Config) setDefaults() error {
	if c.Binary == "" {
		return errors.New("crash: Config.Binary is required")
	}
	if c.Cycles <= 0 {
		c.Cycles = 5
	}
	if c.MinUp <= 0 {
		c.MinUp = 300 * time.Millisecond
	}
	if c.MaxUp < c.MinUp {
		c.MaxUp = max(c.MinUp, 1500*time.Millisecond)
	}
	if c.Producers <= 0 {
		c.Producers = 4
	}
	if c.Consumers <= 0 {
		c.Consumers = 3
	}
	if c.TxnWorkers <= 0 {
		c.TxnWorkers = 2
	}
	if c.Partitions <= 0 {
		c.Partitions = 4
	}
	if c.PushRate <= 0 {
		c.PushRate = 2000
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = 30 * time.Second
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return nil
}

// Report is what a run did and what it found. Every violation counter must
// be zero; Problems explains the first few.
type Report struct {
	Seed   uint64
	Cycles int // kills done
	Dir    string

	Pushes       int // items pushed (each counted once, however often it was sent)
	Acknowledged int // items answered queued or duplicate: each must be stored once
	Unanswered   int // items never answered (the run ended first)
	Stored       int // messages found in the queues at the end
	Deliveries   int // messages delivered to groups g1 and g2
	// LeaseRedeliveries counts deliveries of a message again to a group
	// that no failed or retry ack asked for: its lease ended unacked
	// (at-least-once allows it; a completed message coming back is
	// Redelivered, a violation).
	LeaseRedeliveries int
	AcksOK            map[string]int
	Txns              int // transactions answered success
	DLQEntries        int
	CallErrors        int // calls that failed (broker down, connection lost)

	Lost, Duplicates, OutOfOrder, Phantoms, Redelivered int
	RetryCounts, DLQ, TxnAtomicity, StartFailures       int

	// Failovers holds, for a replicated cluster, one time per shard a
	// killed broker led: from the kill to the first push to that shard
	// answered stored. Unserved counts the shards that answered none
	// within failoverBound (a violation).
	Failovers []time.Duration
	Unserved  int

	Problems []string
	Elapsed  time.Duration
}

// Violations is the sum of the violation counters.
func (r *Report) Violations() int {
	return r.Lost + r.Duplicates + r.OutOfOrder + r.Phantoms + r.Redelivered +
		r.RetryCounts + r.DLQ + r.TxnAtomicity + r.StartFailures + r.Unserved
}

// String is a human summary.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "crash run: %d kill -9 cycles in %v (seed %d)\n", r.Cycles, r.Elapsed.Round(time.Millisecond), r.Seed)
	fmt.Fprintf(&b, "  pushes %d, acknowledged %d, unanswered %d, stored %d\n", r.Pushes, r.Acknowledged, r.Unanswered, r.Stored)
	var acks []string
	for k, v := range r.AcksOK {
		acks = append(acks, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(acks)
	fmt.Fprintf(&b, "  deliveries %d (again after a lease ended unacked: %d), acks answered success: %s; transactions %d; DLQ entries %d; failed calls %d\n",
		r.Deliveries, r.LeaseRedeliveries, strings.Join(acks, ", "), r.Txns, r.DLQEntries, r.CallErrors)
	fmt.Fprintf(&b, "  violations: lost %d, duplicates %d, out of order %d, phantoms %d, redelivered %d, retry counts %d, dlq %d, txn %d, start failures %d\n",
		r.Lost, r.Duplicates, r.OutOfOrder, r.Phantoms, r.Redelivered, r.RetryCounts, r.DLQ, r.TxnAtomicity, r.StartFailures)
	if len(r.Failovers) > 0 || r.Unserved > 0 {
		fmt.Fprintf(&b, "  failovers (kill to a push answered, per shard led): %s; unserved %d\n", FailoverSummary(r.Failovers), r.Unserved)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "  - %s\n", p)
	}
	return b.String()
}

const maxProblems = 40

func (r *Report) problem(counter *int, format string, args ...any) {
	*counter++
	if len(r.Problems) < maxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// Run runs the scenario: Cycles kill -9 cycles under load, a last restart,
// and the checks. The error is for the harness itself (it could not run);
// what the broker did wrong is in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	start := time.Now()
	rep := &Report{Seed: cfg.Seed, AcksOK: map[string]int{}}
	temp := cfg.Dir == ""
	if temp {
		d, err := os.MkdirTemp("", "regent-crash-")
		if err != nil {
			return nil, err
		}
		cfg.Dir = d
	}
	rep.Dir = cfg.Dir
	brokers, err := startBrokers(ctx, &cfg)
	defer func() {
		for _, b := range brokers {
			b.kill()
		}
	}()
	if err != nil {
		rep.problem(&rep.StartFailures, "first start: %v", err)
		return rep, nil
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 1))
	c, err := client.Dial(ctx, brokers[0].tcpAddr, client.WithConns(4), client.WithReconnectBackoff(10*time.Millisecond, 100*time.Millisecond),
		client.WithDialTimeout(time.Second))
	if err != nil {
		return nil, fmt.Errorf("crash: dial: %w", err)
	}
	defer c.Close()
	led := newLedger(cfg.Partitions)
	if err := setup(ctx, c); err != nil {
		return nil, err
	}
	wctx, stopWork := context.WithCancel(ctx)
	var wg sync.WaitGroup
	startWorkers(wctx, &wg, c, led, &cfg)
	for cycle := 1; cycle <= cfg.Cycles; cycle++ {
		up := cfg.MinUp + time.Duration(rng.Int64N(int64(cfg.MaxUp-cfg.MinUp)+1))
		before := led.answers()
		select {
		case <-time.After(up):
		case <-ctx.Done():
			stopWork()
			wg.Wait()
			return nil, ctx.Err()
		}
		br := brokers[rng.IntN(len(brokers))]
		var probes []shardProbe
		if cfg.Replicas > 0 {
			br, probes = leaderOf(ctx, c, brokers, br)
		}
		br.kill()
		killed := time.Now()
		rep.Cycles++
		cfg.Logf("cycle %d: killed %s after %v under load (%d answers this cycle)", cycle, br.name(), up.Round(time.Millisecond), led.answers()-before)
		if len(probes) > 0 {
			failovers(ctx, c, killed, probes, rep)
		}
		if err := br.start(ctx); err != nil {
			rep.problem(&rep.StartFailures, "restart after kill %d: %v", cycle, err)
			stopWork()
			wg.Wait()
			led.summarize(rep)
			rep.Elapsed = time.Since(start)
			return rep, nil
		}
		if cfg.Replicas > 0 {
			caughtUp(ctx, br, 30*time.Second)
		}
	}
	// The last cycle ended with a kill and a restart: stop the load, then
	// look at what the broker recovered.
	stopWork()
	wg.Wait()
	if err := waitReady(ctx, c, 10*time.Second); err != nil {
		return nil, fmt.Errorf("crash: broker not reachable for the checks: %w", err)
	}
	if len(brokers) > 1 {
		// The client learns that a restarted broker is back from the
		// cluster's map (its registration): wait until every part answers.
		if err := waitCluster(ctx, c, 30*time.Second); err != nil {
			return nil, fmt.Errorf("crash: cluster not whole for the checks: %w", err)
		}
	}
	if err := audit(ctx, c, led, rep, &cfg); err != nil {
		return nil, fmt.Errorf("crash: checks: %w", err)
	}
	rep.Elapsed = time.Since(start)
	for _, b := range brokers {
		if err := b.stop(10 * time.Second); err != nil {
			cfg.Logf("graceful stop of %s: %v", b.name(), err)
		}
	}
	if temp && rep.Violations() == 0 {
		os.RemoveAll(cfg.Dir)
	}
	return rep, nil
}

// startBrokers makes and starts the one broker, or the brokers of a
// cluster. Ports are chosen before the brokers bind them, so another
// program may take one meanwhile: a start that fails on a port in use is
// made again on new ports (and new directories: a cluster's etcd members
// remember their peers), up to three times.
func startBrokers(ctx context.Context, cfg *Config) ([]*broker, error) {
	for attempt := 1; ; attempt++ {
		var bs []*broker
		var err error
		if cfg.Brokers > 1 {
			bs, err = newClusterIn(cfg, cfg.Brokers, fmt.Sprintf("data%d", attempt))
		} else {
			var b *broker
			if b, err = newBroker(cfg); err == nil {
				bs = []*broker{b}
			}
		}
		if err != nil {
			return nil, err
		}
		err = startAll(ctx, bs)
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			return bs, err
		}
		cfg.Logf("start %d: a port was taken (%v): again on new ports", attempt, err)
		for _, b := range bs {
			b.kill()
		}
	}
}

// startAll starts the brokers at once (a cluster's etcd voters wait for a
// quorum).
func startAll(ctx context.Context, brokers []*broker) error {
	errs := make([]error, len(brokers))
	var wg sync.WaitGroup
	for i, b := range brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = b.start(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitCluster waits until the dead-letter listing, which asks every
// broker, answers: every broker is up and the client reaches it.
func waitCluster(ctx context.Context, c *client.Client, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, _, err := c.DLQ(cctx, client.DLQFilter{Queue: queueName, Limit: 1})
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// setup configures queue "crash".
func setup(ctx context.Context, c *client.Client) error {
	o := client.DefaultQueueOptions()
	o.LeaseTime = time.Second
	o.RetryLimit = retryLimit
	o.RetryDelay = 20 * time.Millisecond
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.Configure(cctx, queueName, o); err != nil {
		return fmt.Errorf("crash: configure: %w", err)
	}
	return nil
}

// waitReady pings until the broker answers.
func waitReady(ctx context.Context, c *client.Client, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.Ping(pctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func logPath(dir string, n int) string { return filepath.Join(dir, fmt.Sprintf("broker-%d.log", n)) }
