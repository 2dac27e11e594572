package httpapi

import (
	"math"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Queen's analytics routes, in Queen's shapes (server/src/routes/status.cpp
// and the procedures of lib/schema/procedures/009, 014, 015 and 017):
//
//	GET /api/v1/analytics/system-metrics?from&to&hostname&workerId
//	GET /api/v1/analytics/worker-metrics?from&to&hostname&workerId
//	GET /api/v1/analytics/postgres-stats
//	GET /api/v1/analytics/queue-lag?from&to&queue        (a top-level JSON array)
//	GET /api/v1/analytics/queue-ops?from&to&queue
//	GET /api/v1/analytics/queue-parked-replicas?from&to&queue
//	GET /api/v1/analytics/retention?from&to&queue
//
// from and to are ISO-8601 times (or Unix milliseconds: parseTime); from
// defaults to an hour before now, to to now. A range of at most 60 minutes
// is told in buckets of 1 minute, at most 6 hours in 5, at most 24 hours in
// 15, at most 7 days in 60, longer in 360 (bucketMinutes); buckets start at
// multiples of their size since the Unix epoch, and a minute counts in the
// range when its start does (from ≤ start ≤ to), as in Queen.
//
// The figures are Regent's own, from the per-minute history the bridge
// keeps (flow_history.go: 24 hours, the minute in progress included as far
// as it went): the engine's counters (engine.Stats) and each queue's
// (engine.QueueFlows), and the process's CPU and memory. What Queen
// measures in its Postgres database, its worker threads or its cluster
// has no counterpart in Regent and is 0 or empty, as each type below says;
// nothing is estimated.
//
// Differences from Queen: a malformed from, to or workerId is the client's
// mistake, 400 {"error":...} (Queen's cast fails in Postgres: 500); Queen
// cuts its 360-minute buckets at the hour (its bucket arithmetic takes the
// minute of the hour), Regent at 6 hours.

// analyticsRange reads from and to (default: the last hour) and the bucket
// size that their span takes. On failure it has answered.
func (s *Server) analyticsRange(w http.ResponseWriter, r *http.Request) (from, to, bucketMinutes int64, ok bool) {
	now := s.met.hist.clock().UnixNano()
	from, to, err := timeRange(r.URL.RawQuery, time.Hour, now)
	if err != nil {
		s.writeErr(w, err)
		return 0, 0, 0, false
	}
	if queryParam(r.URL.RawQuery, "to") == "" {
		to = now
	}
	return from, to, bucketMinutesOf(to - from), true
}

// bucketMinutesOf is Queen's bucket size for a range of d: its minutes,
// rounded, ≤ 60 → 1, ≤ 360 → 5, ≤ 1440 → 15, ≤ 10080 → 60, else 360.
func bucketMinutesOf(d int64) int64 {
	m := math.Round(float64(d) / float64(time.Minute))
	switch {
	case m <= 60:
		return 1
	case m <= 360:
		return 5
	case m <= 1440:
		return 15
	case m <= 10080:
		return 60
	}
	return 360
}

// bucketOf is the first minute of the bucket holding minute.
func bucketOf(minute, bucketMinutes int64) int64 {
	return minute - (minute%bucketMinutes+bucketMinutes)%bucketMinutes
}

// fmtMinute formats a minute's start as Queen's buckets are
// (YYYY-MM-DDTHH:MM:SSZ); fmtMillis as its time ranges are (with
// milliseconds).
func fmtMinute(minute int64) string {
	return time.Unix(minute*60, 0).UTC().Format("2006-01-02T15:04:05Z")
}

func fmtMillis(nanos int64) string {
	return time.Unix(0, nanos).UTC().Format("2006-01-02T15:04:05.000Z")
}

func timeRangeJSON(from, to int64) map[string]string {
	return map[string]string{"from": fmtMillis(from), "to": fmtMillis(to)}
}

// perSecond is n over a bucket, rounded to 2 decimals as Queen does.
func perSecond(n uint64, bucketMinutes int64) float64 {
	return math.Round(float64(n)/float64(bucketMinutes*60)*100) / 100
}

// avgMs is the mean lag, rounded to whole milliseconds.
func avgMs(sumMs, count uint64) uint64 {
	if count == 0 {
		return 0
	}
	return uint64(math.Round(float64(sumMs) / float64(count)))
}

// sat is a-b, or 0 when b is more (acks and their failed share are read
// one after the other).
func sat(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// The one worker Regent is: this process, under its host's name, worker 0
// (as /health says).
var hostname = sync.OnceValue(func() string {
	h, _ := os.Hostname()
	return h
})

// isThisWorker applies the hostname and workerId filters: whether this
// process is the worker they ask for. A workerId that is not a whole number
// is refused (ok false: answered).
func (s *Server) isThisWorker(w http.ResponseWriter, r *http.Request) (this, ok bool) {
	raw := r.URL.RawQuery
	this = true
	if h := queryParam(raw, "hostname"); h != "" && h != hostname() {
		this = false
	}
	if id := queryParam(raw, "workerId"); id != "" {
		n, err := strconv.Atoi(id)
		if err != nil {
			s.writeErr(w, badRequest("workerId: want a whole number, not "+strconv.Quote(id)))
			return false, false
		}
		this = this && n == 0
	}
	return this, true
}

// workerPoint is one bucket of worker-metrics. Regent's figures: messages
// pushed, popped and acked (acks that completed or failed messages, and
// autoAck deliveries), of these acks the completed and the others, dead
// letters, and the lag of pops (from a message's createdAt to its pop).
// Zero because Regent does not have them: requests (its engine counts
// messages; a request of either door carries many), Queen's database jobs,
// event loop lag, connection pool slots and job queue (Regent has no
// database or worker pool), and database errors.
type workerPoint struct {
	Timestamp         string  `json:"timestamp"`
	PushMessages      uint64  `json:"pushMessages"`
	PopMessages       uint64  `json:"popMessages"`
	AckMessages       uint64  `json:"ackMessages"`
	PushRequests      uint64  `json:"pushRequests"`
	PopRequests       uint64  `json:"popRequests"`
	AckRequests       uint64  `json:"ackRequests"`
	JobsDone          uint64  `json:"jobsDone"`
	PushPerSecond     float64 `json:"pushPerSecond"`
	PopPerSecond      float64 `json:"popPerSecond"`
	AckPerSecond      float64 `json:"ackPerSecond"`
	AvgEventLoopLagMs uint64  `json:"avgEventLoopLagMs"`
	MaxEventLoopLagMs uint64  `json:"maxEventLoopLagMs"`
	AvgFreeSlots      uint64  `json:"avgFreeSlots"`
	MinFreeSlots      uint64  `json:"minFreeSlots"`
	DBConnections     uint64  `json:"dbConnections"`
	AvgJobQueueSize   uint64  `json:"avgJobQueueSize"`
	MaxJobQueueSize   uint64  `json:"maxJobQueueSize"`
	BackoffSize       uint64  `json:"backoffSize"`
	AvgLagMs          uint64  `json:"avgLagMs"`
	MaxLagMs          uint64  `json:"maxLagMs"`
	LagCount          uint64  `json:"lagCount"`
	DBErrors          uint64  `json:"dbErrors"`
	AckSuccess        uint64  `json:"ackSuccess"`
	AckFailed         uint64  `json:"ackFailed"`
	DLQCount          uint64  `json:"dlqCount"`
}

// workerStatus is this process in worker-metrics' workers: the messages it
// pushed and acked in the last 5 minutes and the last minute it counted;
// Queen's event loop, pool and job queue figures are 0 (see workerPoint).
type workerStatus struct {
	Hostname          string `json:"hostname"`
	WorkerID          int    `json:"workerId"`
	AvgEventLoopLagMs uint64 `json:"avgEventLoopLagMs"`
	MaxEventLoopLagMs uint64 `json:"maxEventLoopLagMs"`
	FreeSlots         uint64 `json:"freeSlots"`
	DBConnections     uint64 `json:"dbConnections"`
	JobQueueSize      uint64 `json:"jobQueueSize"`
	BackoffSize       uint64 `json:"backoffSize"`
	MessagesProcessed uint64 `json:"messagesProcessed"`
	LastSeen          string `json:"lastSeen"`
}

// queueLag is one queue's pops and their lag over a range (worker-metrics'
// queues) or in one minute (queue-lag, with BucketTime).
type queueLag struct {
	QueueName  string `json:"queueName"`
	PopCount   uint64 `json:"popCount"`
	AvgLagMs   uint64 `json:"avgLagMs"`
	MaxLagMs   uint64 `json:"maxLagMs"`
	BucketTime string `json:"bucketTime,omitempty"`
}

// lagSum adds up pops and their lag.
type lagSum struct {
	count, sumMs, maxMs uint64
}

func (l *lagSum) add(c flowCounts, maxMs uint64) {
	l.count += c.lagCount
	l.sumMs += c.lagSumMs
	l.maxMs = max(l.maxMs, maxMs)
}

// GET /api/v1/analytics/worker-metrics?from&to&hostname&workerId
//
// timeSeries, newest first, as workerPoint says; workers, this process;
// queues, each queue's pops and their lag over the range, most pops first;
// summary, the engine's totals since it started (requests, database errors
// 0) and pendingMessages, the messages the queues' slowest groups have yet
// to take (Queen subtracts pops from pushes).
func (s *Server) handleWorkerMetrics(w http.ResponseWriter, r *http.Request) {
	from, to, bm, ok := s.analyticsRange(w, r)
	if !ok {
		return
	}
	this, ok := s.isThisWorker(w, r)
	if !ok {
		return
	}
	recs := s.met.hist.window(from, to)
	points := []workerPoint{}
	if this {
		byBucket := map[int64]*workerPoint{}
		lags := map[int64]*lagSum{}
		for i := range recs {
			rec := &recs[i]
			b := bucketOf(rec.minute, bm)
			p := byBucket[b]
			if p == nil {
				p, lags[b] = &workerPoint{Timestamp: fmtMinute(b)}, &lagSum{}
				byBucket[b] = p
			}
			t := &rec.total
			p.PushMessages += t.pushed
			p.PopMessages += t.popped
			p.AckMessages += t.acked
			p.AckFailed += t.ackFailed
			p.AckSuccess += sat(t.acked, t.ackFailed)
			p.DLQCount += t.dead
			lags[b].add(*t, rec.lagMaxMs)
		}
		buckets := sortedKeys(byBucket)
		for i := len(buckets) - 1; i >= 0; i-- {
			p, l := byBucket[buckets[i]], lags[buckets[i]]
			p.PushPerSecond, p.PopPerSecond, p.AckPerSecond = perSecond(p.PushMessages, bm), perSecond(p.PopMessages, bm), perSecond(p.AckMessages, bm)
			p.AvgLagMs, p.MaxLagMs, p.LagCount = avgMs(l.sumMs, l.count), l.maxMs, l.count
			points = append(points, *p)
		}
	}
	// Queues: pops and lag over the range.
	perQueue := map[string]*lagSum{}
	for i := range recs {
		for j := range recs[i].queues {
			q := &recs[i].queues[j]
			l := perQueue[q.name]
			if l == nil {
				l = &lagSum{}
				perQueue[q.name] = l
			}
			l.add(q.flowCounts, q.lagMaxMs)
		}
	}
	queues := make([]queueLag, 0, len(perQueue))
	for name, l := range perQueue {
		queues = append(queues, queueLag{QueueName: name, PopCount: l.count, AvgLagMs: avgMs(l.sumMs, l.count), MaxLagMs: l.maxMs})
	}
	sort.Slice(queues, func(i, j int) bool {
		if queues[i].PopCount != queues[j].PopCount {
			return queues[i].PopCount > queues[j].PopCount
		}
		return queues[i].QueueName < queues[j].QueueName
	})
	// This worker: the last 5 minutes.
	now := s.met.hist.clock().UnixNano()
	me := workerStatus{Hostname: hostname()}
	for _, rec := range s.met.hist.window(now-int64(5*time.Minute), now) {
		me.MessagesProcessed += rec.total.pushed + rec.total.acked
		me.LastSeen = fmtMinute(rec.minute)
	}
	st := s.e.Stats()
	var pending uint64
	for _, v := range s.heads() {
		pending += s.aggregate(&v, 0, nil).counts.Pending
	}
	s.writeValue(w, http.StatusOK, map[string]any{
		"timeRange":     timeRangeJSON(from, to),
		"bucketMinutes": bm,
		"pointCount":    len(points),
		"timeSeries":    points,
		"workers":       []workerStatus{me},
		"queues":        queues,
		"summary": map[string]uint64{
			"totalPushMessages": st.Pushed, "totalPopMessages": st.Popped, "totalAckMessages": st.Acked,
			"totalPushRequests": 0, "totalPopRequests": 0, "totalAckRequests": 0, "totalDbErrors": 0,
			"totalAckFailed": st.AckFailed, "totalDlq": st.DeadLettered, "pendingMessages": pending,
		},
	})
}

func sortedKeys[V any](m map[int64]V) []int64 {
	ks := make([]int64, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}

// GET /api/v1/analytics/queue-lag?from&to&queue
//
// A top-level JSON array: per minute and queue with traffic, the messages
// popped and how long they had waited (from createdAt to the pop), newest
// minute first, then by queue name. Minutes are not merged into buckets
// (Queen's procedure does not either).
func (s *Server) handleQueueLag(w http.ResponseWriter, r *http.Request) {
	from, to, _, ok := s.analyticsRange(w, r)
	if !ok {
		return
	}
	only := queryParam(r.URL.RawQuery, "queue")
	recs := s.met.hist.window(from, to)
	out := []queueLag{}
	for i := len(recs) - 1; i >= 0; i-- {
		for j := range recs[i].queues {
			q := &recs[i].queues[j]
			if only != "" && q.name != only {
				continue
			}
			out = append(out, queueLag{QueueName: q.name, PopCount: q.lagCount, AvgLagMs: avgMs(q.lagSumMs, q.lagCount),
				MaxLagMs: q.lagMaxMs, BucketTime: fmtMinute(recs[i].minute)})
		}
	}
	s.writeValue(w, http.StatusOK, out)
}

// queueOps is one bucket of one queue in queue-ops. Regent's figures:
// messages pushed and popped, acks completed and not (ackSuccess,
// ackFailed: failed, retry and dlq), the partitions at the bucket's end,
// the lag of pops, and rates over the bucket. Zero because Regent does not
// have them: requests and empty pops (its engine counts messages),
// transactions, partitions created and deleted (not counted per queue),
// and parked long polls (not kept per queue).
type queueOps struct {
	Bucket            string  `json:"bucket"`
	QueueName         string  `json:"queueName"`
	PushRequests      uint64  `json:"pushRequests"`
	PushMessages      uint64  `json:"pushMessages"`
	PopMessages       uint64  `json:"popMessages"`
	PopEmpty          uint64  `json:"popEmpty"`
	AckRequests       uint64  `json:"ackRequests"`
	AckSuccess        uint64  `json:"ackSuccess"`
	AckFailed         uint64  `json:"ackFailed"`
	Transactions      uint64  `json:"transactions"`
	PartitionsCreated uint64  `json:"partitionsCreated"`
	PartitionsDeleted uint64  `json:"partitionsDeleted"`
	PartitionCount    int     `json:"partitionCount"`
	AvgLagMs          uint64  `json:"avgLagMs"`
	MaxLagMs          uint64  `json:"maxLagMs"`
	PushPerSecond     float64 `json:"pushPerSecond"`
	PopPerSecond      float64 `json:"popPerSecond"`
	AckPerSecond      float64 `json:"ackPerSecond"`
	EmptyPerSecond    float64 `json:"emptyPerSecond"`
	ParkedCount       float64 `json:"parkedCount"`
}

// GET /api/v1/analytics/queue-ops?from&to&queue
//
// series: per bucket and queue with traffic, oldest bucket first, then by
// queue name (queueOps says which figures are Regent's); queues: their
// names, sorted.
func (s *Server) handleQueueOps(w http.ResponseWriter, r *http.Request) {
	from, to, bm, ok := s.analyticsRange(w, r)
	if !ok {
		return
	}
	only := queryParam(r.URL.RawQuery, "queue")
	type key struct {
		bucket int64
		name   string
	}
	rows := map[key]*queueOps{}
	lags := map[key]*lagSum{}
	var keys []key
	for _, rec := range s.met.hist.window(from, to) {
		b := bucketOf(rec.minute, bm)
		for j := range rec.queues {
			q := &rec.queues[j]
			if only != "" && q.name != only {
				continue
			}
			k := key{b, q.name}
			o := rows[k]
			if o == nil {
				o = &queueOps{Bucket: fmtMinute(b), QueueName: q.name}
				rows[k], lags[k] = o, &lagSum{}
				keys = append(keys, k)
			}
			o.PushMessages += q.pushed
			o.PopMessages += q.popped
			o.AckSuccess += sat(q.acked, q.ackFailed)
			o.AckFailed += q.ackFailed
			o.PartitionCount = max(o.PartitionCount, q.partitions)
			lags[k].add(q.flowCounts, q.lagMaxMs)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].bucket != keys[j].bucket {
			return keys[i].bucket < keys[j].bucket
		}
		return keys[i].name < keys[j].name
	})
	series := make([]queueOps, len(keys))
	names := map[string]bool{}
	for i, k := range keys {
		o, l := rows[k], lags[k]
		o.AvgLagMs, o.MaxLagMs = avgMs(l.sumMs, l.count), l.maxMs
		o.PushPerSecond, o.PopPerSecond = perSecond(o.PushMessages, bm), perSecond(o.PopMessages, bm)
		o.AckPerSecond = perSecond(o.AckSuccess+o.AckFailed, bm)
		series[i] = *o
		names[k.name] = true
	}
	queues := make([]string, 0, len(names))
	for n := range names {
		queues = append(queues, n)
	}
	sort.Strings(queues)
	s.writeValue(w, http.StatusOK, map[string]any{"timeRange": timeRangeJSON(from, to), "bucketMinutes": bm,
		"series": series, "queues": queues})
}

// GET /api/v1/analytics/queue-parked-replicas?from&to&queue
//
// Queen's long polls parked per queue and replica, minute by minute.
// Regent keeps no per-queue count of parked polls (the HTTP door counts
// them all together, regent_http_parked_polls in /metrics), so series and
// replicas are empty.
func (s *Server) handleQueueParkedReplicas(w http.ResponseWriter, r *http.Request) {
	from, to, bm, ok := s.analyticsRange(w, r)
	if !ok {
		return
	}
	s.writeValue(w, http.StatusOK, map[string]any{"timeRange": timeRangeJSON(from, to), "bucketMinutes": bm,
		"series": []any{}, "replicas": []any{}})
}

// retentionPoint is one bucket of retention, for buckets in which
// retention removed messages. Regent's retention removes a partition's
// oldest messages in one cut by whichever of retentionSeconds,
// completedRetentionSeconds and maxWaitTimeSeconds allows most, without
// telling which rule removed which message: retentionMsgs and totalMsgs
// are every message removed, completedRetentionMsgs is 0, evictionMsgs the
// messages removed before some group consumed them (counted once per such
// group: engine.Stats.Evicted), eventCount the cuts (one partition each).
type retentionPoint struct {
	Bucket                 string `json:"bucket,omitempty"`
	RetentionMsgs          uint64 `json:"retentionMsgs"`
	CompletedRetentionMsgs uint64 `json:"completedRetentionMsgs"`
	EvictionMsgs           uint64 `json:"evictionMsgs"`
	TotalMsgs              uint64 `json:"totalMsgs"`
	EventCount             uint64 `json:"eventCount"`
}

func (p *retentionPoint) add(c flowCounts) {
	p.RetentionMsgs += c.retained
	p.EvictionMsgs += c.evicted
	p.TotalMsgs += c.retained
	p.EventCount += c.cuts
}

// GET /api/v1/analytics/retention?from&to&queue
//
// series: the buckets in which retention removed messages, oldest first
// (retentionPoint says what each figure is); totals: their sums.
func (s *Server) handleRetention(w http.ResponseWriter, r *http.Request) {
	from, to, bm, ok := s.analyticsRange(w, r)
	if !ok {
		return
	}
	only := queryParam(r.URL.RawQuery, "queue")
	byBucket := map[int64]*retentionPoint{}
	for _, rec := range s.met.hist.window(from, to) {
		var c flowCounts
		if only == "" {
			c = rec.total
		} else {
			for j := range rec.queues {
				if rec.queues[j].name == only {
					c = rec.queues[j].flowCounts
				}
			}
		}
		if c.cuts == 0 {
			continue
		}
		b := bucketOf(rec.minute, bm)
		if byBucket[b] == nil {
			byBucket[b] = &retentionPoint{Bucket: fmtMinute(b)}
		}
		byBucket[b].add(c)
	}
	series := []retentionPoint{}
	var totals retentionPoint
	for _, b := range sortedKeys(byBucket) {
		p := byBucket[b]
		series = append(series, *p)
		totals.RetentionMsgs += p.RetentionMsgs
		totals.EvictionMsgs += p.EvictionMsgs
		totals.TotalMsgs += p.TotalMsgs
		totals.EventCount += p.EventCount
	}
	s.writeValue(w, http.StatusOK, map[string]any{"timeRange": timeRangeJSON(from, to), "bucketMinutes": bm,
		"series": series, "totals": totals})
}

// stat is one of system-metrics' figures in a bucket: Queen's
// {avg,min,max,last}.
type stat struct {
	Avg  float64 `json:"avg"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
	Last float64 `json:"last"`
}

func statOf(g gauge) stat {
	if g.n == 0 {
		return stat{}
	}
	return stat{Avg: g.sum / float64(g.n), Min: g.min, Max: g.max, Last: g.last}
}

// noStat is a figure Regent does not have.
var noStat = stat{}

// sharedStateNone is Queen's shared_state (its cluster's UDP sync and
// sidecar figures): Regent has no such thing, so it is off and every
// figure 0.
var sharedStateNone = map[string]any{
	"enabled": false,
	"sidecar_ops": map[string]any{
		"push": map[string]int{"count": 0, "latency_us": 0, "items": 0},
		"pop":  map[string]int{"count": 0, "latency_us": 0, "items": 0},
		"ack":  map[string]int{"count": 0, "latency_us": 0, "items": 0},
	},
	"queue_backoff":         map[string]int{"queues_with_backoff": 0, "total_backed_off_groups": 0, "avg_interval_ms": 0},
	"queue_backoff_summary": []any{},
	"queue_config_cache":    map[string]int{"size": 0, "hits": 0, "misses": 0},
	"consumer_presence":     map[string]int{"queues_tracked": 0, "servers_tracked": 0, "total_registrations": 0},
	"server_health":         map[string]int{"alive": 0, "dead": 0},
	"transport":             map[string]int{"sent": 0, "received": 0, "dropped": 0},
}

// GET /api/v1/analytics/system-metrics?from&to&hostname&workerId
//
// One replica, this process (its host, the port this request came to,
// worker 0), with a point per bucket in which it was sampled, oldest
// first: sampleCount samples; cpu.user_us and cpu.system_us, the CPU the
// process used between samples in Queen's unit (percent of one core times
// 100: 2 cores busy = 20000), despite the name; memory.rss_bytes and
// virtual_bytes (from /proc/self/statm: 0 where there is none). database,
// threadpool and registries are Queen's Postgres pool, thread pools and
// response registry: 0; shared_state is off (sharedStateNone).
func (s *Server) handleSystemMetrics(w http.ResponseWriter, r *http.Request) {
	from, to, bm, ok := s.analyticsRange(w, r)
	if !ok {
		return
	}
	this, ok := s.isThisWorker(w, r)
	if !ok {
		return
	}
	byBucket := map[int64]*sysMinute{}
	if this {
		for _, rec := range s.met.hist.window(from, to) {
			if rec.sys.samples == 0 {
				continue
			}
			b := bucketOf(rec.minute, bm)
			if byBucket[b] == nil {
				byBucket[b] = &sysMinute{}
			}
			byBucket[b].merge(rec.sys)
		}
	}
	points := []map[string]any{}
	for _, b := range sortedKeys(byBucket) {
		m := byBucket[b]
		points = append(points, map[string]any{
			"timestamp":   fmtMillis(b * int64(time.Minute)),
			"sampleCount": m.samples,
			"metrics": map[string]any{
				"cpu":      map[string]stat{"user_us": statOf(m.cpuUser), "system_us": statOf(m.cpuSys)},
				"memory":   map[string]stat{"rss_bytes": statOf(m.rssBytes), "virtual_bytes": statOf(m.vBytes)},
				"database": map[string]stat{"pool_size": noStat, "pool_idle": noStat, "pool_active": noStat},
				"threadpool": map[string]map[string]stat{
					"db":     {"pool_size": noStat, "queue_size": noStat},
					"system": {"pool_size": noStat, "queue_size": noStat},
				},
				"registries":   map[string]stat{"response": noStat},
				"shared_state": sharedStateNone,
			},
		})
	}
	replicas := []map[string]any{}
	if len(points) > 0 {
		replicas = append(replicas, map[string]any{"hostname": hostname(), "port": localPort(r), "workerId": 0,
			"timeSeries": points})
	}
	s.writeValue(w, http.StatusOK, map[string]any{"timeRange": timeRangeJSON(from, to), "replicas": replicas,
		"replicaCount": len(replicas), "bucketMinutes": bm, "pointCount": len(points)})
}

// localPort is the port the request came to (0 when unknown).
func localPort(r *http.Request) int {
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok {
		return a.Port
	}
	return 0
}

// GET /api/v1/analytics/postgres-stats
//
// Queen's Postgres statistics (cache hit ratios, dead tuples, vacuum,
// active queries, buffers, table sizes). Regent has no database: its
// journal's figures are in /metrics and /api/v1/dashboard/system. Every
// list is empty, every count 0, the ratios null (Postgres's answer when
// nothing was read), the database name empty.
func (s *Server) handlePostgresStats(w http.ResponseWriter, r *http.Request) {
	none := map[string]any{"diskReads": 0, "cacheHits": 0, "hitRatio": nil}
	s.writeValue(w, http.StatusOK, map[string]any{
		"timestamp":        fmtMillis(s.met.hist.clock().UnixNano()),
		"database":         "",
		"databaseCache":    map[string]any{"database": "", "diskReads": 0, "cacheHits": 0, "cacheHitRatio": nil},
		"tableCache":       []any{},
		"indexCache":       []any{},
		"cacheSummary":     map[string]any{"tables": none, "indexes": none},
		"deadTuples":       []any{},
		"hotUpdates":       []any{},
		"activeQueries":    []any{},
		"autovacuumStatus": []any{},
		"bufferConfig":     map[string]any{"sharedBuffers": "0", "sharedBuffersSize": "0 bytes"},
		"bufferUsage":      []any{},
		"tableSizes":       []any{},
	})
}
