package main

import (
	"context"
	"testing"
	"time"

	"github.com/regentmq/regent/bench"
	"github.com/regentmq/regent/bench/benchtest"
)

// TestBacklogDrainsEveryMessageOnce: a backlog run against a real `regent
// serve` child: every message pushed is delivered exactly once in the
// drain, no consumer exists while the push phase runs, and both phases
// carry their own figures, the server's CPU and sampled RSS among them.
func TestBacklogDrainsEveryMessageOnce(t *testing.T) {
	_, bin := buildRegent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := bench.StartRegent(ctx, bin, "always", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	inner, err := bench.NewTarget(bench.TargetRegent, srv.Endpoints)
	if err != nil {
		t.Fatal(err)
	}
	tg := benchtest.Tag(inner)
	const n = 30_000
	cfg := bench.Config{Scenario: bench.Backlog, Messages: n, Producers: 2, Consumers: 3, Batch: 50, Duration: time.Minute}
	res, err := bench.Run(ctx, cfg, tg, srv.Probe(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.Check("g0"); err != nil {
		t.Fatal(err)
	}
	if tg.Pushed() != n || res.Pushed != n || res.Filled != n || res.Delivered != n || res.Consumed != n || res.Msgs != n || res.Errors != 0 {
		t.Fatalf("serials %d; pushed %d, filled %d, delivered %d, completed %d, msgs %d, errors %d (%s); want %d each and no error",
			tg.Pushed(), res.Pushed, res.Filled, res.Delivered, res.Consumed, res.Msgs, res.Errors, res.FirstErr, n)
	}
	if tg.ConsumerWhileProducing() {
		t.Fatal("a consumer was opened while producers were still open")
	}
	if len(res.Phases) != 2 || res.Phases[0].Name != "push" || res.Phases[1].Name != "drain" {
		t.Fatalf("phases %+v", res.Phases)
	}
	for _, ph := range res.Phases {
		u := ph.Server
		if ph.Msgs != n || ph.Elapsed <= 0 || ph.MsgsPerSec <= 0 || ph.Latency.Count == 0 || ph.Latency.P99 <= 0 ||
			u == nil || u.CPUSeconds <= 0 || u.CPUPerMsgUs <= 0 || u.PeakRSS <= 0 || u.RSSSamples < 2 {
			t.Errorf("%s phase: %+v, server %+v", ph.Name, ph, u)
		}
	}
	drain := res.PhaseNamed("drain")
	if res.MsgsPerSec != drain.MsgsPerSec || res.Server != drain.Server || res.PushLatency == nil ||
		res.PushLatency.Count != res.Phases[0].Latency.Count {
		t.Errorf("the headline is not the drain: %+v", res)
	}
}
