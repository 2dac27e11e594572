package bench

import (
	"context"
	"fmt"
	"io"
	"runtime/pprof"
	"sync"
	"time"
)

// runBacklog runs the backlog scenario on r's target, already set up, in
// two phases measured each on its own:
//
//   - push: Producers × InFlight workers push Messages messages (capped by
//     FillTime) while no consumer is open; then the producers' connections
//     are closed.
//   - drain: Groups × Consumers consumers, opened only now, pop and ack
//     (as in the consume scenario) until every group has completed every
//     message pushed (capped by Duration).
//
// Each phase reads the server's CPU time at its ends and samples its VmRSS
// every RSSEvery, so that the memory a backlog costs while it is built and
// while it is drained are told apart.
func (r *runner) runBacklog(ctx context.Context, probe Probe, profile io.Writer) (Result, error) {
	cfg := r.cfg
	res := Result{Config: cfg}
	if cfg.DropCaches {
		if err := canDropPageCache(); err != nil {
			return res, err
		}
	}
	var prods []Producer
	closeProds := func() {
		for _, p := range prods {
			p.Close()
		}
		prods = nil
	}
	defer closeProds()
	for i := 0; i < cfg.Producers; i++ {
		p, err := r.t.Producer(ctx, i)
		if err != nil {
			return res, fmt.Errorf("bench: producer: %w", err)
		}
		prods = append(prods, p)
	}
	if profile != nil {
		if err := pprof.StartCPUProfile(profile); err != nil {
			return res, fmt.Errorf("bench: profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	// Push phase.
	res.Started = time.Now()
	pm := startPhase(probe)
	fr, err := r.fill(ctx, prods, "push")
	push := pm.end("push", fr.pushed.Load(), cfg.MsgSize, fr.pushHist.Summary())
	closeProds()
	res.Pushed, res.Filled = push.Msgs, push.Msgs
	res.Phases = []Phase{push}
	if err != nil {
		return res, err
	}
	if push.Msgs == 0 {
		return res, fmt.Errorf("bench: backlog: nothing was pushed within %s", cfg.FillTime)
	}

	if cfg.DropCaches {
		if err := dropPageCache(); err != nil {
			return res, err
		}
	}

	// Drain phase.
	var conss []Consumer
	defer func() {
		for _, c := range conss {
			c.Close()
		}
	}()
	for g := 0; g < cfg.Groups; g++ {
		for i := 0; i < cfg.Consumers; i++ {
			c, err := r.t.Consumer(ctx, len(conss), groupName(g))
			if err != nil {
				return res, fmt.Errorf("bench: consumer: %w", err)
			}
			conss = append(conss, c)
		}
	}
	expect := push.Msgs * int64(cfg.Groups)
	mctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	r.cancel = cancel
	dm := startPhase(probe)
	start := time.Now()
	stopProg := r.progress(start)
	var wg sync.WaitGroup
	r.startConsumers(mctx, &wg, conss, start, expect)
	wg.Wait()
	stopProg()
	drain := dm.end("drain", r.consumed.Load(), cfg.MsgSize, r.mainHist.Summary())
	if at := r.drained.Load(); at != 0 {
		// The phase ended with its last ack, not with the pops that were
		// still waiting for messages that would not come.
		drain.Elapsed = time.Unix(0, at).Sub(start)
		drain.MsgsPerSec = float64(drain.Msgs) / drain.Elapsed.Seconds()
		drain.MBPerSec = drain.MsgsPerSec * float64(cfg.MsgSize) / 1e6
	}
	res.Phases = append(res.Phases, drain)

	res.Elapsed, res.Msgs, res.MsgsPerSec, res.MBPerSec = drain.Elapsed, drain.Msgs, drain.MsgsPerSec, drain.MBPerSec
	res.Latency, res.Server = drain.Latency, drain.Server
	pl := push.Latency
	res.PushLatency = &pl
	res.Delivered, res.Consumed = r.delivered.Load(), r.consumed.Load()
	res.Errors = fr.errs.Load() + r.errs.Load()
	if fr.firstErr != nil {
		res.FirstErr = fr.firstErr.Error()
	} else if r.firstErr != nil {
		res.FirstErr = r.firstErr.Error()
	}
	if res.Msgs == 0 && r.errs.Load() > 0 {
		return res, fmt.Errorf("bench: backlog: no message was drained; first error: %s", r.firstErr)
	}
	return res, nil
}
