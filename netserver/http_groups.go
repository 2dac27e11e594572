package netserver

import (
	"fmt"
	"net/http"
	"sort"
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

func modeName(m engine.SubMode) string {
	switch m {
	case engine.SubNew:
		return "new"
	case engine.SubFrom:
		return "from"
	}
	return "all"
}

// GET /api/v1/consumer-groups: one entry per (group, queue).
func (s *HTTPServer) handleGroups(w http.ResponseWriter, r *http.Request) {
	now := s.e.Now()
	out := []map[string]any{}
	for _, v := range s.views() {
		for _, gm := range v.Groups {
			members, withLag := 0, 0
			var total uint64
			maxLag := 0.0
			for i := range v.Partitions {
				p := &v.Partitions[i]
				for j := range p.Groups {
					g := &p.Groups[j]
					if g.Group != gm.Name {
						continue
					}
					if g.Leased {
						members++
					}
					off, secs := lagOf(p, g, now)
					if off > 0 {
						withLag++
						total += off
					}
					maxLag = max(maxLag, secs)
				}
			}
			state := "Stable"
			if maxLag > 300 {
				state = "Lagging"
			}
			var subTS *string
			if gm.Mode != engine.SubAll {
				subTS = timePtr(gm.From)
			}
			out = append(out, map[string]any{
				"name": gm.Name, "topics": []string{v.Name}, "queueName": v.Name, "members": members,
				"partitionsWithLag": withLag, "totalLag": total, "maxTimeLag": maxLag, "state": state,
				"subscriptionMode": modeName(gm.Mode), "subscriptionTimestamp": subTS,
				"subscriptionCreatedAt": fmtTime(gm.Created),
			})
		}
	}
	s.writeValue(w, http.StatusOK, out)
}

// GET /api/v1/consumer-groups/lagging?minLagSeconds=3600
func (s *HTTPServer) handleLagging(w http.ResponseWriter, r *http.Request) {
	secs, err := queryInt(r.URL.RawQuery, "minLagSeconds", 3600)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	minLag := float64(secs)
	now := s.e.Now()
	out := []map[string]any{}
	for _, v := range s.views() {
		for i := range v.Partitions {
			p := &v.Partitions[i]
			for j := range p.Groups {
				g := &p.Groups[j]
				off, secs := lagOf(p, g, now)
				if off == 0 || secs < minLag {
					continue
				}
				var worker any
				if g.Leased {
					worker = g.LeaseID.String()
				}
				out = append(out, map[string]any{
					"consumer_group": g.Group, "queue_name": v.Name, "partition_name": p.Name,
					"partition_id": p.ID.String(), "worker_id": worker, "offset_lag": off,
					"time_lag_seconds": secs, "lag_hours": secs / 3600,
					"oldest_unconsumed_at": timePtr(g.CursorTime), "last_consumed_at": nil,
				})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return out[i]["time_lag_seconds"].(float64) > out[j]["time_lag_seconds"].(float64)
	})
	s.writeValue(w, http.StatusOK, out)
}

// GET /api/v1/consumer-groups/{group}: the group's position on every
// partition of every queue it reads, by queue name.
func (s *HTTPServer) handleGroup(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("group")
	now := s.e.Now()
	out := map[string]any{}
	for _, v := range s.views() {
		known := false
		for _, gm := range v.Groups {
			known = known || gm.Name == name
		}
		if !known {
			continue
		}
		parts := []map[string]any{}
		for i := range v.Partitions {
			p := &v.Partitions[i]
			for j := range p.Groups {
				g := &p.Groups[j]
				if g.Group != name {
					continue
				}
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
		}
		out[v.Name] = map[string]any{"partitions": parts}
	}
	if len(out) == 0 {
		writeError(w, http.StatusNotFound, "Consumer group not found")
		return
	}
	s.writeValue(w, http.StatusOK, out)
}

// groupPartitions counts the partitions of a queue (or of every queue,
// queue == "") where the group has a cursor.
func (s *HTTPServer) groupPartitions(group, queue string) int {
	n := 0
	for _, v := range s.views() {
		if queue != "" && v.Name != queue {
			continue
		}
		for i := range v.Partitions {
			for _, g := range v.Partitions[i].Groups {
				if g.Group == group {
					n++
				}
			}
		}
	}
	return n
}

// DELETE /api/v1/consumer-groups/{group}[/queues/{queue}]?deleteMetadata=true
//
// Removes the group (cursors, leases, retry counts, parked pops) from one
// queue or from all. Regent keeps no other metadata: deleteMetadata is
// echoed.
func (s *HTTPServer) handleDeleteGroup(w http.ResponseWriter, r *http.Request) {
	group, queue := r.PathValue("group"), r.PathValue("queue")
	meta := queryParam(r.URL.RawQuery, "deleteMetadata") != "false"
	parts := s.groupPartitions(group, queue)
	if _, err := s.e.DeleteGroup(r.Context(), queue, group); err != nil {
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
func (s *HTTPServer) handleSubscription(w http.ResponseWriter, r *http.Request) {
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
	for _, v := range s.views() {
		for i := range v.Partitions {
			p := &v.Partitions[i]
			for _, g := range p.Groups {
				if g.Group != group || g.Leased || g.CursorTime == 0 || g.CursorTime >= ts.UnixNano() {
					continue
				}
				// Seek moves to the first message created after its time:
				// one nanosecond earlier makes it "at or after".
				n, err := s.e.Seek(r.Context(), v.Name, group, p.Name, engine.SeekTarget{Time: ts.Add(-time.Nanosecond)})
				if err != nil {
					s.writeErr(w, fmt.Errorf("seeking %s/%s: %w", v.Name, p.Name, err))
					return
				}
				rows += n
			}
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
// there are released and retry counts forgotten.
func (s *HTTPServer) handleSeek(w http.ResponseWriter, r *http.Request) {
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
	if err != nil {
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
// Moves the group's cursor on one partition past every message.
func (s *HTTPServer) handlePartitionSeek(w http.ResponseWriter, r *http.Request) {
	group, queue, part := r.PathValue("group"), r.PathValue("queue"), r.PathValue("partition")
	n, err := s.e.Seek(r.Context(), queue, group, part, engine.SeekTarget{ToEnd: true})
	if err != nil {
		s.writeErr(w, err)
		return
	}
	var moved any
	if v, err := s.e.ViewQueue(queue); err == nil {
		for i := range v.Partitions {
			if v.Partitions[i].Name == part {
				moved = v.Partitions[i].Next
			}
		}
	}
	s.writeValue(w, http.StatusOK, map[string]any{
		"success": true, "consumerGroup": group, "queueName": queue, "partitionName": part,
		"updated": n > 0, "cursorMovedTo": moved,
	})
}
