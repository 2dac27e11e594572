package benchtest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/regentmq/regent/bench"
	"github.com/regentmq/regent/bench/benchtest"
)

// startRedis starts the harness's Redis peer for t.
func startRedis(t *testing.T, ctx context.Context, fsync string) *bench.Server {
	t.Helper()
	bin, err := bench.FindRedis("")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := bench.StartRedis(ctx, bin, fsync, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return srv
}

// run runs cfg against srv through a Tagged target.
func run(t *testing.T, ctx context.Context, srv *bench.Server, cfg bench.Config) (bench.Result, *benchtest.Tagged) {
	t.Helper()
	cfg.Target = bench.TargetRedis
	inner, err := bench.NewTarget(bench.TargetRedis, srv.Endpoints)
	if err != nil {
		t.Fatal(err)
	}
	tg := benchtest.Tag(inner)
	res, err := bench.Run(ctx, cfg, tg, srv.Probe(), nil, nil)
	if err != nil {
		t.Fatalf("%s: %v", cfg.Scenario, err)
	}
	if res.Errors != 0 {
		t.Fatalf("%s: %d errors, first: %s", cfg.Scenario, res.Errors, res.FirstErr)
	}
	return res, tg
}

// streamLengths is what Redis holds: the sum of XLEN over the run's
// streams, and how many entries each group still has pending.
func streamLengths(t *testing.T, ctx context.Context, srv *bench.Server, partitions int, groups ...string) (int64, map[string]int64) {
	t.Helper()
	cl := redis.NewClient(&redis.Options{Addr: srv.Redis, DisableIdentity: true})
	defer cl.Close()
	var total int64
	pending := map[string]int64{}
	for i := 0; i < partitions; i++ {
		s := fmt.Sprintf("bench:p%d", i)
		n, err := cl.XLen(ctx, s).Result()
		if err != nil {
			t.Fatal(err)
		}
		total += n
		for _, g := range groups {
			p, err := cl.XPending(ctx, s, g).Result()
			if err != nil {
				t.Fatal(err)
			}
			pending[g] += p.Count
		}
	}
	return total, pending
}

// TestRedisPeerScenarios runs push, consume, fanout and backlog against a
// redis-server the harness started, with both AOF fsync policies for push
// and backlog: the counts the harness reports match what Redis holds, and
// every message is delivered exactly once to every group.
func TestRedisPeerScenarios(t *testing.T) {
	for _, fsync := range bench.RedisFsyncs {
		t.Run(fsync, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			srv := startRedis(t, ctx, fsync)
			if srv.Durability != bench.RedisDurability(fsync) || srv.Probe() == nil {
				t.Fatalf("durability %q, probe %v", srv.Durability, srv.Probe())
			}

			const n = 20_000
			res, tg := run(t, ctx, srv, bench.Config{Scenario: bench.Push, Messages: n, Duration: time.Minute})
			stored, _ := streamLengths(t, ctx, srv, res.Partitions)
			if res.Pushed != n || res.Msgs != n || tg.Pushed() != n || stored != n || res.Server == nil || res.Server.CPUSeconds <= 0 {
				t.Fatalf("push: pushed %d (msgs %d, serials %d), Redis holds %d; server %+v", res.Pushed, res.Msgs, tg.Pushed(), stored, res.Server)
			}

			res, tg = run(t, ctx, srv, bench.Config{Scenario: bench.Backlog, Messages: n, Producers: 2, Consumers: 3, Duration: time.Minute})
			if err := tg.Check("g0"); err != nil {
				t.Fatalf("backlog: %v", err)
			}
			stored, pending := streamLengths(t, ctx, srv, res.Partitions, "g0")
			if res.Pushed != n || res.Consumed != n || res.Delivered != n || stored != n || pending["g0"] != 0 || tg.ConsumerWhileProducing() {
				t.Fatalf("backlog: pushed %d, delivered %d, completed %d; Redis holds %d, %d pending; consumer while producing %v",
					res.Pushed, res.Delivered, res.Consumed, stored, pending["g0"], tg.ConsumerWhileProducing())
			}
			for _, ph := range res.Phases {
				if u := ph.Server; ph.Msgs != n || ph.MsgsPerSec <= 0 || u == nil || u.CPUPerMsgUs <= 0 || u.PeakRSS <= 0 || u.RSSSamples < 2 {
					t.Fatalf("backlog %s phase: %+v, server %+v", ph.Name, ph, u)
				}
			}
		})
	}
	t.Run("consume-fanout", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		srv := startRedis(t, ctx, "everysec")
		const n = 20_000
		res, tg := run(t, ctx, srv, bench.Config{Scenario: bench.Consume, Messages: n, Duration: time.Minute})
		if err := tg.Check("g0"); err != nil {
			t.Fatalf("consume: %v", err)
		}
		if res.Filled != n || res.Consumed != n || res.Msgs != n {
			t.Fatalf("consume: filled %d, completed %d, msgs %d", res.Filled, res.Consumed, res.Msgs)
		}
		res, tg = run(t, ctx, srv, bench.Config{Scenario: bench.Fanout, Messages: n / 4, Groups: 3, Consumers: 2, Duration: time.Minute})
		if err := tg.Check("g0", "g1", "g2"); err != nil {
			t.Fatalf("fanout: %v", err)
		}
		_, pending := streamLengths(t, ctx, srv, res.Partitions, "g0", "g1", "g2")
		if res.Filled != n/4 || res.Consumed != 3*n/4 || pending["g0"]+pending["g1"]+pending["g2"] != 0 {
			t.Fatalf("fanout: filled %d, completed %d over 3 groups, pending %v", res.Filled, res.Consumed, pending)
		}
	})
}

// TestRedisPeerStartsClean: the server runs with the AOF on and no RDB
// snapshot, in a temp dir that Stop removes.
func TestRedisPeerStartsClean(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := startRedis(t, ctx, "always")
	cl := redis.NewClient(&redis.Options{Addr: srv.Redis, DisableIdentity: true})
	defer cl.Close()
	cfg, err := cl.ConfigGet(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if cfg["appendonly"] != "yes" || cfg["appendfsync"] != "always" || cfg["save"] != "" || cfg["bind"] != "127.0.0.1" {
		t.Fatalf("appendonly %q, appendfsync %q, save %q, bind %q", cfg["appendonly"], cfg["appendfsync"], cfg["save"], cfg["bind"])
	}
	dir := cfg["dir"]
	if _, err := os.Stat(filepath.Join(dir, "redis.conf")); err != nil {
		t.Fatalf("data dir %q: %v", dir, err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("data dir %q left after Stop: %v", dir, err)
	}
}
