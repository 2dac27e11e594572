package httpapi

import (
	"bytes"
	"net/http"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver"
)

// The dashboard's feeds, for what Queen's read models do not carry:
//
//	GET /api/v1/dashboard/system          counters, rates, journal (size, fsync latency), features
//	GET /api/v1/dashboard/queues          the queues (a page, by name) with their options, groups
//	                                      and lag per group
//	GET /api/v1/dashboard/queues/{queue}  one queue: options, the partitions with the most lag
//	                                      (a page) with each group's cursor and lease, and the
//	                                      newest messages with a payload preview
//	GET /api/v1/dashboard/messages        find a message by queue, partition and offset, or by
//	                                      transaction id (http_dashboard_find.go)
//
// Figures are computed from the engine's state when asked, like the
// resource routes (http_resources.go), one partition at a time. Durations
// are in the unit their key names; times are RFC 3339 strings or null.

// GET /api/v1/dashboard/system
func (s *Server) handleDashSystem(w http.ResponseWriter, r *http.Request) {
	st := s.e.Stats()
	rt := s.met.rates()
	vs := s.heads()
	var c msgCounts
	parts, groups := 0, 0
	for i := range vs {
		c.add(s.aggregate(&vs[i], 0, nil).counts)
		parts += vs[i].PartitionCount
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
		// The consumer groups' state "Lagging": a time lag over this.
		"laggingAfterSeconds": laggingSeconds,
	})
}

// journalJSON is the journal's figures with fsync latency in seconds: the
// totals since start, the latest, the average, and quantiles read from the
// histogram (a quantile is its bucket's upper bound; past the last bucket
// it is that bound too). The raw histogram lets the page compute quantiles
// over its own polling interval.
func journalJSON(js netserver.JournalStats) map[string]any {
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

// GET /api/v1/dashboard/queues?limit=1000&offset=0
func (s *Server) handleDashQueues(w http.ResponseWriter, r *http.Request) {
	limit, offset, err := pageOf(r.URL.RawQuery, pageDefault)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	now := s.e.Now()
	vs := s.heads()
	page := window(vs, limit, offset)
	out := make([]map[string]any, len(page))
	for i := range page {
		v := &page[i]
		a := s.aggregate(v, now, nil)
		out[i] = map[string]any{
			"name": v.Name, "id": v.ID.String(), "createdAt": fmtTime(v.Created),
			"namespace": v.Options.Namespace, "task": v.Options.Task,
			"partitions": v.PartitionCount, "messages": a.counts, "depth": a.counts.Pending + a.counts.Processing,
			"deadLetters": v.DeadLetters, "groups": a.groups, "options": dashOptions(&v.Options),
		}
	}
	s.writeValue(w, http.StatusOK, map[string]any{"queues": out, "pagination": offsetPagination(limit, offset, len(out), len(vs))})
}

// Limits of GET /api/v1/dashboard/queues/{queue}.
const (
	dashPartitionsDefault = 200
	dashMessagesDefault   = 20
	dashMessagesMax       = 200
	dashPreviewBytes      = 240
)

// lagged is a partition with the sum of its groups' offset lag.
type lagged struct {
	p   engine.PartitionView
	lag uint64
}

// laggedFirst orders partitions by lag, most first, then by name.
func laggedFirst(a, b lagged) bool {
	if a.lag != b.lag {
		return a.lag > b.lag
	}
	return a.p.Name < b.p.Name
}

// newestFirst orders partitions by their newest message, newest first.
func newestFirst(a, b lagged) bool {
	if a.p.Newest != b.p.Newest {
		return a.p.Newest > b.p.Newest
	}
	return a.p.Name < b.p.Name
}

// keep returns a fill for topK.offer that copies a reused view (its
// Groups too, into the buffer the destination already has).
func keep(p *engine.PartitionView, lag uint64) func(*lagged) {
	return func(dst *lagged) {
		groups := append(dst.p.Groups[:0], p.Groups...)
		dst.p, dst.p.Groups, dst.lag = *p, groups, lag
	}
}

// GET /api/v1/dashboard/queues/{queue}?partitions=200&partitionsOffset=0&messages=20
//
// partitions is a page of the partitions with the most lag (then by name):
// partitions (default 200, at most 10,000) of them from partitionsOffset
// (offset + size at most 20,000), with "pagination" and partitionsTotal
// saying how many there are; messages is how many of the newest messages to
// show, newest first (at most 200).
func (s *Server) handleDashQueue(w http.ResponseWriter, r *http.Request) {
	v, err := s.e.ViewQueueHead(r.PathValue("queue"))
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
	maxParts = engine.PageLimit(maxParts, dashPartitionsDefault, pageMax)
	partsOffset, err := queryInt(raw, "partitionsOffset", 0)
	if err == nil {
		err = sortedWindow(maxParts, partsOffset)
	}
	if err != nil {
		s.writeErr(w, err)
		return
	}
	nMsgs, err := queryInt(raw, "messages", dashMessagesDefault)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	nMsgs = min(nMsgs, dashMessagesMax)
	now := s.e.Now()

	top := newTopK(partsOffset+maxParts, laggedFirst)
	newest := newTopK(nMsgs, newestFirst)
	a := s.aggregate(&v, now, func(p *engine.PartitionView) {
		var sum uint64
		for j := range p.Groups {
			off, _ := lagOf(p, &p.Groups[j], now)
			sum += off
		}
		top.offer(lagged{*p, sum}, keep(p, sum))
		if p.Next > p.Low && p.Newest > 0 {
			newest.offer(lagged{*p, 0}, keep(p, 0))
		}
	})
	shown := window(top.sorted(), maxParts, partsOffset)
	views := make([]engine.PartitionView, len(shown))
	for i := range shown {
		views[i] = shown[i].p
	}
	dead := s.deadCounts(v.Name, views)
	parts := make([]map[string]any, len(views))
	for k := range views {
		p := &views[k]
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
			"stats": partitionCounts(p, dead[k]), "cursors": cursors}
	}
	c := a.counts
	s.writeValue(w, http.StatusOK, map[string]any{
		"name": v.Name, "id": v.ID.String(), "createdAt": fmtTime(v.Created),
		"namespace": v.Options.Namespace, "task": v.Options.Task, "options": dashOptions(&v.Options),
		"messages": c, "depth": c.Pending + c.Processing, "deadLetters": v.DeadLetters,
		"groups": a.groups, "partitionsTotal": v.PartitionCount, "partitions": parts,
		"pagination": offsetPagination(maxParts, partsOffset, len(parts), v.PartitionCount),
		"newest":     s.newestJSON(&v, newest.sorted(), nMsgs),
	})
}

// newestJSON lists the queue's n newest messages, newest first, with their
// status and the start of their payload; ps are the n partitions whose
// newest message is the newest (the n newest messages lie in them).
func (s *Server) newestJSON(v *engine.QueueView, ps []lagged, n int) []map[string]any {
	if n == 0 {
		return []map[string]any{}
	}
	type found struct {
		previewed
		p *engine.PartitionView
	}
	var all []found
	for i := range ps {
		p := &ps[i].p
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
	var dead []engine.MessageRef
	if v.DeadLetters > 0 {
		dead = s.e.DeadLetterRefs(v.Name)
	}
	out := make([]map[string]any, len(all))
	for i := range all {
		m, p := &all[i].m, all[i].p
		st := stateOf(p, m.Offset, engine.HasRef(dead, engine.MessageRef{Partition: m.PartitionID, Offset: m.Offset}))
		preview, cut := previewOf(m.Payload)
		out[i] = map[string]any{
			"id": m.ID.String(), "transactionId": m.TransactionID, "partitionId": m.PartitionID.String(),
			"partition": m.Partition, "offset": m.Offset, "createdAt": fmtTime(m.CreatedAt),
			"traceId": strOrNil(m.TraceID), "status": st.status,
			"consumedBy": st.consumedBy, "totalGroups": st.totalGroups,
			"size": all[i].size, "preview": preview, "truncated": cut,
		}
	}
	return out
}

// previewed is a listed message: its payload cut to what a preview shows
// (and a byte more, to tell that it was cut), its size.
type previewed struct {
	m    engine.Message
	size int
}

func preview(m *engine.Message) previewed {
	c := *m
	c.Payload = bytes.Clone(m.Payload[:min(len(m.Payload), dashPreviewBytes+1)])
	c.TransactionID, c.TraceID = strings.Clone(m.TransactionID), strings.Clone(m.TraceID)
	return previewed{c, len(m.Payload)}
}

// newestOf returns up to n of a partition's newest messages, oldest first.
// Messages are found by creation time, so it scans a window back from the
// newest message that grows until it holds n of them or the whole
// partition.
func (s *Server) newestOf(queue string, p *engine.PartitionView, n int) []previewed {
	ring := make([]previewed, 0, n)
	for span := int64(time.Millisecond); ; span *= 16 {
		since := p.Newest - span
		ring, head := ring[:0], 0
		err := s.e.ScanMessages(queue, p.Name, since, 0, func(m *engine.Message) bool {
			if len(ring) < n {
				ring = append(ring, preview(m))
			} else {
				ring[head] = preview(m)
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
