package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/regentmq/regent/engine"
)

// Consumer groups: list, lagging, detail, delete, subscription, seek.
// The queue-mode group of pops that name none appears as __QUEUE_MODE__.

// lagOf returns a position's offset lag and time lag in seconds.
func lagOf(p *engine.PartitionView, g *engine.GroupState, now int64) (uint64, float64) {
	off := p.Next - min(g.Cursor, p.Next)
	if g.CursorTime == 0 || off == 0 {
		return off, 0
	}
	return off, float64(max(now-g.CursorTime, 0)) / 1e9
}

// laggingSeconds: a group is "Lagging" on a queue when, on some partition,
// the oldest message it has not finished was created more than this many
// seconds ago (its time lag; lagOf), and "Stable" otherwise.
const laggingSeconds = 300

func modeName(m engine.SubMode) string {
	switch m {
	case engine.SubNew:
		return "new"
	case engine.SubFrom:
		return "from"
	}
	return "all"
}

// GET /api/v1/consumer-groups?limit=1000&offset=0: one entry per (group,
// queue), by queue then group; a page of them, the total in X-Total-Count
// (Queen's answer is a bare array).
func (s *Server) handleGroups(w http.ResponseWriter, r *http.Request) {
	limit, offset, err := pageOf(r.URL.RawQuery, pageDefault)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	now := s.e.Now()
	out := []map[string]any{}
	total := 0
	for _, v := range s.heads() {
		first := total // the position of this queue's first entry
		total += len(v.Groups)
		if total <= offset || first >= offset+limit {
			continue // no entry of this queue on the page
		}
		a := s.aggregate(&v, now, nil)
		for k, gm := range v.Groups {
			if i := first + k; i < offset || i >= offset+limit {
				continue
			}
			gl := &a.groups[k]
			state := "Stable"
			if gl.MaxTimeLagSeconds > laggingSeconds {
				state = "Lagging"
			}
			var subTS *string
			if gm.Mode != engine.SubAll {
				subTS = timePtr(gm.From)
			}
			out = append(out, map[string]any{
				"name": gm.Name, "topics": []string{v.Name}, "queueName": v.Name, "members": gl.Leases,
				"partitionsWithLag": gl.PartitionsWithLag, "totalLag": gl.OffsetLag, "maxTimeLag": gl.MaxTimeLagSeconds, "state": state,
				"subscriptionMode": modeName(gm.Mode), "subscriptionTimestamp": subTS,
				"subscriptionCreatedAt": fmtTime(gm.Created),
			})
		}
	}
	setTotal(w, total)
	s.writeValue(w, http.StatusOK, out)
}

// lagRow is a position of GET /api/v1/consumer-groups/lagging.
type lagRow struct {
	group, queue, part string
	pid                engine.UUID
	leaseID            engine.UUID
	leased             bool
	off                uint64
	secs               float64
	cursorTime         int64
	n                  int // the order found, for ties
}

// GET /api/v1/consumer-groups/lagging?minLagSeconds=3600&limit=1000&offset=0
//
// The positions behind by at least minLagSeconds, the most behind first: a
// page of them (offset + limit at most 20,000), the total in X-Total-Count.
func (s *Server) handleLagging(w http.ResponseWriter, r *http.Request) {
	raw := r.URL.RawQuery
	secs, err := queryInt(raw, "minLagSeconds", 3600)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	limit, offset, err := pageOf(raw, pageDefault)
	if err == nil {
		err = sortedWindow(limit, offset)
	}
	if err != nil {
		s.writeErr(w, err)
		return
	}
	minLag := float64(secs)
	now := s.e.Now()
	top := newTopK(offset+limit, func(a, b lagRow) bool {
		if a.secs != b.secs {
			return a.secs > b.secs
		}
		return a.n < b.n
	})
	total := 0
	for _, v := range s.heads() {
		s.e.EachPartition(v.Name, func(p *engine.PartitionView) bool {
			for j := range p.Groups {
				g := &p.Groups[j]
				off, secs := lagOf(p, g, now)
				if off == 0 || secs < minLag {
					continue
				}
				// Names are the engine's own strings (kept as they are).
				top.push(lagRow{group: g.Group, queue: v.Name, part: p.Name, pid: p.ID, leaseID: g.LeaseID, leased: g.Leased,
					off: off, secs: secs, cursorTime: g.CursorTime, n: total})
				total++
			}
			return true
		})
	}
	rows := window(top.sorted(), limit, offset)
	out := make([]map[string]any, len(rows))
	for i := range rows {
		x := &rows[i]
		var worker any
		if x.leased {
			worker = x.leaseID.String()
		}
		out[i] = map[string]any{
			"consumer_group": x.group, "queue_name": x.queue, "partition_name": x.part,
			"partition_id": x.pid.String(), "worker_id": worker, "offset_lag": x.off,
			"time_lag_seconds": x.secs, "lag_hours": x.secs / 3600,
			"oldest_unconsumed_at": timePtr(x.cursorTime), "last_consumed_at": nil,
		}
	}
	setTotal(w, total)
	s.writeValue(w, http.StatusOK, out)
}

// GET /api/v1/consumer-groups/{group}?limit=1000&offset=0: the group's
// position on the partitions of every queue it reads, by queue name. The
// positions are a page (by queue, then partition creation order; every
// queue the group reads is a key, with the positions of the page), their
// total in X-Total-Count. A group that has no position anywhere is {}.
func (s *Server) handleGroup(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("group")
	limit, offset, err := pageOf(r.URL.RawQuery, pageDefault)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	now := s.e.Now()
	out := map[string]any{}
	total := 0
	for _, v := range s.heads() {
		known := false
		for _, gm := range v.Groups {
			known = known || gm.Name == name
		}
		if !known {
			continue
		}
		parts := []map[string]any{}
		s.e.EachPartition(v.Name, func(p *engine.PartitionView) bool {
			for j := range p.Groups {
				g := &p.Groups[j]
				if g.Group != name {
					continue
				}
				if total >= offset && total < offset+limit {
					off, secs := lagOf(p, g, now)
					var worker any
					if g.Leased {
						worker = g.LeaseID.String()
					}
					parts = append(parts, map[string]any{
						"partition": p.Name, "workerId": worker, "lastConsumedAt": nil, "totalConsumed": g.Cursor,
						"offsetLag": off, "timeLagSeconds": secs, "leaseActive": g.Leased,
					})
				}
				total++
			}
			return true
		})
		out[v.Name] = map[string]any{"partitions": parts}
	}
	// A group that reads nothing is {} with 200, as Queen answers it.
	setTotal(w, total)
	s.writeValue(w, http.StatusOK, out)
}

// groupPartitions counts the partitions of a queue (or of every queue,
// queue == "") where the group has a cursor.
func (s *Server) groupPartitions(group, queue string) int {
	n := 0
	for _, v := range s.heads() {
		if queue != "" && v.Name != queue {
			continue
		}
		s.e.EachPartition(v.Name, func(p *engine.PartitionView) bool {
			for _, g := range p.Groups {
				if g.Group == group {
					n++
				}
			}
			return true
		})
	}
	return n
}

// DELETE /api/v1/consumer-groups/{group}[/queues/{queue}]?deleteMetadata=true
//
// Removes the group (cursors, leases, retry counts, parked pops) from one
// queue or from all. Regent keeps no other metadata: deleteMetadata is
// echoed. Like Queen (delete_consumer_group_for_queue_v1 deletes no row),
// a queue that does not exist is no error: 200 with deletedPartitions 0.
func (s *Server) handleDeleteGroup(w http.ResponseWriter, r *http.Request) {
	group, queue := r.PathValue("group"), r.PathValue("queue")
	meta := queryParam(r.URL.RawQuery, "deleteMetadata") != "false"
	parts := s.groupPartitions(group, queue)
	switch _, err := s.e.DeleteGroup(r.Context(), queue, group); {
	case errors.Is(err, engine.ErrQueueNotFound):
		parts = 0 // as in Queen: nothing to delete is no error
	case err != nil:
		s.writeErr(w, err)
		return
	}
	res := map[string]any{"success": true, "consumerGroup": group, "deletedPartitions": parts, "metadataDeleted": meta}
	if queue != "" {
		res["queueName"] = queue
	}
	s.writeValue(w, http.StatusOK, res)
}

// POST /api/v1/consumer-groups/{group}/subscription {"subscriptionTimestamp":"<ts>"}
//
// Moves the group's start forward to the timestamp: on every partition of
// every queue it reads where it holds no lease and its cursor is before the
// first message created at or after the timestamp, the cursor is sought
// there (engine.Seek, journaled). Regent decides a group's cursors on every
// existing partition when the group appears, so "partitions without a
// cursor yet" (Queen's scope) are these idle ones; cursors never move
// backwards here (that is what seek is for). Partitions created later still
// start by the subscription the group was created with (changing that needs
// an engine change).
func (s *Server) handleSubscription(w http.ResponseWriter, r *http.Request) {
	group := r.PathValue("group")
	var req struct {
		SubscriptionTimestamp *string `json:"subscriptionTimestamp"`
	}
	if !s.decodeBody(w, r, &req, false) {
		return
	}
	if req.SubscriptionTimestamp == nil || *req.SubscriptionTimestamp == "" {
		writeError(w, http.StatusBadRequest, "subscriptionTimestamp is required")
		return
	}
	ts, err := parseTime(*req.SubscriptionTimestamp)
	if err != nil {
		writeError(w, http.StatusBadRequest, "subscriptionTimestamp: "+err.Error())
		return
	}
	rows := 0
	var err2 error
	for _, v := range s.heads() {
		s.e.EachPartition(v.Name, func(p *engine.PartitionView) bool {
			for _, g := range p.Groups {
				if g.Group != group || g.Leased || g.CursorTime == 0 || g.CursorTime >= ts.UnixNano() {
					continue
				}
				// Seek moves to the first message created after its time:
				// one nanosecond earlier makes it "at or after".
				n, err := s.e.Seek(r.Context(), v.Name, group, p.Name, engine.SeekTarget{Time: ts.Add(-time.Nanosecond)})
				if err != nil {
					err2 = fmt.Errorf("seeking %s/%s: %w", v.Name, p.Name, err)
					return false
				}
				rows += n
			}
			return true
		})
		if err2 != nil {
			s.writeErr(w, err2)
			return
		}
	}
	s.writeValue(w, http.StatusOK, map[string]any{
		"success": true, "consumerGroup": group, "newTimestamp": fmtTime(ts.UnixNano()), "rowsUpdated": rows,
	})
}

// POST /api/v1/consumer-groups/{group}/queues/{queue}/seek {"toEnd":true} | {"timestamp":"<ts>"}
//
// Moves the group's cursor on every partition of the queue: past every
// message, or past every message created at or before the timestamp. Leases
// there are released and retry counts forgotten. A seek creates nothing: a
// queue that does not exist, or a group that has never read it, has no
// cursor to move, and the answer says so as Queen's does
// (seek_consumer_group_v1 moves the rows there are): success with
// partitionsUpdated 0. (The binary protocol answers queue_not_found or
// group_not_found.)
func (s *Server) handleSeek(w http.ResponseWriter, r *http.Request) {
	group, queue := r.PathValue("group"), r.PathValue("queue")
	var req struct {
		ToEnd     bool    `json:"toEnd"`
		Timestamp *string `json:"timestamp"`
	}
	if !s.decodeBody(w, r, &req, true) {
		return
	}
	var to engine.SeekTarget
	var target any
	switch {
	case req.ToEnd:
		to.ToEnd = true
	case req.Timestamp != nil && *req.Timestamp != "":
		ts, err := parseTime(*req.Timestamp)
		if err != nil {
			writeError(w, http.StatusBadRequest, "timestamp: "+err.Error())
			return
		}
		to.Time = ts
		target = fmtTime(ts.UnixNano())
	default:
		writeError(w, http.StatusBadRequest, "either toEnd: true or timestamp is required")
		return
	}
	n, err := s.e.Seek(r.Context(), queue, group, "", to)
	if err != nil && !errors.Is(err, engine.ErrGroupNotFound) && !errors.Is(err, engine.ErrQueueNotFound) {
		s.writeErr(w, err)
		return
	}
	s.writeValue(w, http.StatusOK, map[string]any{
		"success": true, "consumerGroup": group, "queueName": queue, "seekToEnd": to.ToEnd,
		"targetTimestamp": target, "partitionsUpdated": n,
	})
}

// POST /api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek
//
// Moves the group's cursor on one partition past every message. A group
// that has never read the queue has no cursor there: success with updated
// false, as in Queen (seek_partition_v1); a partition or queue that does
// not exist is 404.
func (s *Server) handlePartitionSeek(w http.ResponseWriter, r *http.Request) {
	group, queue, part := r.PathValue("group"), r.PathValue("queue"), r.PathValue("partition")
	n, err := s.e.Seek(r.Context(), queue, group, part, engine.SeekTarget{ToEnd: true})
	if errors.Is(err, engine.ErrGroupNotFound) {
		if _, perr := s.e.ViewPartition(queue, part); perr != nil {
			err = perr // no such partition either: that is what is not found
		}
	}
	if err != nil && !errors.Is(err, engine.ErrGroupNotFound) {
		s.writeErr(w, err)
		return
	}
	var moved any
	if p, err := s.e.ViewPartition(queue, part); err == nil {
		moved = p.Next
	}
	s.writeValue(w, http.StatusOK, map[string]any{
		"success": true, "consumerGroup": group, "queueName": queue, "partitionName": part,
		"updated": n > 0, "cursorMovedTo": moved,
	})
}
