package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/netserver/httpapi"
)

// analyticsRoutes are Queen's analytics routes with the keys of their
// answers that Queen's procedures build (queue-lag's answer is an array).
var analyticsRoutes = []struct {
	path string
	keys []string
}{
	{"/api/v1/analytics/system-metrics", []string{"timeRange", "replicas", "replicaCount", "bucketMinutes", "pointCount"}},
	{"/api/v1/analytics/worker-metrics", []string{"timeRange", "bucketMinutes", "pointCount", "timeSeries", "workers", "queues", "summary"}},
	{"/api/v1/analytics/postgres-stats", []string{"timestamp", "database", "databaseCache", "tableCache", "indexCache",
		"cacheSummary", "deadTuples", "hotUpdates", "activeQueries", "autovacuumStatus", "bufferConfig", "bufferUsage", "tableSizes"}},
	{"/api/v1/analytics/queue-lag", nil},
	{"/api/v1/analytics/queue-ops", []string{"timeRange", "bucketMinutes", "series", "queues"}},
	{"/api/v1/analytics/queue-parked-replicas", []string{"timeRange", "bucketMinutes", "series", "replicas"}},
	{"/api/v1/analytics/retention", []string{"timeRange", "bucketMinutes", "series", "totals"}},
	{"/api/v1/status/analytics", []string{"dataPoints", "interval", "from", "to"}},
}

// The keys of the rows and parts of the answers.
var (
	workerPointKeys = []string{"timestamp", "pushMessages", "popMessages", "ackMessages", "pushRequests", "popRequests",
		"ackRequests", "jobsDone", "pushPerSecond", "popPerSecond", "ackPerSecond", "avgEventLoopLagMs", "maxEventLoopLagMs",
		"avgFreeSlots", "minFreeSlots", "dbConnections", "avgJobQueueSize", "maxJobQueueSize", "backoffSize", "avgLagMs",
		"maxLagMs", "lagCount", "dbErrors", "ackSuccess", "ackFailed", "dlqCount"}
	workerKeys = []string{"hostname", "workerId", "avgEventLoopLagMs", "maxEventLoopLagMs", "freeSlots", "dbConnections",
		"jobQueueSize", "backoffSize", "messagesProcessed", "lastSeen"}
	summaryKeys = []string{"totalPushMessages", "totalPopMessages", "totalAckMessages", "totalPushRequests", "totalPopRequests",
		"totalAckRequests", "totalDbErrors", "totalAckFailed", "totalDlq", "pendingMessages"}
	queueOpsKeys = []string{"bucket", "queueName", "pushRequests", "pushMessages", "popMessages", "popEmpty", "ackRequests",
		"ackSuccess", "ackFailed", "transactions", "partitionsCreated", "partitionsDeleted", "partitionCount", "avgLagMs",
		"maxLagMs", "pushPerSecond", "popPerSecond", "ackPerSecond", "emptyPerSecond", "parkedCount"}
	queueLagKeys  = []string{"queueName", "popCount", "avgLagMs", "maxLagMs", "bucketTime"}
	retentionKeys = []string{"retentionMsgs", "completedRetentionMsgs", "evictionMsgs", "totalMsgs", "eventCount"}
)

// hasKeys reports the keys o lacks.
func hasKeys(t *testing.T, what string, o any, keys ...string) {
	t.Helper()
	m, ok := o.(obj)
	if !ok {
		t.Errorf("%s: %T, want an object: %v", what, o, o)
		return
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s lacks %q: %v", what, k, m)
		}
	}
}

// getObj fetches path (200) into an object; getList into an array.
func (h *harness) getObj(path string) obj {
	h.t.Helper()
	var o obj
	h.call("GET", path, nil, 200, &o)
	return o
}

func (h *harness) getList(path string) []any {
	h.t.Helper()
	var l []any
	h.call("GET", path, nil, 200, &l)
	return l
}

// rows returns o[key] as a list of objects.
func rows(t *testing.T, o obj, key string) []obj {
	t.Helper()
	l, ok := o[key].([]any)
	if !ok {
		t.Fatalf("%s is %T, want an array: %v", key, o[key], o)
	}
	out := make([]obj, len(l))
	for i, x := range l {
		if out[i], ok = x.(obj); !ok {
			t.Fatalf("%s[%d] is %T: %v", key, i, x, x)
		}
	}
	return out
}

// sum adds up key over rows (those of queue when queue is not "").
func sum(rs []obj, key, queue string) float64 {
	var n float64
	for _, r := range rs {
		if queue == "" || r["queueName"] == queue {
			n += r[key].(float64)
		}
	}
	return n
}

// The analytics routes answer in Queen's shapes with what went through the
// broker: pushes, pops, acks (failed ones apart), the lag of pops, and
// retention's removals, per minute and per queue; its CPU and memory; and
// empty-but-valid parts where the figure is Postgres's or Queen's workers'.
func TestAnalyticsRoutesCountWhatWentThrough(t *testing.T) {
	h := newHarness(t)
	h.pushN("an-a", "p1", 3)
	h.pushN("an-a", "p2", 2)
	h.pushN("an-b", "Default", 3)
	msgs := msgsOf(h.pop("an-a/partition/p1?batch=3"))
	if len(msgs) != 3 {
		t.Fatalf("popped %d of an-a/p1", len(msgs))
	}
	for i, r := range h.ackBatch("", ackOf(msgs[0], "completed"), ackOf(msgs[1], "completed"), ackOf(msgs[2], "failed")) {
		if r["success"] != true {
			t.Fatalf("ack %d: %v", i, r)
		}
	}
	if got := msgsOf(h.pop("an-b?batch=2&autoAck=true")); len(got) != 2 {
		t.Fatalf("autoAck pop of an-b: %d", len(got))
	}
	// 8 pushed (5 to an-a, 3 to an-b); 5 popped (3, 2); 5 acked (2
	// completed and 1 failed, 2 by autoAck).

	for _, r := range analyticsRoutes {
		if r.keys == nil {
			continue
		}
		hasKeys(t, r.path, h.getObj(r.path), r.keys...)
	}

	// worker-metrics: the engine's counts, per minute, newest first.
	wm := h.getObj("/api/v1/analytics/worker-metrics")
	series := rows(t, wm, "timeSeries")
	if len(series) == 0 || wm["bucketMinutes"] != 1.0 || wm["pointCount"] != float64(len(series)) {
		t.Fatalf("worker-metrics: %v", wm)
	}
	for i, p := range series {
		hasKeys(t, "worker-metrics point", p, workerPointKeys...)
		if i > 0 && p["timestamp"].(string) >= series[i-1]["timestamp"].(string) {
			t.Errorf("worker-metrics not newest first: %v", series)
		}
	}
	for k, want := range map[string]float64{"pushMessages": 8, "popMessages": 5, "ackMessages": 5, "ackSuccess": 4,
		"ackFailed": 1, "lagCount": 5, "pushRequests": 0, "dbErrors": 0} {
		if got := sum(series, k, ""); got != want {
			t.Errorf("worker-metrics: %s %v in all, want %v", k, got, want)
		}
	}
	var maxLag, avgLag float64
	for _, p := range series {
		maxLag, avgLag = max(maxLag, p["maxLagMs"].(float64)), max(avgLag, p["avgLagMs"].(float64))
		if !strings.HasSuffix(p["timestamp"].(string), ":00Z") {
			t.Errorf("bucket %q does not start a minute", p["timestamp"])
		}
	}
	if maxLag < avgLag {
		t.Errorf("worker-metrics: longest lag %v below the mean %v", maxLag, avgLag)
	}
	workers := rows(t, wm, "workers")
	if len(workers) != 1 || workers[0]["workerId"] != 0.0 || workers[0]["messagesProcessed"] != 8.0+5 {
		t.Errorf("workers: %v", workers)
	}
	for _, w := range workers {
		hasKeys(t, "worker", w, workerKeys...)
	}
	summary := wm["summary"].(obj)
	hasKeys(t, "summary", summary, summaryKeys...)
	// Pending: an-a's 2 of p2 and its failed one back; an-b's 1.
	if summary["totalPushMessages"] != 8.0 || summary["totalPopMessages"] != 5.0 || summary["totalAckFailed"] != 1.0 ||
		summary["pendingMessages"] != 4.0 {
		t.Errorf("summary: %v", summary)
	}
	queues := rows(t, wm, "queues")
	if len(queues) != 2 || queues[0]["queueName"] != "an-a" || queues[0]["popCount"] != 3.0 || queues[1]["popCount"] != 2.0 {
		t.Errorf("worker-metrics queues (most pops first): %v", queues)
	}
	// A filter on another host or worker leaves the series out.
	for _, q := range []string{"hostname=not-" + url.QueryEscape(hostname(t)), "workerId=3"} {
		if o := h.getObj("/api/v1/analytics/worker-metrics?" + q); len(rows(t, o, "timeSeries")) != 0 {
			t.Errorf("worker-metrics?%s: %v", q, o["timeSeries"])
		}
	}
	if o := h.getObj("/api/v1/analytics/worker-metrics?workerId=0&hostname=" + url.QueryEscape(hostname(t))); sum(rows(t, o, "timeSeries"), "pushMessages", "") != 8 {
		t.Errorf("worker-metrics for this worker: %v", o["timeSeries"])
	}

	// queue-ops: per queue, oldest bucket first.
	ops := h.getObj("/api/v1/analytics/queue-ops")
	opsRows := rows(t, ops, "series")
	for _, r := range opsRows {
		hasKeys(t, "queue-ops row", r, queueOpsKeys...)
	}
	for _, c := range []struct {
		queue, key string
		want       float64
	}{
		{"an-a", "pushMessages", 5}, {"an-b", "pushMessages", 3}, {"an-a", "popMessages", 3}, {"an-b", "popMessages", 2},
		{"an-a", "ackSuccess", 2}, {"an-a", "ackFailed", 1}, {"an-b", "ackSuccess", 2}, {"an-b", "ackFailed", 0},
	} {
		if got := sum(opsRows, c.key, c.queue); got != c.want {
			t.Errorf("queue-ops: %s of %s %v, want %v", c.key, c.queue, got, c.want)
		}
	}
	if q := fmt.Sprint(ops["queues"]); q != "[an-a an-b]" {
		t.Errorf("queue-ops queues: %s", q)
	}
	for _, r := range opsRows {
		if r["queueName"] == "an-a" && r["partitionCount"] != 2.0 {
			t.Errorf("queue-ops: an-a's partitions %v, want 2", r["partitionCount"])
		}
	}
	only := rows(t, h.getObj("/api/v1/analytics/queue-ops?queue=an-b"), "series")
	if len(only) == 0 || sum(only, "pushMessages", "") != 3 || sum(only, "pushMessages", "an-b") != 3 {
		t.Errorf("queue-ops?queue=an-b: %v", only)
	}

	// queue-lag: a top-level array, newest minute first.
	lag := h.getList("/api/v1/analytics/queue-lag")
	var lagRows []obj
	for _, x := range lag {
		hasKeys(t, "queue-lag row", x, queueLagKeys...)
		lagRows = append(lagRows, x.(obj))
	}
	if sum(lagRows, "popCount", "an-a") != 3 || sum(lagRows, "popCount", "an-b") != 2 {
		t.Errorf("queue-lag: %v", lag)
	}
	if l := h.getList("/api/v1/analytics/queue-lag?queue=an-b"); len(l) == 0 || l[0].(obj)["queueName"] != "an-b" {
		t.Errorf("queue-lag?queue=an-b: %v", l)
	} else if len(h.getList("/api/v1/analytics/queue-lag?queue=nothing")) != 0 {
		t.Errorf("queue-lag of a queue that does not exist is not empty")
	}
	code, body := h.do("GET", "/api/v1/analytics/queue-lag?queue=nothing", nil)
	if code != 200 || string(body) != "[]" {
		t.Errorf("queue-lag of nothing: %d %s", code, body)
	}

	// system-metrics: this process, sampled.
	sm := h.getObj("/api/v1/analytics/system-metrics")
	reps := rows(t, sm, "replicas")
	if len(reps) != 1 || sm["replicaCount"] != 1.0 {
		t.Fatalf("system-metrics replicas: %v", sm)
	}
	hasKeys(t, "replica", reps[0], "hostname", "port", "workerId", "timeSeries")
	if reps[0]["hostname"] != hostname(t) || reps[0]["port"] == 0.0 {
		t.Errorf("replica: %v", reps[0])
	}
	pts := rows(t, reps[0], "timeSeries")
	if len(pts) == 0 || sm["pointCount"] != float64(len(pts)) {
		t.Fatalf("system-metrics points: %v", sm)
	}
	p := pts[len(pts)-1]
	hasKeys(t, "system-metrics point", p, "timestamp", "sampleCount", "metrics")
	m := p["metrics"].(obj)
	hasKeys(t, "metrics", m, "cpu", "memory", "database", "threadpool", "registries", "shared_state")
	for _, part := range []string{"cpu", "memory", "database"} {
		for k, v := range m[part].(obj) {
			hasKeys(t, part+"."+k, v, "avg", "min", "max", "last")
		}
	}
	if p["sampleCount"].(float64) < 1 {
		t.Errorf("sampleCount: %v", p)
	}
	if rss := m["memory"].(obj)["rss_bytes"].(obj)["last"].(float64); rss <= 0 && hasProcStatm() {
		t.Errorf("rss_bytes: %v", m["memory"])
	}

	// postgres-stats and parked polls: Queen's shapes, empty.
	ps := h.getObj("/api/v1/analytics/postgres-stats")
	if l := rows(t, ps, "tableSizes"); len(l) != 0 {
		t.Errorf("postgres-stats tableSizes: %v", l)
	}
	hasKeys(t, "databaseCache", ps["databaseCache"], "database", "diskReads", "cacheHits", "cacheHitRatio")
	parked := h.getObj("/api/v1/analytics/queue-parked-replicas")
	if len(rows(t, parked, "series")) != 0 || len(rows(t, parked, "replicas")) != 0 {
		t.Errorf("parked: %v", parked)
	}

	// retention: what retention removed, and the messages a group had not
	// consumed (evictions).
	h.call("POST", "/api/v1/configure", obj{"queue": "an-r", "options": obj{"retentionEnabled": true, "retentionSeconds": 1}}, 200, nil)
	h.pushN("an-r", "Default", 2)
	if got := msgsOf(h.pop("an-r?autoAck=true")); len(got) != 1 {
		t.Fatalf("pop of an-r: %d", len(got))
	}
	var ret obj
	brokertest.CheckFor(t, 20*time.Second, func() error {
		ret = h.getObj("/api/v1/analytics/retention")
		if tot := ret["totals"].(obj); tot["totalMsgs"] != 2.0 {
			return fmt.Errorf("retention: %v", ret)
		}
		return nil
	})
	hasKeys(t, "totals", ret["totals"], retentionKeys...)
	if tot := ret["totals"].(obj); tot["retentionMsgs"] != 2.0 || tot["evictionMsgs"] != 1.0 || tot["eventCount"] != 1.0 ||
		tot["completedRetentionMsgs"] != 0.0 {
		t.Errorf("retention totals: %v", tot)
	}
	for _, r := range rows(t, ret, "series") {
		hasKeys(t, "retention point", r, append([]string{"bucket"}, retentionKeys...)...)
	}
	if r := h.getObj("/api/v1/analytics/retention?queue=an-r"); r["totals"].(obj)["totalMsgs"] != 2.0 {
		t.Errorf("retention?queue=an-r: %v", r)
	}
	if r := h.getObj("/api/v1/analytics/retention?queue=an-a"); r["totals"].(obj)["totalMsgs"] != 0.0 || len(rows(t, r, "series")) != 0 {
		t.Errorf("retention?queue=an-a: %v", r)
	}
}

// hostname is the name the routes report for this host.
func hostname(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Fatalf("hostname: %v", err)
	}
	return h
}

// hasProcStatm reports whether the process's memory can be read (Linux).
func hasProcStatm() bool {
	_, err := os.Stat("/proc/self/statm")
	return err == nil
}

// from and to pick the minutes whose start lies between them, in buckets
// whose size their span sets; the minute in progress counts as far as it
// went. The history's clock is set (a door harness), so that minutes pass
// at once.
func TestAnalyticsTimeRange(t *testing.T) {
	h := newDoorHarness(t)
	var nanos atomic.Int64 // the clock (the bridge's sampler reads it too)
	now := func() time.Time { return time.Unix(0, nanos.Load()).UTC() }
	at := func(c string) {
		t.Helper()
		ts, err := time.Parse(time.RFC3339, c)
		if err != nil {
			t.Fatal(err)
		}
		nanos.Store(ts.UnixNano())
		httpapi.SampleAnalytics(h.s)
	}
	nanos.Store(time.Date(2031, 3, 4, 10, 4, 30, 0, time.UTC).UnixNano())
	httpapi.SetAnalyticsClock(h.s, now)
	at("2031-03-04T10:04:30Z")
	h.pushN("tr", "Default", 3) // in 10:04
	at("2031-03-04T10:05:10Z")
	h.pushN("tr", "Default", 2) // in 10:05
	at("2031-03-04T10:06:20Z")
	h.pushN("tr", "Default", 1) // in 10:06, the minute in progress

	pushes := func(query string) (float64, obj) {
		t.Helper()
		o := h.getObj("/api/v1/analytics/worker-metrics?" + query)
		return sum(rows(t, o, "timeSeries"), "pushMessages", ""), o
	}
	for _, c := range []struct {
		from, to string
		want     float64
	}{
		{"", "", 6},
		{"2031-03-04T10:04:00Z", "2031-03-04T10:04:59Z", 3},
		{"2031-03-04T10:04:00.001Z", "2031-03-04T10:05:00Z", 2}, // 10:04 starts before from
		{"2031-03-04T10:05:00Z", "2031-03-04T10:06:00Z", 3},
		{"2031-03-04T10:06:00Z", "", 1},
		{"2031-03-04T08:00:00Z", "2031-03-04T10:03:59Z", 0},
		{"2031-03-04T10:06:00Z", "2031-03-04T10:04:00Z", 0}, // from after to
		{"1962-01-01", "2031-03-04T09:00:00Z", 0},
	} {
		q := url.Values{}
		if c.from != "" {
			q.Set("from", c.from)
		}
		if c.to != "" {
			q.Set("to", c.to)
		}
		if got, o := pushes(q.Encode()); got != c.want {
			t.Errorf("from %q to %q: %v pushes, want %v: %v", c.from, c.to, got, c.want, o["timeSeries"])
		}
		ops := h.getObj("/api/v1/analytics/queue-ops?" + q.Encode())
		if got := sum(rows(t, ops, "series"), "pushMessages", "tr"); got != c.want {
			t.Errorf("queue-ops from %q to %q: %v pushes, want %v", c.from, c.to, got, c.want)
		}
	}
	// The default range is the hour before now; time ranges in Queen's
	// format.
	_, o := pushes("")
	if tr := o["timeRange"].(obj); tr["from"] != "2031-03-04T09:06:20.000Z" || tr["to"] != "2031-03-04T10:06:20.000Z" {
		t.Errorf("timeRange: %v", tr)
	}
	if got := fmt.Sprint(o["timeSeries"].([]any)[0].(obj)["timestamp"]); got != "2031-03-04T10:06:00Z" {
		t.Errorf("newest point %s", got)
	}

	// Bucket sizes: ≤ 1 h 1 minute, ≤ 6 h 5, ≤ 24 h 15, ≤ 7 d 60, more 360.
	for _, c := range []struct {
		span time.Duration
		want float64
	}{
		{time.Hour, 1}, {time.Hour + 29*time.Second, 1}, {time.Hour + time.Minute, 5}, {6 * time.Hour, 5},
		{6*time.Hour + time.Minute, 15}, {24 * time.Hour, 15}, {7 * 24 * time.Hour, 60}, {8 * 24 * time.Hour, 360},
	} {
		q := url.Values{"from": {now().Add(-c.span).Format(time.RFC3339Nano)}, "to": {now().Format(time.RFC3339Nano)}}
		for _, r := range analyticsRoutes {
			if r.keys == nil || !strings.Contains(strings.Join(r.keys, ","), "bucketMinutes") {
				continue
			}
			if o := h.getObj(r.path + "?" + q.Encode()); o["bucketMinutes"] != c.want {
				t.Errorf("%s over %v: bucketMinutes %v, want %v", r.path, c.span, o["bucketMinutes"], c.want)
			}
		}
	}
	// In 5-minute buckets: 10:04 apart from 10:05 and 10:06; queue-ops
	// oldest first, worker-metrics newest first.
	q := url.Values{"from": {"2031-03-04T08:00:00Z"}, "to": {"2031-03-04T10:06:20Z"}}.Encode()
	ops := rows(t, h.getObj("/api/v1/analytics/queue-ops?"+q), "series")
	if len(ops) != 2 || ops[0]["bucket"] != "2031-03-04T10:00:00Z" || ops[0]["pushMessages"] != 3.0 ||
		ops[1]["bucket"] != "2031-03-04T10:05:00Z" || ops[1]["pushMessages"] != 3.0 {
		t.Errorf("queue-ops in 5-minute buckets: %v", ops)
	}
	if ops[0]["pushPerSecond"] != 0.01 { // 3 in 300 s, to 2 decimals
		t.Errorf("pushPerSecond %v", ops[0]["pushPerSecond"])
	}
	wm := rows(t, h.getObj("/api/v1/analytics/worker-metrics?"+q), "timeSeries")
	if len(wm) != 2 || wm[0]["timestamp"] != "2031-03-04T10:05:00Z" || wm[1]["timestamp"] != "2031-03-04T10:00:00Z" {
		t.Errorf("worker-metrics in 5-minute buckets: %v", wm)
	}
	// queue-lag keeps minutes, newest first.
	var lag []string
	for _, x := range h.getList("/api/v1/analytics/queue-lag?" + q) {
		lag = append(lag, x.(obj)["bucketTime"].(string))
	}
	if strings.Join(lag, " ") != "2031-03-04T10:06:00Z 2031-03-04T10:05:00Z 2031-03-04T10:04:00Z" {
		t.Errorf("queue-lag minutes: %v", lag)
	}
	if !sort.SliceIsSorted(lag, func(i, j int) bool { return lag[i] > lag[j] }) {
		t.Errorf("queue-lag not newest first: %v", lag)
	}

	// A malformed time or worker is the client's mistake.
	for _, path := range []string{"/api/v1/analytics/worker-metrics?from=yesterday", "/api/v1/analytics/queue-ops?to=soon",
		"/api/v1/analytics/queue-lag?from=x", "/api/v1/analytics/retention?to=x", "/api/v1/analytics/system-metrics?from=x",
		"/api/v1/analytics/queue-parked-replicas?to=x", "/api/v1/analytics/worker-metrics?workerId=one"} {
		code, body := h.do("GET", path, nil)
		var e obj
		if code != 400 || json.Unmarshal(body, &e) != nil || e["error"] == nil {
			t.Errorf("%s: %d %s, want 400 {\"error\":...}", path, code, body)
		}
	}
}

// The analytics routes are read-only: a read-only token reads them, no
// token is refused with auth on.
func TestAnalyticsReadOnly(t *testing.T) {
	for _, r := range analyticsRoutes {
		if lv, ok := netserver.RouteLevel("GET " + r.path); !ok || lv != netserver.LevelReadOnly {
			t.Errorf("%s: level %v (listed %v), want read-only", r.path, lv, ok)
		}
	}
	secret := []byte("analytics")
	h := newHarness(t, func(c *httpapi.Config, _ *engineConfig) {
		c.Auth = netserver.AuthConfig{Enabled: true, Secret: secret}
	})
	for _, r := range analyticsRoutes {
		for _, c := range []struct {
			token string
			want  int
		}{
			{"", 401}, {signJWT(t, "HS256", secret, claims("read-only")), 200}, {signJWT(t, "HS256", secret, claims("nobody")), 403},
		} {
			h.token = c.token
			if code, body := h.do("GET", r.path, nil); code != c.want {
				t.Errorf("%s with %.12q: %d %s, want %d", r.path, c.token, code, body, c.want)
			}
		}
	}
}
