package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver"
)

// httpMetrics holds the bridge's metric set and its throughput sampler.
// Everything it reports is computed when scraped (from the engine's
// counters and state, the journal's stats and a few atomics), so the hot
// paths pay for nothing but the atomics.
type httpMetrics struct {
	s        *Server
	set      *metrics.Set
	requests atomic.Uint64
	parked   atomic.Int64 // long polls parked in the engine
	// bodyRefusals counts requests answered 503 for want of room in
	// MaxBodyBytesInFlight.
	bodyRefusals atomic.Uint64
	smp          sampler
}

func newHTTPMetrics(s *Server) *httpMetrics {
	m := &httpMetrics{s: s, set: metrics.NewSet()}
	m.smp.e = s.e
	m.set.RegisterMetricsWriter(m.write)
	return m
}

// startSampler samples throughput every 5 s until stop is called (between
// scrapes the sampler also samples lazily, so Handler works without Serve).
func (m *httpMetrics) startSampler() (stop func()) {
	done := make(chan struct{})
	var once sync.Once
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				m.smp.sample()
			}
		}
	}()
	return func() { once.Do(func() { close(done) }) }
}

type rates struct{ push, pop, ack float64 }

func (m *httpMetrics) rates() rates { return m.smp.rates() }

// labelValue escapes a Prometheus label value.
func labelValue(s string) string {
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return r.Replace(s)
}

// write emits every figure in Prometheus text format.
func (m *httpMetrics) write(w io.Writer) {
	e := m.s.e
	st := e.Stats()
	metrics.WriteCounterUint64(w, "regent_messages_pushed_total", st.Pushed)
	metrics.WriteCounterUint64(w, "regent_messages_popped_total", st.Popped)
	metrics.WriteCounterUint64(w, "regent_messages_acked_total", st.Acked)
	metrics.WriteCounterUint64(w, "regent_messages_dead_lettered_total", st.DeadLettered)
	metrics.WriteCounterUint64(w, "regent_journal_read_errors_total", st.ReadErrors)
	rt := m.rates()
	metrics.WriteGaugeFloat64(w, "regent_push_messages_per_second", rt.push)
	metrics.WriteGaugeFloat64(w, "regent_pop_messages_per_second", rt.pop)
	metrics.WriteGaugeFloat64(w, "regent_ack_messages_per_second", rt.ack)
	metrics.WriteGaugeUint64(w, "regent_queues", uint64(st.Queues))
	metrics.WriteCounterUint64(w, "regent_http_body_refusals_total", m.bodyRefusals.Load())
	metrics.WriteGaugeUint64(w, "regent_http_body_bytes_in_flight", uint64(max(m.s.held.Load(), 0)))
	metrics.WriteGaugeUint64(w, "regent_cache_bytes", uint64(max(st.CacheBytes, 0)))
	metrics.WriteGaugeFloat64(w, "regent_uptime_seconds", time.Since(m.s.started).Seconds())
	metrics.WriteGaugeUint64(w, "regent_http_connections", uint64(max(m.s.conns.Load(), 0)))
	metrics.WriteCounterUint64(w, "regent_http_requests_total", m.requests.Load())
	metrics.WriteGaugeUint64(w, "regent_http_parked_polls", uint64(max(m.parked.Load(), 0)))
	if f := m.s.cfg.TCPConnections; f != nil {
		metrics.WriteGaugeUint64(w, "regent_tcp_connections", uint64(max(f(), 0)))
	}
	maint := uint64(0)
	if m.s.maintenance.Load() {
		maint = 1
	}
	metrics.WriteGaugeUint64(w, "regent_maintenance_mode_enabled", maint)

	// Per queue: depth, pending, dead letters; per (queue, group): lag.
	now := e.Now()
	var dlqTotal uint64
	for _, v := range m.s.heads() {
		q := labelValue(v.Name)
		a := m.s.aggregate(&v, now, nil)
		c := a.counts
		metrics.WriteGaugeUint64(w, fmt.Sprintf(`regent_queue_messages{queue="%s"}`, q), c.Total)
		metrics.WriteGaugeUint64(w, fmt.Sprintf(`regent_queue_pending_messages{queue="%s"}`, q), c.Pending)
		metrics.WriteGaugeUint64(w, fmt.Sprintf(`regent_queue_processing_messages{queue="%s"}`, q), c.Processing)
		metrics.WriteGaugeUint64(w, fmt.Sprintf(`regent_queue_partitions{queue="%s"}`, q), uint64(v.PartitionCount))
		metrics.WriteGaugeUint64(w, fmt.Sprintf(`regent_dlq_depth{queue="%s"}`, q), uint64(v.DeadLetters))
		dlqTotal += uint64(v.DeadLetters)
		for k, gm := range v.Groups {
			lbl := fmt.Sprintf(`{queue="%s",group="%s"}`, q, labelValue(gm.Name))
			metrics.WriteGaugeUint64(w, "regent_group_lag_messages"+lbl, a.groups[k].OffsetLag)
			metrics.WriteGaugeFloat64(w, "regent_group_lag_seconds"+lbl, a.groups[k].MaxTimeLagSeconds)
		}
	}
	metrics.WriteGaugeUint64(w, "regent_dlq_depth_total", dlqTotal)

	if f := m.s.cfg.JournalStats; f != nil {
		writeJournal(w, f())
	}
}

// writeJournal emits the journal's figures: the fsync latency histogram
// (Prometheus buckets, cumulative), batch sizes and bytes.
func writeJournal(w io.Writer, js netserver.JournalStats) {
	var cum uint64
	for i, b := range js.FsyncBuckets {
		if i < len(js.FsyncHistogram) {
			cum += js.FsyncHistogram[i]
		}
		metrics.WriteGaugeUint64(w, fmt.Sprintf(`regent_journal_fsync_seconds_bucket{le="%g"}`, b.Seconds()), cum)
	}
	if len(js.FsyncHistogram) > len(js.FsyncBuckets) {
		cum += js.FsyncHistogram[len(js.FsyncBuckets)]
	}
	if len(js.FsyncBuckets) > 0 {
		metrics.WriteGaugeUint64(w, `regent_journal_fsync_seconds_bucket{le="+Inf"}`, max(cum, js.Fsyncs))
	}
	metrics.WriteCounterFloat64(w, "regent_journal_fsync_seconds_sum", float64(js.FsyncNanosTotal)/1e9)
	metrics.WriteCounterUint64(w, "regent_journal_fsync_seconds_count", js.Fsyncs)
	metrics.WriteGaugeFloat64(w, "regent_journal_last_fsync_seconds", float64(js.LastFsyncNanos)/1e9)
	metrics.WriteCounterUint64(w, "regent_journal_batches_total", js.Entries)
	metrics.WriteCounterUint64(w, "regent_journal_records_total", js.Records)
	metrics.WriteGaugeUint64(w, "regent_journal_last_batch_records", js.LastBatchRecords)
	avg := 0.0
	if js.Entries > 0 {
		avg = float64(js.Records) / float64(js.Entries)
	}
	metrics.WriteGaugeFloat64(w, "regent_journal_records_per_batch", avg)
	metrics.WriteCounterUint64(w, "regent_journal_written_bytes_total", js.BytesWritten)
	metrics.WriteGaugeUint64(w, "regent_journal_disk_bytes", uint64(max(js.DiskBytes, 0)))
}

// GET /metrics/prometheus (and /metrics with Accept: text/plain):
// Prometheus text format, with the Go runtime's and the process's figures.
func (s *Server) handlePrometheus(w http.ResponseWriter, r *http.Request) {
	b := getBuf()
	defer putBuf(b)
	buf := bytesWriter{b: *b}
	s.met.set.WritePrometheus(&buf)
	metrics.WriteProcessMetrics(&buf)
	*b = buf.b
	h := w.Header()
	h["Content-Type"] = hdrText
	w.WriteHeader(http.StatusOK)
	w.Write(buf.b)
}

// GET /metrics: Queen's JSON summary; Prometheus text when the client asks
// for text/plain (a Prometheus scraper).
func (s *Server) handleMetricsJSON(w http.ResponseWriter, r *http.Request) {
	if a := r.Header.Get("Accept"); strings.Contains(a, "text/plain") || strings.Contains(a, "openmetrics") {
		s.handlePrometheus(w, r)
		return
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st := s.e.Stats()
	rt := s.met.rates()
	up := time.Since(s.started).Seconds()
	reqs := s.met.requests.Load()
	s.writeValue(w, http.StatusOK, map[string]any{
		"uptime":   up,
		"requests": map[string]any{"total": reqs, "rate": float64(reqs) / max(up, 1)},
		"messages": map[string]any{"total": st.Pushed, "rate": rt.push, "popped": st.Popped, "acked": st.Acked},
		"database": map[string]any{"poolSize": 0, "idleConnections": 0, "waitingRequests": 0},
		"memory": map[string]any{"rss": ms.Sys, "heapTotal": ms.HeapSys, "heapUsed": ms.HeapAlloc,
			"external": 0, "arrayBuffers": 0},
		"cpu":         map[string]any{"user": 0, "system": 0},
		"connections": map[string]any{"http": s.conns.Load()},
	})
}

type bytesWriter struct{ b []byte }

func (w *bytesWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

// sampler keeps the engine's counters over time: recent samples (at least
// a second apart) for rates, and one sample per minute for the dashboard's
// throughput series (the last 24 hours).
type sampler struct {
	e       *engine.Engine
	mu      sync.Mutex
	recent  [32]sample
	n, head int
	minutes [1440]sample
}

type sample struct {
	at                   int64 // Unix nanoseconds; for minutes, the minute's number
	pushed, popped, acks uint64
}

// sample records the counters now (at most once a second).
func (s *sampler) sample() sample {
	now := time.Now().UnixNano()
	st := s.e.Stats()
	cur := sample{at: now, pushed: st.Pushed, popped: st.Popped, acks: st.Acked}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 || now-s.recent[(s.head+len(s.recent)-1)%len(s.recent)].at >= int64(time.Second) {
		s.recent[s.head] = cur
		s.head = (s.head + 1) % len(s.recent)
		s.n = min(s.n+1, len(s.recent))
	}
	minute := now / int64(time.Minute)
	if slot := &s.minutes[minute%int64(len(s.minutes))]; slot.at != minute {
		*slot = sample{at: minute, pushed: cur.pushed, popped: cur.popped, acks: cur.acks}
	}
	return cur
}

// rates returns messages per second over roughly the last 10 to 60 s.
func (s *sampler) rates() rates {
	cur := s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	var base *sample
	for i := 0; i < s.n; i++ {
		x := &s.recent[(s.head+len(s.recent)-1-i)%len(s.recent)]
		if cur.at-x.at >= int64(10*time.Second) {
			base = x
			break
		}
	}
	if base == nil && s.n > 0 {
		base = &s.recent[(s.head+len(s.recent)-s.n)%len(s.recent)]
	}
	if base == nil || cur.at <= base.at {
		return rates{}
	}
	d := float64(cur.at-base.at) / 1e9
	return rates{
		push: float64(cur.pushed-base.pushed) / d,
		pop:  float64(cur.popped-base.popped) / d,
		ack:  float64(cur.acks-base.acks) / d,
	}
}

// minuteBucket is one minute of throughput.
type minuteBucket struct {
	minute                int64
	pushed, popped, acked uint64
}

// series returns the minutes in [from, to) (Unix nanoseconds) for which the
// sampler saw both the minute and the next one.
func (s *sampler) series(from, to int64) []minuteBucket {
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	from = max(from, to-int64(len(s.minutes))*int64(time.Minute))
	var out []minuteBucket
	for m := from / int64(time.Minute); m*int64(time.Minute) < to; m++ {
		a := s.minutes[m%int64(len(s.minutes))]
		b := s.minutes[(m+1)%int64(len(s.minutes))]
		if a.at != m || b.at != m+1 {
			continue
		}
		out = append(out, minuteBucket{minute: m, pushed: b.pushed - a.pushed, popped: b.popped - a.popped, acked: b.acks - a.acks})
	}
	return out
}
