package netserver

import (
	"net/http"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/regentmq/regent/engine"
)

// The dashboard's feeds, for what Queen's read models do not carry:
//
//	GET /api/v1/dashboard/system          counters, rates, journal (size, fsync latency), features
//	GET /api/v1/dashboard/queues          every queue with its options, groups and lag per group
//	GET /api/v1/dashboard/queues/{queue}  one queue: options, partitions with each group's cursor
//	                                      and lease, and the newest messages with a payload preview
//
// Figures are computed from the engine's state when asked, like the
// resource routes (http_resources.go). Durations are in the unit their key
// names; times are RFC 3339 strings or null.

// GET /api/v1/dashboard/system
func (s *HTTPServer) handleDashSystem(w http.ResponseWriter, r *http.Request) {
	st := s.e.Stats()
	rt := s.met.rates()
	vs := s.views()
	var c msgCounts
	parts, groups := 0, 0
	for i := range vs {
		c.add(queueCounts(&vs[i]))
		parts += len(vs[i].Partitions)
		groups += len(vs[i].Groups)
	}
	conns := map[string]any{"http": s.conns.Load(), "tcp": nil}
	if f := s.cfg.TCPConnections; f != nil {
		conns["tcp"] = f()
	}
	var journal any
	if f := s.cfg.JournalStats; f != nil {
		journal = journalJSON(f())
	}
	s.writeValue(w, http.StatusOK, map[string]any{
		"version":       s.cfg.Version,
		"time":          fmtTime(time.Now().UnixNano()),
		"uptimeSeconds": time.Since(s.started).Seconds(),
		"healthy":       s.e.Healthy() == nil,
		"counters": map[string]uint64{"pushed": st.Pushed, "popped": st.Popped, "acked": st.Acked,
			"deadLettered": st.DeadLettered},
		"rates":       map[string]float64{"pushPerSecond": rt.push, "popPerSecond": rt.pop, "ackPerSecond": rt.ack},
		"queues":      len(vs),
		"partitions":  parts,
		"groups":      groups,
		"messages":    c,
		"depth":       c.Pending + c.Processing,
		"cacheBytes":  max(st.CacheBytes, 0),
		"connections": conns,
		"journal":     journal,
		"features":    s.dashboardFeatures(),
	})
}

// journalJSON is the journal's figures with fsync latency in seconds: the
// totals since start, the latest, the average, and quantiles read from the
// histogram (a quantile is its bucket's upper bound; past the last bucket
// it is that bound too). The raw histogram lets the page compute quantiles
// over its own polling interval.
func journalJSON(js JournalStats) map[string]any {
	bounds := make([]float64, len(js.FsyncBuckets))
	for i, b := range js.FsyncBuckets {
		bounds[i] = b.Seconds()
	}
	avg := 0.0
	if js.Fsyncs > 0 {
		avg = float64(js.FsyncNanosTotal) / float64(js.Fsyncs) / 1e9
	}
	perBatch := 0.0
	if js.Entries > 0 {
		perBatch = float64(js.Records) / float64(js.Entries)
	}
	hist := js.FsyncHistogram
	if hist == nil {
		hist = []uint64{}
	}
	return map[string]any{
		"diskBytes":           max(js.DiskBytes, 0),
		"bytesWritten":        js.BytesWritten,
		"batches":             js.Entries,
		"records":             js.Records,
		"recordsPerBatch":     perBatch,
		"lastBatchRecords":    js.LastBatchRecords,
		"fsyncs":              js.Fsyncs,
		"fsyncSecondsTotal":   float64(js.FsyncNanosTotal) / 1e9,
		"lastFsyncSeconds":    float64(js.LastFsyncNanos) / 1e9,
		"avgFsyncSeconds":     avg,
		"fsyncP50Seconds":     histQuantile(bounds, hist, 0.5),
		"fsyncP99Seconds":     histQuantile(bounds, hist, 0.99),
		"fsyncBucketsSeconds": bounds,
		"fsyncHistogram":      hist,
	}
}

// histQuantile reads quantile q from a histogram of per-bucket counts
// (len(counts) == len(bounds)+1, the last counting values above every
// bound); 0 when it is empty.
func histQuantile(bounds []float64, counts []uint64, q float64) float64 {
	var total uint64
	for _, n := range counts {
		total += n
	}
	if total == 0 || len(bounds) == 0 {
		return 0
	}
	rank := uint64(q*float64(total) + 0.5)
	rank = max(rank, 1)
	var cum uint64
	for i, n := range counts {
		cum += n
		if cum >= rank {
			return bounds[min(i, len(bounds)-1)]
		}
	}
	return bounds[len(bounds)-1]
}

// dashOptions is a queue's options with units in their names.
func dashOptions(o *engine.QueueOptions) map[string]any {
	return map[string]any{
		"leaseTimeSeconds":          o.LeaseTime.Seconds(),
		"retryLimit":                o.RetryLimit,
		"retryDelayMs":              o.RetryDelay.Milliseconds(),
		"delayedProcessingSeconds":  o.DelayedProcessing.Seconds(),
		"windowBufferSeconds":       o.WindowBuffer.Seconds(),
		"maxSize":                   o.MaxSize,
		"ttlSeconds":                o.TTL.Seconds(),
		"retentionEnabled":          o.RetentionEnabled,
		"retentionSeconds":          o.RetentionSeconds,
		"completedRetentionSeconds": o.CompletedRetentionSeconds,
		"maxWaitTimeSeconds":        o.MaxWaitTimeSeconds,
		"priority":                  o.Priority,
		"encryptionEnabled":         o.EncryptionEnabled,
		"maxPartitions":             o.MaxPartitions,
		"dedupWindowSeconds":        o.DedupWindow.Seconds(),
		"namespace":                 o.Namespace,
		"task":                      o.Task,
	}
}

// groupLag sums one group's position over a queue's partitions.
type groupLag struct {
	Name              string  `json:"name"`
	SubscriptionMode  string  `json:"subscriptionMode"`
	Partitions        int     `json:"partitions"`
	PartitionsWithLag int     `json:"partitionsWithLag"`
	OffsetLag         uint64  `json:"offsetLag"`
	MaxTimeLagSeconds float64 `json:"maxTimeLagSeconds"`
	Leases            int     `json:"leases"`
	Retrying          int     `json:"retrying"`
}

func groupLags(v *engine.QueueView, now int64) []groupLag {
	out := make([]groupLag, len(v.Groups))
	idx := make(map[string]int, len(v.Groups))
	for i, g := range v.Groups {
		out[i] = groupLag{Name: g.Name, SubscriptionMode: modeName(g.Mode)}
		idx[g.Name] = i
	}
	for i := range v.Partitions {
		p := &v.Partitions[i]
		for j := range p.Groups {
			g := &p.Groups[j]
			k, ok := idx[g.Group]
			if !ok {
				continue
			}
			gl := &out[k]
			off, secs := lagOf(p, g, now)
			gl.Partitions++
			if off > 0 {
				gl.PartitionsWithLag++
			}
			gl.OffsetLag += off
			gl.MaxTimeLagSeconds = max(gl.MaxTimeLagSeconds, secs)
			if g.Leased {
				gl.Leases++
			}
			gl.Retrying += g.Retrying
		}
	}
	return out
}

// GET /api/v1/dashboard/queues
func (s *HTTPServer) handleDashQueues(w http.ResponseWriter, r *http.Request) {
	now := s.e.Now()
	vs := s.views()
	out := make([]map[string]any, len(vs))
	for i := range vs {
		v := &vs[i]
		c := queueCounts(v)
		out[i] = map[string]any{
			"name": v.Name, "id": v.ID.String(), "createdAt": fmtTime(v.Created),
			"namespace": v.Options.Namespace, "task": v.Options.Task,
			"partitions": len(v.Partitions), "messages": c, "depth": c.Pending + c.Processing,
			"deadLetters": v.DeadLetters, "groups": groupLags(v, now), "options": dashOptions(&v.Options),
		}
	}
	s.writeValue(w, http.StatusOK, map[string]any{"queues": out})
}

// Limits of GET /api/v1/dashboard/queues/{queue}.
const (
	dashPartitionsDefault = 200
	dashMessagesDefault   = 20
	dashMessagesMax       = 200
	dashPreviewBytes      = 240
)

// GET /api/v1/dashboard/queues/{queue}?partitions=200&messages=20
//
// partitions caps the partitions listed (those with the most lag first,
// then by name; partitionsTotal says how many there are); messages is how
// many of the newest messages to show, newest first.
func (s *HTTPServer) handleDashQueue(w http.ResponseWriter, r *http.Request) {
	v, err := s.e.ViewQueue(r.PathValue("queue"))
	if err != nil || internalQueue(v.Name) {
		writeError(w, http.StatusNotFound, "Queue not found")
		return
	}
	raw := r.URL.RawQuery
	maxParts, err := queryInt(raw, "partitions", dashPartitionsDefault)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	if maxParts == 0 {
		maxParts = dashPartitionsDefault
	}
	nMsgs, err := queryInt(raw, "messages", dashMessagesDefault)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	nMsgs = min(nMsgs, dashMessagesMax)
	now := s.e.Now()
	dead := s.deadByPartition(v.Name)

	order := make([]int, len(v.Partitions))
	lagSum := make([]uint64, len(v.Partitions))
	for i := range v.Partitions {
		order[i] = i
		p := &v.Partitions[i]
		for j := range p.Groups {
			off, _ := lagOf(p, &p.Groups[j], now)
			lagSum[i] += off
		}
	}
	sort.SliceStable(order, func(a, b int) bool {
		if lagSum[order[a]] != lagSum[order[b]] {
			return lagSum[order[a]] > lagSum[order[b]]
		}
		return v.Partitions[order[a]].Name < v.Partitions[order[b]].Name
	})
	if len(order) > maxParts {
		order = order[:maxParts]
	}
	parts := make([]map[string]any, len(order))
	for k, i := range order {
		p := &v.Partitions[i]
		cursors := make([]map[string]any, len(p.Groups))
		for j := range p.Groups {
			g := &p.Groups[j]
			off, secs := lagOf(p, g, now)
			var lease any
			if g.Leased {
				lease = map[string]any{"id": g.LeaseID.String(), "from": g.LeaseFrom, "to": g.LeaseTo,
					"acked": g.LeaseAcked, "expiresAt": timePtr(g.LeaseExpires)}
			}
			var blocked any
			if g.BlockedUntil > now {
				blocked = timePtr(g.BlockedUntil)
			}
			cursors[j] = map[string]any{"group": g.Group, "cursor": g.Cursor, "cursorAt": timePtr(g.CursorTime),
				"offsetLag": off, "timeLagSeconds": secs, "lease": lease, "retrying": g.Retrying,
				"blockedUntil": blocked}
		}
		parts[k] = map[string]any{"id": p.ID.String(), "name": p.Name, "low": p.Low, "next": p.Next,
			"durable": p.Durable, "oldestAt": timePtr(p.Oldest), "newestAt": timePtr(p.Newest),
			"stats": partitionCounts(p, dead[p.ID]), "cursors": cursors}
	}
	c := queueCounts(&v)
	s.writeValue(w, http.StatusOK, map[string]any{
		"name": v.Name, "id": v.ID.String(), "createdAt": fmtTime(v.Created),
		"namespace": v.Options.Namespace, "task": v.Options.Task, "options": dashOptions(&v.Options),
		"messages": c, "depth": c.Pending + c.Processing, "deadLetters": v.DeadLetters,
		"groups": groupLags(&v, now), "partitionsTotal": len(v.Partitions), "partitions": parts,
		"newest": s.newestJSON(&v, nMsgs),
	})
}

// newestJSON lists the queue's n newest messages, newest first, with their
// status and the start of their payload.
func (s *HTTPServer) newestJSON(v *engine.QueueView, n int) []map[string]any {
	if n == 0 {
		return []map[string]any{}
	}
	// The n newest messages lie in the n partitions whose newest message is
	// the newest.
	ps := make([]*engine.PartitionView, 0, len(v.Partitions))
	for i := range v.Partitions {
		if p := &v.Partitions[i]; p.Next > p.Low && p.Newest > 0 {
			ps = append(ps, p)
		}
	}
	sort.Slice(ps, func(a, b int) bool { return ps[a].Newest > ps[b].Newest })
	if len(ps) > n {
		ps = ps[:n]
	}
	type found struct {
		m engine.Message
		p *engine.PartitionView
	}
	var all []found
	for _, p := range ps {
		for _, m := range s.newestOf(v.Name, p, n) {
			all = append(all, found{m, p})
		}
	}
	sort.SliceStable(all, func(a, b int) bool {
		if all[a].m.CreatedAt != all[b].m.CreatedAt {
			return all[a].m.CreatedAt > all[b].m.CreatedAt
		}
		return all[a].m.Offset > all[b].m.Offset
	})
	if len(all) > n {
		all = all[:n]
	}
	var dead map[msgKey]*engine.DLQEntry
	if v.DeadLetters > 0 {
		dead = s.deadSet(v.Name)
	}
	out := make([]map[string]any, len(all))
	for i := range all {
		m, p := &all[i].m, all[i].p
		st := stateOf(p, m.Offset, dead[msgKey{m.PartitionID, m.Offset}] != nil)
		preview, cut := previewOf(m.Payload)
		out[i] = map[string]any{
			"id": m.ID.String(), "transactionId": m.TransactionID, "partitionId": m.PartitionID.String(),
			"partition": m.Partition, "offset": m.Offset, "createdAt": fmtTime(m.CreatedAt),
			"traceId": strOrNil(m.TraceID), "status": st.status,
			"consumedBy": st.consumedBy, "totalGroups": st.totalGroups,
			"size": len(m.Payload), "preview": preview, "truncated": cut,
		}
	}
	return out
}

// newestOf returns up to n of a partition's newest messages, oldest first.
// Messages are found by creation time, so it scans a window back from the
// newest message that grows until it holds n of them or the whole
// partition.
func (s *HTTPServer) newestOf(queue string, p *engine.PartitionView, n int) []engine.Message {
	ring := make([]engine.Message, 0, n)
	for span := int64(time.Millisecond); ; span *= 16 {
		since := p.Newest - span
		ring, head := ring[:0], 0
		err := s.e.ScanMessages(queue, p.Name, since, 0, func(m *engine.Message) bool {
			if len(ring) < n {
				ring = append(ring, *m)
			} else {
				ring[head] = *m
				head = (head + 1) % n
			}
			return true
		})
		if err != nil {
			return nil
		}
		if len(ring) >= n || since <= p.Oldest || span > int64(100*365*24*time.Hour) {
			return append(ring[head:len(ring):len(ring)], ring[:head]...)
		}
	}
}

// previewOf returns the start of a payload as text, cut at a character
// boundary, and whether it was cut.
func previewOf(p []byte) (string, bool) {
	if len(p) <= dashPreviewBytes {
		return string(p), false
	}
	end := dashPreviewBytes
	for end > 0 && !utf8.RuneStart(p[end]) {
		end--
	}
	return string(p[:end]), true
}
