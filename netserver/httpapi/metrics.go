package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
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
	hist         *flowHistory // per minute, for the analytics routes (flow_history.go)
}

func newHTTPMetrics(s *Server) *httpMetrics {
	// The Go runtime's and the process's figures (metrics.WriteProcessMetrics)
	// carry their # HELP and # TYPE too. The switch is the metrics library's
	// and global to the process; Regent writes nothing else through it.
	metrics.ExposeMetadata(true)
	m := &httpMetrics{s: s, set: metrics.NewSet()}
	m.set.RegisterMetricsWriter(m.write)
	if s.e == nil {
		return m // no engine to sample: its routes answer 503 (routesWithoutEngine)
	}
	m.smp.e = s.e
	m.hist = newFlowHistory(s.e)
	return m
}

// startSampler samples throughput every 5 s until stop is called (between
// scrapes the sampler also samples lazily, so Handler works without Serve).
func (m *httpMetrics) startSampler() (stop func()) {
	if m.hist == nil {
		return func() {}
	}
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
				m.hist.sample()
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

// prom writes Prometheus's text format (version 0.0.4): each family's
// # HELP and # TYPE once, then all its samples together, as the format
// wants (a family's samples may not be split by another's).
type prom struct{ w io.Writer }

func (p prom) family(name, typ, help string) {
	fmt.Fprintf(p.w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

func (p prom) u(series string, v uint64) { fmt.Fprintf(p.w, "%s %d\n", series, v) }

func (p prom) f(series string, v float64) {
	fmt.Fprintf(p.w, "%s %s\n", series, strconv.FormatFloat(v, 'g', -1, 64))
}

func (p prom) counter(name, help string, v uint64) { p.family(name, "counter", help); p.u(name, v) }
func (p prom) gauge(name, help string, v uint64)   { p.family(name, "gauge", help); p.u(name, v) }
func (p prom) gaugeF(name, help string, v float64) { p.family(name, "gauge", help); p.f(name, v) }

// queueFigures are one queue's figures for /metrics, gathered before they
// are written family by family.
type queueFigures struct {
	label                                  string // {queue="..."}
	total, pending, processing, parts, dlq uint64
	groups                                 []groupFigures
}

type groupFigures struct {
	label   string // {queue="...",group="..."}
	lag     uint64
	lagSecs float64
}

// write emits every figure in Prometheus text format.
func (m *httpMetrics) write(w io.Writer) {
	p := prom{w}
	e := m.s.e
	st := e.Stats()
	p.counter("regent_messages_pushed_total", "Messages stored by pushes since the broker started.", st.Pushed)
	p.counter("regent_messages_popped_total", "Messages delivered by pops since the broker started.", st.Popped)
	p.counter("regent_messages_acked_total", "Messages acknowledged since the broker started.", st.Acked)
	p.counter("regent_messages_dead_lettered_total", "Messages filed to a dead-letter queue since the broker started.", st.DeadLettered)
	p.counter("regent_journal_read_errors_total", "Messages the journal could not read back (damaged) since the broker started.", st.ReadErrors)
	rt := m.rates()
	p.gaugeF("regent_push_messages_per_second", "Messages pushed per second over the last 10 to 60 seconds.", rt.push)
	p.gaugeF("regent_pop_messages_per_second", "Messages popped per second over the last 10 to 60 seconds.", rt.pop)
	p.gaugeF("regent_ack_messages_per_second", "Messages acknowledged per second over the last 10 to 60 seconds.", rt.ack)
	p.gauge("regent_queues", "Queues.", uint64(st.Queues))
	p.counter("regent_http_body_refusals_total", "HTTP requests answered 503 for want of room for their body (MaxBodyBytesInFlight).", m.bodyRefusals.Load())
	p.gauge("regent_http_body_bytes_in_flight", "Bytes of HTTP request bodies held at once.", uint64(max(m.s.held.Load(), 0)))
	p.gauge("regent_cache_bytes", "Bytes of message payloads held in memory by the engine's cache.", uint64(max(st.CacheBytes, 0)))
	p.gaugeF("regent_uptime_seconds", "Seconds since the HTTP door started.", time.Since(m.s.started).Seconds())
	p.gauge("regent_http_connections", "Open HTTP connections.", uint64(max(m.s.conns.Load(), 0)))
	p.counter("regent_http_requests_total", "HTTP requests served since the broker started.", m.requests.Load())
	p.gauge("regent_http_parked_polls", "HTTP long polls waiting for messages.", uint64(max(m.parked.Load(), 0)))
	if f := m.s.cfg.TCPConnections; f != nil {
		p.gauge("regent_tcp_connections", "Open connections of the binary protocol.", uint64(max(f(), 0)))
	}
	if f := m.s.cfg.TCPFrames; f != nil {
		held, refused := f()
		p.gauge("regent_tcp_frame_bytes_in_flight", "Bytes that large frames of the binary protocol hold, from their arrival until they are answered, of the budget they share with HTTP bodies.", uint64(max(held, 0)))
		p.counter("regent_tcp_frame_refusals_total", "Frames of the binary protocol answered overloaded for want of room in that budget.", refused)
	}
	maint := uint64(0)
	if m.s.maintenance.Load() {
		maint = 1
	}
	p.gauge("regent_maintenance_mode_enabled", "1 while maintenance mode is on, else 0.", maint)
	if cl := m.s.cfg.Cluster; cl != nil {
		if md := cl.Metadata(); md.Cluster != "" {
			owned, live := uint64(0), uint64(0)
			for _, o := range md.Owners {
				if o >= 0 && int(o) < len(md.Brokers) && md.Brokers[o].ID == md.Node {
					owned++
				}
			}
			for _, b := range md.Brokers {
				if b.Live {
					live++
				}
			}
			p.gauge("regent_cluster_shards", "Shards of the cluster.", uint64(md.Shards))
			p.gauge("regent_cluster_shards_owned", "Shards this broker owns (serves).", owned)
			p.gauge("regent_cluster_brokers", "Brokers of the cluster.", uint64(len(md.Brokers)))
			p.gauge("regent_cluster_brokers_live", "Brokers of the cluster that are up (registered).", live)
			p.gauge("regent_cluster_map_epoch", "The epoch of the shard map this broker routes by.", uint64(max(md.Epoch, 0)))
		}
	}

	// Per queue: depth, pending, dead letters; per (queue, group): lag.
	now := e.Now()
	var qs []queueFigures
	var dlqTotal uint64
	for _, v := range m.s.heads() {
		q := labelValue(v.Name)
		a := m.s.aggregate(&v, now, nil)
		f := queueFigures{label: `{queue="` + q + `"}`, total: a.counts.Total, pending: a.counts.Pending,
			processing: a.counts.Processing, parts: uint64(v.PartitionCount), dlq: uint64(v.DeadLetters)}
		for k, gm := range v.Groups {
			f.groups = append(f.groups, groupFigures{label: `{queue="` + q + `",group="` + labelValue(gm.Name) + `"}`,
				lag: a.groups[k].OffsetLag, lagSecs: a.groups[k].MaxTimeLagSeconds})
		}
		dlqTotal += f.dlq
		qs = append(qs, f)
	}
	perQueue := func(name, help string, v func(*queueFigures) uint64) {
		p.family(name, "gauge", help)
		for i := range qs {
			p.u(name+qs[i].label, v(&qs[i]))
		}
	}
	perQueue("regent_queue_messages", "Messages stored in a queue.", func(f *queueFigures) uint64 { return f.total })
	perQueue("regent_queue_pending_messages", "Messages of a queue that its slowest consumer group has yet to take, not counting those under its lease.", func(f *queueFigures) uint64 { return f.pending })
	perQueue("regent_queue_processing_messages", "Messages of a queue under its slowest consumer group's lease.", func(f *queueFigures) uint64 { return f.processing })
	perQueue("regent_queue_partitions", "Partitions of a queue.", func(f *queueFigures) uint64 { return f.parts })
	perQueue("regent_dlq_depth", "Entries in a queue's dead-letter queue.", func(f *queueFigures) uint64 { return f.dlq })
	p.family("regent_group_lag_messages", "gauge", "Messages a consumer group has yet to take from a queue.")
	for _, f := range qs {
		for _, g := range f.groups {
			p.u("regent_group_lag_messages"+g.label, g.lag)
		}
	}
	p.family("regent_group_lag_seconds", "gauge", "Age in seconds of the oldest message a consumer group has yet to take from a queue.")
	for _, f := range qs {
		for _, g := range f.groups {
			p.f("regent_group_lag_seconds"+g.label, g.lagSecs)
		}
	}
	p.gauge("regent_dlq_depth_total", "Entries in all dead-letter queues.", dlqTotal)

	if f := m.s.cfg.JournalStats; f != nil {
		writeJournal(p, f())
	}
}

// writeJournal emits the journal's figures: the fsync latency histogram
// (Prometheus buckets, cumulative), batch sizes and bytes.
func writeJournal(p prom, js netserver.JournalStats) {
	if len(js.FsyncBuckets) > 0 {
		const h = "regent_journal_fsync_seconds"
		p.family(h, "histogram", "Time the journal's fsyncs took.")
		var cum uint64
		for i, b := range js.FsyncBuckets {
			if i < len(js.FsyncHistogram) {
				cum += js.FsyncHistogram[i]
			}
			p.u(fmt.Sprintf(`%s_bucket{le="%g"}`, h, b.Seconds()), cum)
		}
		if len(js.FsyncHistogram) > len(js.FsyncBuckets) {
			cum += js.FsyncHistogram[len(js.FsyncBuckets)]
		}
		p.u(h+`_bucket{le="+Inf"}`, max(cum, js.Fsyncs))
		p.f(h+"_sum", float64(js.FsyncNanosTotal)/1e9)
		p.u(h+"_count", max(cum, js.Fsyncs))
	}
	p.gaugeF("regent_journal_last_fsync_seconds", "Time the journal's last fsync took.", float64(js.LastFsyncNanos)/1e9)
	p.counter("regent_journal_batches_total", "Batches (group commits) the journal wrote.", js.Entries)
	p.counter("regent_journal_records_total", "Records the journal wrote.", js.Records)
	p.gauge("regent_journal_last_batch_records", "Records in the journal's last batch.", js.LastBatchRecords)
	avg := 0.0
	if js.Entries > 0 {
		avg = float64(js.Records) / float64(js.Entries)
	}
	p.gaugeF("regent_journal_records_per_batch", "Records per batch since the broker started.", avg)
	p.counter("regent_journal_written_bytes_total", "Bytes the journal wrote.", js.BytesWritten)
	p.gauge("regent_journal_disk_bytes", "Bytes the journal holds on disk.", uint64(max(js.DiskBytes, 0)))
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
