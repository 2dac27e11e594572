package httpapi

import (
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/regentmq/regent/engine"
)

// flowHistory is the per-minute history behind Queen's analytics routes
// (http_analytics.go): for each of the last historyMinutes minutes, what
// went through the engine (engine.Stats), what went through each queue
// that had any traffic (engine.QueueFlows), and the process's CPU and
// memory.
//
// It is a ring of minutes, filled by sample: the first sample of a minute
// closes the minute before, as the difference between the counters then and
// at that minute's first sample. Samples come from the bridge's sampler
// (every 5 s while Serve runs) and from the analytics routes themselves. A
// minute whose next minute no sample saw (nobody served or asked meanwhile)
// is missing rather than guessed; a minute's edges are those of its first
// sample (within the sampler's 5 s). The minute in progress is answered
// from the counters now.
//
// Memory is bounded: historyMinutes fixed slots, and at most rowBudget
// per-queue rows over all of them (only queues with traffic in a minute
// get a row in it). Past the budget, the oldest minutes lose their
// per-queue rows (their totals stay), so with many busy queues the
// per-queue history is shorter than 24 hours.
type flowHistory struct {
	e         *engine.Engine
	rowBudget int

	mu  sync.Mutex
	now func() time.Time // the clock; tests set it (export_test.go)
	// The minute in progress: its number (Unix minutes; 0 before the first
	// sample), the counters at its first sample, its process samples.
	cur   int64
	base  flowCounts
	baseQ map[engine.UUID]flowCounts
	sys   sysMinute
	// The previous process sample, for CPU use between samples.
	lastAt  time.Time
	lastCPU cpuTimes
	mins    [historyMinutes]minuteRec // slot minute%historyMinutes
	rows    int                       // per-queue rows held in mins
}

const (
	historyMinutes = 1440    // 24 hours
	historyRows    = 1 << 16 // per-queue rows, all minutes together (112 bytes each: 7 MiB at most)
	// sampleEvery is the least time between two samples.
	sampleEvery = time.Second
)

// flowCounts are counters of engine.Stats and engine.QueueFlow that add up
// over minutes.
type flowCounts struct {
	pushed, popped, acked, ackFailed, dead uint64
	retained, evicted, cuts                uint64
	lagCount, lagSumMs                     uint64
}

func statsCounts(st *engine.Stats) flowCounts {
	return flowCounts{pushed: st.Pushed, popped: st.Popped, acked: st.Acked, ackFailed: st.AckFailed,
		dead: st.DeadLettered, retained: st.Retained, evicted: st.Evicted, cuts: st.RetentionCuts,
		lagCount: st.PopLagCount, lagSumMs: st.PopLagSumMs}
}

func queueCounts(f *engine.QueueFlow) flowCounts {
	return flowCounts{pushed: f.Pushed, popped: f.Popped, acked: f.Acked, ackFailed: f.AckFailed,
		dead: f.DeadLettered, retained: f.Retained, evicted: f.Evicted, cuts: f.RetentionCuts,
		lagCount: f.PopLagCount, lagSumMs: f.PopLagSumMs}
}

// since is c minus an earlier reading b (0 where b is ahead: counters
// never go back, so that is not a reading of the same thing).
func (c flowCounts) since(b flowCounts) flowCounts {
	d := func(x, y uint64) uint64 {
		if x < y {
			return 0
		}
		return x - y
	}
	return flowCounts{d(c.pushed, b.pushed), d(c.popped, b.popped), d(c.acked, b.acked), d(c.ackFailed, b.ackFailed),
		d(c.dead, b.dead), d(c.retained, b.retained), d(c.evicted, b.evicted), d(c.cuts, b.cuts),
		d(c.lagCount, b.lagCount), d(c.lagSumMs, b.lagSumMs)}
}

func (c flowCounts) zero() bool { return c == flowCounts{} }

// queueRow is one queue's traffic in one minute.
type queueRow struct {
	name string
	flowCounts
	lagMaxMs   uint64
	partitions int // at the minute's end (or now, for the minute in progress)
}

// minuteRec is one minute of history.
type minuteRec struct {
	minute   int64 // Unix minutes; 0: an empty slot
	total    flowCounts
	lagMaxMs uint64
	queues   []queueRow // by name; never changed once stored
	sys      sysMinute
}

// gauge sums samples of one figure: count, sum, least, most, latest.
type gauge struct {
	n                   int
	sum, min, max, last float64
}

func (g *gauge) add(v float64) {
	if g.n == 0 || v < g.min {
		g.min = v
	}
	if g.n == 0 || v > g.max {
		g.max = v
	}
	g.n++
	g.sum += v
	g.last = v
}

// merge adds o, which was sampled after g.
func (g *gauge) merge(o gauge) {
	if o.n == 0 {
		return
	}
	if g.n == 0 {
		*g = o
		return
	}
	g.n += o.n
	g.sum += o.sum
	g.min = min(g.min, o.min)
	g.max = max(g.max, o.max)
	g.last = o.last
}

// sysMinute is the process's figures sampled in one minute: CPU use
// (percent of one core times 100, Queen's unit) between samples, and
// memory in bytes.
type sysMinute struct {
	samples          int
	cpuUser, cpuSys  gauge
	rssBytes, vBytes gauge
}

func (m *sysMinute) merge(o sysMinute) {
	m.samples += o.samples
	m.cpuUser.merge(o.cpuUser)
	m.cpuSys.merge(o.cpuSys)
	m.rssBytes.merge(o.rssBytes)
	m.vBytes.merge(o.vBytes)
}

func newFlowHistory(e *engine.Engine) *flowHistory {
	h := &flowHistory{e: e, rowBudget: historyRows, now: time.Now}
	h.sample()
	return h
}

// sample takes a sample now, unless one was taken less than sampleEvery
// ago in the same minute.
func (h *flowHistory) sample() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sampleLocked()
}

func (h *flowHistory) sampleLocked() {
	now := h.now()
	minute := now.UnixNano() / int64(time.Minute)
	if minute == h.cur && now.Sub(h.lastAt) < sampleEvery {
		return
	}
	if minute != h.cur {
		st := h.e.Stats()
		flows := h.e.QueueFlows()
		if h.cur != 0 && minute == h.cur+1 {
			h.store(h.closeMinute(&st, flows))
		}
		h.cur, h.base, h.sys = minute, statsCounts(&st), sysMinute{}
		h.baseQ = make(map[engine.UUID]flowCounts, len(flows))
		for i := range flows {
			h.baseQ[flows[i].ID] = queueCounts(&flows[i])
		}
	}
	cpu := readCPU()
	if cpu.ok && h.lastCPU.ok && now.After(h.lastAt) {
		wall := float64(now.Sub(h.lastAt).Microseconds())
		h.sys.cpuUser.add(float64(cpu.userUs-min(cpu.userUs, h.lastCPU.userUs)) / wall * 10000)
		h.sys.cpuSys.add(float64(cpu.sysUs-min(cpu.sysUs, h.lastCPU.sysUs)) / wall * 10000)
	}
	rss, vsz := readMemory()
	h.sys.rssBytes.add(float64(rss))
	h.sys.vBytes.add(float64(vsz))
	h.sys.samples++
	h.lastAt, h.lastCPU = now, cpu
}

// closeMinute is the minute in progress as of st and flows (read now).
func (h *flowHistory) closeMinute(st *engine.Stats, flows []engine.QueueFlow) minuteRec {
	rec := minuteRec{minute: h.cur, total: statsCounts(st).since(h.base), lagMaxMs: st.PopLagMax.In(h.cur), sys: h.sys}
	for i := range flows {
		f := &flows[i]
		if internalQueue(f.Name) {
			continue
		}
		d := queueCounts(f).since(h.baseQ[f.ID])
		if d.zero() {
			continue
		}
		rec.queues = append(rec.queues, queueRow{name: f.Name, flowCounts: d, lagMaxMs: f.PopLagMax.In(h.cur), partitions: f.Partitions})
	}
	return rec
}

// store keeps rec in its slot, within the row budget.
func (h *flowHistory) store(rec minuteRec) {
	slot := h.slot(rec.minute)
	h.rows -= len(slot.queues)
	if len(rec.queues) > h.rowBudget { // one minute alone past the budget: its busiest queues
		sort.SliceStable(rec.queues, func(i, j int) bool { return busy(&rec.queues[i]) > busy(&rec.queues[j]) })
		rec.queues = rec.queues[:h.rowBudget]
		sort.Slice(rec.queues, func(i, j int) bool { return rec.queues[i].name < rec.queues[j].name })
	}
	if rec.queues != nil {
		rec.queues = slices.Clone(rec.queues) // without append's spare room: the budget counts rows
	}
	*slot = rec
	h.rows += len(rec.queues)
	for m := rec.minute - historyMinutes + 1; h.rows > h.rowBudget && m < rec.minute; m++ {
		if old := h.slot(m); old.minute == m && old.queues != nil {
			h.rows -= len(old.queues)
			old.queues = nil
		}
	}
}

// slot is minute's place in the ring.
func (h *flowHistory) slot(minute int64) *minuteRec {
	return &h.mins[(minute%historyMinutes+historyMinutes)%historyMinutes]
}

func busy(r *queueRow) uint64 { return r.pushed + r.popped + r.acked + r.retained }

// window returns the minutes whose start lies in [from, to] (Unix
// nanoseconds), oldest first: the stored ones, and the minute in progress
// as far as it went. The records share their queue rows with the history
// (read-only).
func (h *flowHistory) window(from, to int64) []minuteRec {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sampleLocked()
	first := max(ceilDiv(from, int64(time.Minute)), h.cur-historyMinutes+1)
	last := min(floorDiv(to, int64(time.Minute)), h.cur)
	var out []minuteRec
	for m := first; m <= last; m++ {
		if m == h.cur {
			st := h.e.Stats()
			out = append(out, h.closeMinute(&st, h.e.QueueFlows()))
			break
		}
		if rec := h.slot(m); rec.minute == m {
			out = append(out, *rec)
		}
	}
	return out
}

// clock reads the history's clock.
func (h *flowHistory) clock() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now()
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }

// cpuTimes is the CPU time the process used, in microseconds.
type cpuTimes struct {
	userUs, sysUs uint64
	ok            bool
}

// readCPU reads the process's CPU times (getrusage); ok is false where
// there are none.
func readCPU() cpuTimes {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuTimes{}
	}
	us := func(tv syscall.Timeval) uint64 { return uint64(max(tv.Sec, 0))*1e6 + uint64(max(tv.Usec, 0)) }
	return cpuTimes{userUs: us(ru.Utime), sysUs: us(ru.Stime), ok: true}
}

// readMemory returns the process's resident and virtual memory in bytes,
// from /proc/self/statm; 0 and 0 where there is none (not Linux).
func readMemory() (rss, vsz uint64) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, 0
	}
	size, err1 := strconv.ParseUint(f[0], 10, 64)
	res, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0
	}
	page := uint64(os.Getpagesize())
	return res * page, size * page
}
