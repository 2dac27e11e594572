package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"
)

// Probe reads the resource use of a server process on this machine.
type Probe interface {
	CPU() (time.Duration, error) // user + system time so far (with its children that ended)
	PeakRSS() (int64, error)     // peak resident set so far (VmHWM), bytes
	RSS() (int64, error)         // resident set now (VmRSS), bytes
}

// opTimeout bounds one push or ack (they are not cut short by the end of
// the measured phase: what is in flight then is answered and counted).
const opTimeout = 60 * time.Second

// runner holds one run's shared state.
type runner struct {
	cfg  Config
	t    Target
	prog *Progress

	pushed, delivered, consumed, failedOn, errs atomic.Int64
	// drained is when (Unix ns) the completed acks reached the number
	// expected, 0 before.
	drained  atomic.Int64
	errMu    sync.Mutex
	firstErr error

	histMu   sync.Mutex
	pushHist Histogram // per batch
	mainHist Histogram // the scenario's latency

	cancel context.CancelFunc
}

func (r *runner) fail(err error) {
	r.errs.Add(1)
	r.errMu.Lock()
	if r.firstErr == nil {
		r.firstErr = err
	}
	r.errMu.Unlock()
}

// Run runs cfg against t (probe may be nil), reporting progress to prog
// (may be nil) and writing a CPU profile of the measured phase to profile
// (may be nil). An error means the run could not be set up; failures of
// single requests are counted in Result.Errors.
func Run(ctx context.Context, cfg Config, t Target, probe Probe, prog *Progress, profile io.Writer) (Result, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	r := &runner{cfg: cfg, t: t, prog: prog}
	res := Result{Config: cfg}
	if err := t.Setup(ctx, &r.cfg); err != nil {
		return res, fmt.Errorf("bench: setup %s: %w", t.Name(), err)
	}
	if cfg.backlog() {
		return r.runBacklog(ctx, probe, profile)
	}
	nProd := cfg.Producers
	if cfg.prefilled() || cfg.IdlePartitions > 0 {
		nProd = max(nProd, 4)
	}
	prods := make([]Producer, nProd)
	defer func() {
		for _, p := range prods {
			if p != nil {
				p.Close()
			}
		}
	}()
	for i := range prods {
		p, err := t.Producer(ctx, i)
		if err != nil {
			return res, fmt.Errorf("bench: producer: %w", err)
		}
		prods[i] = p
	}
	var conss []Consumer
	defer func() {
		for _, c := range conss {
			c.Close()
		}
	}()
	for g := 0; g < cfg.Groups && cfg.consumes(); g++ {
		for i := 0; i < cfg.Consumers; i++ {
			c, err := t.Consumer(ctx, len(conss), groupName(g))
			if err != nil {
				return res, fmt.Errorf("bench: consumer: %w", err)
			}
			conss = append(conss, c)
		}
	}
	if cfg.IdlePartitions > 0 {
		if err := r.idle(ctx, prods, conss); err != nil {
			return res, err
		}
	}
	if cfg.prefilled() {
		fr, err := r.fill(ctx, prods, "fill")
		if err != nil {
			return res, err
		}
		res.Filled = fr.pushed.Load()
	}

	// The measured phase.
	expect := int64(0) // deliveries after which the run is over
	switch {
	case cfg.prefilled():
		expect = res.Filled * int64(cfg.Groups)
	case cfg.Messages > 0 && cfg.consumes():
		expect = cfg.Messages * int64(cfg.Groups)
	}
	var cpu0 time.Duration
	if probe != nil {
		cpu0, _ = probe.CPU()
	}
	if profile != nil {
		if err := pprof.StartCPUProfile(profile); err != nil {
			return res, fmt.Errorf("bench: profile: %w", err)
		}
	}
	mctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	r.cancel = cancel
	start := time.Now()
	res.Started = start
	stopProg := r.progress(start)
	var wg sync.WaitGroup
	var prodLeft atomic.Int64
	prodLeft.Store(cfg.Messages)
	if cfg.pushes() {
		workers := cfg.Producers * cfg.InFlight
		var done atomic.Int64
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.produce(mctx, prods[w%cfg.Producers], w, workers, start, &prodLeft)
				// A push-only run with a message count ends when they are pushed.
				if done.Add(1) == int64(workers) && !cfg.consumes() {
					cancel()
				}
			}()
		}
	}
	r.startConsumers(mctx, &wg, conss, start, expect)
	wg.Wait()
	elapsed := time.Since(start)
	if profile != nil {
		pprof.StopCPUProfile()
	}
	stopProg()
	cancel()

	res.Elapsed = elapsed
	res.Pushed, res.Delivered, res.Consumed = r.pushed.Load(), r.delivered.Load(), r.consumed.Load()
	res.FailedOn, res.Errors = r.failedOn.Load(), r.errs.Load()
	if r.firstErr != nil {
		res.FirstErr = r.firstErr.Error()
	}
	res.Msgs = res.Consumed
	if cfg.Scenario == Push {
		res.Msgs = res.Pushed
	}
	res.MsgsPerSec = float64(res.Msgs) / elapsed.Seconds()
	res.MBPerSec = res.MsgsPerSec * float64(cfg.MsgSize) / 1e6
	res.Latency = r.mainHist.Summary()
	if cfg.Scenario != Push && cfg.pushes() {
		pl := r.pushHist.Summary()
		res.PushLatency = &pl
	}
	if probe != nil {
		if cpu1, err := probe.CPU(); err == nil {
			u := &ServerUsage{CPUSeconds: (cpu1 - cpu0).Seconds()}
			if res.Msgs > 0 {
				u.CPUPerMsgUs = u.CPUSeconds * 1e6 / float64(res.Msgs)
			}
			u.PeakRSS, _ = probe.PeakRSS()
			res.Server = u
		}
	}
	if res.Msgs == 0 && res.Errors > 0 {
		return res, fmt.Errorf("bench: no message went through; first error: %s", res.FirstErr)
	}
	return res, nil
}

// produce is one producer worker: worker w of workers pushes batches on its
// producer's connection, following its schedule, until ctx ends or the
// message budget left (when Messages > 0) is spent.
func (r *runner) produce(ctx context.Context, p Producer, w, workers int, start time.Time, left *atomic.Int64) {
	cfg := &r.cfg
	sched := NewSchedule(start, cfg.Rate/float64(cfg.Batch), workers, w)
	msgs := make([]Msg, cfg.Batch)
	for i := range msgs {
		msgs[i].Payload = newPayload(cfg.MsgSize)
	}
	var h Histogram
	defer func() { r.histMu.Lock(); r.pushHist.Merge(&h); r.histMu.Unlock() }()
	for k := 0; ; k++ {
		n := cfg.Batch
		if cfg.Messages > 0 {
			rem := left.Add(-int64(n))
			if rem <= -int64(n) {
				return
			}
			if rem < 0 {
				n += int(rem)
			}
		}
		due, err := sched.Wait(ctx)
		if err != nil {
			return
		}
		r.address(msgs[:n], w, workers, k)
		for i := range msgs[:n] {
			stamp(msgs[i].Payload, due)
		}
		octx, cancel := context.WithTimeout(context.Background(), opTimeout)
		got, err := p.Push(octx, msgs[:n])
		cancel()
		r.pushed.Add(int64(got))
		if err != nil {
			r.fail(fmt.Errorf("push: %w", err))
			if pause(ctx) {
				return
			}
			continue
		}
		lat := time.Since(due)
		h.RecordDuration(lat)
		if cfg.Scenario == Push {
			r.histMu.Lock()
			r.mainHist.RecordDuration(lat)
			r.histMu.Unlock()
		}
	}
}

// address sets the partitions of batch k of worker w: the whole batch to
// one partition, the partitions taken in turn; or (spread) the items over
// consecutive partitions.
func (r *runner) address(msgs []Msg, w, workers, k int) {
	np := r.cfg.Partitions
	op := k*workers + w
	if !r.cfg.spread() {
		name := partitionName(op % np)
		for i := range msgs {
			msgs[i].Partition = name
		}
		return
	}
	base := op * r.cfg.Batch
	for i := range msgs {
		msgs[i].Partition = partitionName((base + i) % np)
	}
}

// pause waits a little after a failed request; it reports whether ctx ended.
func pause(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	case <-time.After(10 * time.Millisecond):
		return false
	}
}

// consume is one consumer: it pops batches and acks them in the background
// (at most InFlight acks unanswered) until ctx ends or expect deliveries
// (over all consumers) were completed.
func (r *runner) consume(ctx context.Context, c Consumer, i, n int, start time.Time, expect int64) {
	cfg := &r.cfg
	rate := 0.0
	if !cfg.pushes() {
		rate = cfg.Rate / float64(cfg.Batch)
	}
	sched := NewSchedule(start, rate, n, i)
	rng := rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))
	e2e := cfg.live()
	var h Histogram // end-to-end, this goroutine only
	var acks sync.WaitGroup
	sem := make(chan struct{}, cfg.InFlight)
	defer func() {
		acks.Wait()
		r.histMu.Lock()
		r.mainHist.Merge(&h)
		r.histMu.Unlock()
	}()
	for {
		due, err := sched.Wait(ctx)
		if err != nil {
			return
		}
		d, err := c.Pop(ctx, cfg.Batch)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.fail(fmt.Errorf("pop: %w", err))
			if pause(ctx) {
				return
			}
			continue
		}
		if d.Len() == 0 {
			continue
		}
		now := time.Now()
		r.delivered.Add(int64(d.Len()))
		var fail func(int) bool
		if cfg.failing() {
			failed := make([]bool, d.Len())
			for k := range failed {
				failed[k] = rng.Float64() < cfg.FailFraction
			}
			fail = func(k int) bool { return failed[k] }
		}
		if e2e {
			for k := 0; k < d.Len(); k++ {
				if fail != nil && fail(k) {
					continue
				}
				if t, ok := stampOf(d.Payload(k)); ok {
					h.RecordDuration(now.Sub(t))
				}
			}
		}
		sem <- struct{}{}
		acks.Add(1)
		nf := 0
		for k := 0; fail != nil && k < d.Len(); k++ {
			if fail(k) {
				nf++
			}
		}
		actx, cancel := context.WithTimeout(context.Background(), opTimeout)
		if s, ok := d.(ackSender); ok && fail == nil {
			s.SendAck(actx) // before the next pop; Ack waits for its answer
		}
		go func() {
			defer func() { <-sem; acks.Done() }()
			got, err := d.Ack(actx, fail)
			cancel()
			r.failedOn.Add(int64(nf))
			if err != nil {
				r.fail(fmt.Errorf("ack: %w", err))
			}
			if !e2e {
				lat := time.Since(due)
				r.histMu.Lock()
				r.mainHist.RecordDuration(lat)
				r.histMu.Unlock()
			}
			if total := r.consumed.Add(int64(got)); expect > 0 && total >= expect {
				r.drained.CompareAndSwap(0, time.Now().UnixNano())
				r.cancel()
			}
		}()
	}
}

// startConsumers runs r.consume on each of conss, each on a goroutine
// counted in wg.
func (r *runner) startConsumers(ctx context.Context, wg *sync.WaitGroup, conss []Consumer, start time.Time, expect int64) {
	for i, c := range conss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.consume(ctx, c, i, len(conss), start, expect)
		}()
	}
}

// fill pushes the queue of a consume run full before the measured phase
// (or a backlog run's in its push phase): Messages messages, or as many as
// FillTime allows. It answers the runner that pushed (its counts, errors
// and push latency), and an error when nothing could be pushed.
func (r *runner) fill(ctx context.Context, prods []Producer, label string) (*runner, error) {
	cfg := r.cfg
	fctx, cancel := context.WithTimeout(ctx, cfg.FillTime)
	defer cancel()
	limit := cfg.Messages
	if limit == 0 {
		limit = 1 << 62
	}
	var left atomic.Int64
	left.Store(limit)
	fr := &runner{cfg: cfg}
	fr.cfg.Messages, fr.cfg.Rate, fr.cfg.Scenario = limit, 0, Push
	workers := len(prods) * cfg.InFlight
	var wg sync.WaitGroup
	start := time.Now()
	stop := r.note(label, start, &fr.pushed)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fr.produce(fctx, prods[w%len(prods)], w, workers, start, &left)
		}()
	}
	wg.Wait()
	stop()
	if fr.pushed.Load() > 0 || fr.firstErr == nil {
		return fr, nil
	}
	return fr, fmt.Errorf("bench: %s: %w", label, fr.firstErr)
}

// idle creates the idle partitions: one message each, which every group
// then reads and acks, so that they hold state but no work.
func (r *runner) idle(ctx context.Context, prods []Producer, conss []Consumer) error {
	cfg := r.cfg
	batch := make([]Msg, 0, 1000)
	p := prods[0]
	for i := 0; i < cfg.IdlePartitions; {
		batch = batch[:0]
		for ; len(batch) < cap(batch) && i < cfg.IdlePartitions; i++ {
			pl := newPayload(cfg.MsgSize)
			batch = append(batch, Msg{Partition: idleName(i), Payload: pl})
		}
		if _, err := p.Push(ctx, batch); err != nil {
			return fmt.Errorf("bench: idle partitions: %w", err)
		}
	}
	// Each group's first consumer reads them all.
	dctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for g := 0; g < cfg.Groups; g++ {
		c := conss[g*cfg.Consumers]
		got := 0
		for got < cfg.IdlePartitions {
			d, err := c.Pop(dctx, cfg.Batch)
			if err != nil {
				return fmt.Errorf("bench: idle partitions: drain: %w", err)
			}
			if d.Len() == 0 {
				continue
			}
			n, err := d.Ack(dctx, nil)
			if err != nil {
				return fmt.Errorf("bench: idle partitions: ack: %w", err)
			}
			got += n
		}
	}
	return nil
}
