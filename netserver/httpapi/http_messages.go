package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/regentmq/regent/engine"
)

// Message browsing: GET /api/v1/messages, GET and DELETE
// /api/v1/messages/{partitionId}/{transactionId}, and
// GET /api/v1/status/queues/{queue}/messages. Reads go through
// engine.ScanMessages and engine.FindMessage; a message's status is derived
// from the consumer groups' cursors and leases and the dead-letter queue:
//
//   - dead_letter: filed in the dead-letter queue by some group;
//   - completed: every group that reads the partition has passed it;
//   - processing: some group holds it under a live lease;
//   - pending: otherwise (including while no group has read the partition).
//
// A message whose payload does not open (no key the server is given opens
// it) is listed with payloadError.

// msgState is a message's status for the browse routes.
type msgState struct {
	status, queueStatus string
	consumedBy          int
	totalGroups         int
	leaseExpires        int64
}

func stateOf(p *engine.PartitionView, off uint64, dead bool) msgState {
	st := msgState{totalGroups: len(p.Groups), queueStatus: "pending"}
	processing := false
	for _, g := range p.Groups {
		gs := "pending"
		switch {
		case off < g.Cursor:
			st.consumedBy++
			gs = "completed"
		case g.Leased && off >= g.LeaseFrom && off < g.LeaseTo:
			processing = true
			st.leaseExpires = max(st.leaseExpires, g.LeaseExpires)
			gs = "processing"
		}
		if g.Group == engine.QueueModeGroup {
			st.queueStatus = gs
		}
	}
	switch {
	case dead:
		st.status = "dead_letter"
	case st.totalGroups > 0 && st.consumedBy == st.totalGroups:
		st.status = "completed"
	case processing:
		st.status = "processing"
	default:
		st.status = "pending"
	}
	if dead && st.queueStatus != "completed" {
		st.queueStatus = "dead_letter"
	}
	return st
}

// queueMode is Queen's {hasQueueMode, busGroupsCount, type}.
func queueMode(groups []engine.GroupMeta) map[string]any {
	hasQ, bus := false, 0
	for _, g := range groups {
		if g.Name == engine.QueueModeGroup {
			hasQ = true
		} else {
			bus++
		}
	}
	typ := "none"
	switch {
	case hasQ && bus > 0:
		typ = "hybrid"
	case hasQ:
		typ = "queue"
	case bus > 0:
		typ = "bus"
	}
	return map[string]any{"hasQueueMode": hasQ, "busGroupsCount": bus, "type": typ}
}

type browsed struct {
	m  engine.Message // without its payload
	v  *engine.QueueView
	st msgState
	n  int // the order found, for ties
}

// browse lists messages of the queues that match, oldest first: the page
// [offset, offset+limit) of them. It keeps only the offset+limit oldest
// found so far (without payloads), and stops reading a partition at the
// first message newer than all of those: memory grows with the page, not
// with the queues.
func (s *Server) browse(vs []engine.QueueView, partition, status string, since, until int64, limit, offset int) []browsed {
	top := newTopK(offset+limit, func(a, b browsed) bool {
		if a.m.CreatedAt != b.m.CreatedAt {
			return a.m.CreatedAt < b.m.CreatedAt
		}
		return a.n < b.n
	})
	n := 0
	for qi := range vs {
		v := &vs[qi]
		var dead []engine.MessageRef
		if v.DeadLetters > 0 {
			dead = s.e.DeadLetterRefs(v.Name)
		}
		s.e.EachPartition(v.Name, func(p *engine.PartitionView) bool {
			if partition != "" && p.Name != partition {
				return true
			}
			if top.full() && p.Oldest > top.last().m.CreatedAt {
				return true // nothing here comes before what is kept
			}
			s.e.ScanMessages(v.Name, p.Name, since, until, func(m *engine.Message) bool {
				if top.full() && m.CreatedAt > top.last().m.CreatedAt {
					return false // nor anything after it: a partition is in time order
				}
				st := stateOf(p, m.Offset, engine.HasRef(dead, engine.MessageRef{Partition: m.PartitionID, Offset: m.Offset}))
				if status != "" && st.status != status {
					return true
				}
				b := browsed{m: *m, v: v, st: st, n: n}
				n++
				if top.wants(b) {
					b.m.Payload = nil
					b.m.TransactionID, b.m.TraceID, b.m.ProducerSub = strings.Clone(m.TransactionID), strings.Clone(m.TraceID), strings.Clone(m.ProducerSub)
					top.push(b)
				}
				return true
			})
			return true
		})
	}
	return window(top.sorted(), limit, offset)
}

// GET /api/v1/messages?queue=&partition=&ns=&task=&status=&from=&to=&limit=200&offset=0
//
// Lists messages (without payloads) created in [from, to]; from defaults
// to an hour ago, as in Queen. limit is at most 10,000 and offset + limit
// at most 20,000 (narrow a deeper list with from and to).
func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	raw := r.URL.RawQuery
	since, until, err := timeRange(raw, time.Hour, s.e.Now())
	if err != nil {
		s.writeErr(w, err)
		return
	}
	limit, offset, err := paging(raw, 200)
	if err == nil {
		err = sortedWindow(limit, offset)
	}
	if err != nil {
		s.writeErr(w, err)
		return
	}
	vs := s.filterHeads(raw)
	var groups []engine.GroupMeta
	for i := range vs {
		groups = append(groups, vs[i].Groups...)
	}
	found := s.browse(vs, queryParam(raw, "partition"), queryParam(raw, "status"), since, until, limit, offset)
	msgs := make([]map[string]any, len(found))
	for i := range found {
		f := &found[i]
		msgs[i] = map[string]any{
			"id": f.m.ID.String(), "transactionId": f.m.TransactionID, "partitionId": f.m.PartitionID.String(),
			"queuePath": f.m.Queue + "/" + f.m.Partition, "queue": f.m.Queue, "partition": f.m.Partition,
			"namespace": f.v.Options.Namespace, "task": f.v.Options.Task,
			"status": f.st.status, "queueStatus": f.st.queueStatus,
			"busStatus": map[string]any{"consumedBy": f.st.consumedBy, "totalGroups": f.st.totalGroups},
			"traceId":   strOrNil(f.m.TraceID), "producerSub": strOrNil(f.m.ProducerSub), "queuePriority": f.v.Options.Priority,
			"createdAt": fmtTime(f.m.CreatedAt), "leaseExpiresAt": timePtr(f.st.leaseExpires),
		}
		unreadable(msgs[i], &f.m)
	}
	s.writeValue(w, http.StatusOK, map[string]any{"messages": msgs, "mode": queueMode(groups),
		"pagination": map[string]int{"limit": limit, "offset": offset}})
}

// GET /api/v1/status/queues/{queue}/messages?limit=50&offset=0 (offset +
// limit at most 20,000)
func (s *Server) handleStatusQueueMessages(w http.ResponseWriter, r *http.Request) {
	v, err := s.e.ViewQueueHead(r.PathValue("queue"))
	if err != nil {
		writeError(w, http.StatusNotFound, "Queue not found")
		return
	}
	limit, offset, err := paging(r.URL.RawQuery, 50)
	if err == nil {
		err = sortedWindow(limit, offset)
	}
	if err != nil {
		s.writeErr(w, err)
		return
	}
	found := s.browse([]engine.QueueView{v}, "", "", 0, 0, limit, offset)
	msgs := make([]map[string]any, len(found))
	for i := range found {
		f := &found[i]
		msgs[i] = map[string]any{
			"id": f.m.ID.String(), "transactionId": f.m.TransactionID, "partitionId": f.m.PartitionID.String(),
			"queuePath": f.m.Queue + "/" + f.m.Partition, "queue": f.m.Queue, "partition": f.m.Partition,
			"status": f.st.status, "createdAt": fmtTime(f.m.CreatedAt),
		}
		unreadable(msgs[i], &f.m)
	}
	s.writeValue(w, http.StatusOK, map[string]any{"messages": msgs, "pagination": map[string]int{"limit": limit, "offset": offset}})
}

// unreadable adds payloadError to a listed message whose payload no key
// the server is given opens (Regent's field: such a message is listed, not
// skipped, and a pop files it to the dead-letter queue).
func unreadable(out map[string]any, m *engine.Message) {
	if m.PayloadErr != nil {
		out["payloadError"] = m.PayloadErr.Error()
	}
}

// findMessage resolves the {partitionId}/{transactionId} of a path.
func (s *Server) findMessage(r *http.Request) (engine.Message, error) {
	pid, err := engine.ParseUUID(r.PathValue("partitionId"))
	if err != nil {
		return engine.Message{}, engine.ErrMessageNotFound
	}
	return s.e.FindMessage(pid, r.PathValue("transactionId"))
}

// GET /api/v1/messages/{partitionId}/{transactionId}
func (s *Server) handleMessage(w http.ResponseWriter, r *http.Request) {
	m, err := s.findMessage(r)
	if err != nil {
		if errors.Is(err, engine.ErrMessageNotFound) || errors.Is(err, engine.ErrPartitionNotFound) {
			writeError(w, http.StatusNotFound, "Message not found")
			return
		}
		s.writeErr(w, err)
		return
	}
	v, err := s.e.ViewQueueHead(m.Queue)
	if err != nil {
		writeError(w, http.StatusNotFound, "Message not found")
		return
	}
	_, pv, err := s.e.ViewPartitionByID(m.PartitionID)
	p := &pv
	if err != nil {
		p = &engine.PartitionView{}
	}
	d, dead := s.e.DeadLetterOf(m.PartitionID, m.Offset)
	st := stateOf(p, m.Offset, dead)
	var errMsg any
	retries := 0
	if dead {
		errMsg, retries = d.Error, d.RetryCount
	}
	groups := make([]map[string]any, 0, len(p.Groups))
	var consumedBy []string
	for _, g := range p.Groups {
		consumed := m.Offset < g.Cursor
		if consumed {
			consumedBy = append(consumedBy, g.Group)
		}
		var exp *string
		if g.Leased && m.Offset >= g.LeaseFrom && m.Offset < g.LeaseTo {
			exp = timePtr(g.LeaseExpires)
		}
		groups = append(groups, map[string]any{"name": g.Group, "consumed": consumed, "leaseExpiresAt": exp})
	}
	mode := queueMode(v.Groups)
	mode["consumedByGroups"] = consumedBy
	o := &v.Options
	s.writeValue(w, http.StatusOK, map[string]any{
		"id": m.ID.String(), "transactionId": m.TransactionID, "partitionId": m.PartitionID.String(),
		"queuePath": m.Queue + "/" + m.Partition, "queue": m.Queue, "partition": m.Partition,
		"namespace": o.Namespace, "task": o.Task, "status": st.status,
		"payload": rawPayload(m.Payload), "isEncrypted": s.e.QueueEncrypted(m.Queue), "traceId": strOrNil(m.TraceID), "producerSub": strOrNil(m.ProducerSub),
		"createdAt": fmtTime(m.CreatedAt), "errorMessage": errMsg, "retryCount": retries,
		"leaseExpiresAt": timePtr(st.leaseExpires),
		"queueConfig": map[string]any{"leaseTime": o.LeaseTime.Seconds(), "retryLimit": o.RetryLimit,
			"retryDelay": o.RetryDelay.Milliseconds(), "ttl": o.TTL.Seconds(), "priority": o.Priority},
		"mode": mode, "consumerGroups": groups,
	})
}

// DELETE /api/v1/messages/{partitionId}/{transactionId}
//
// Regent stores a message once and never changes it; removing a single
// message needs a journaled tombstone the engine does not have yet. A
// missing message answers as Queen does (200, success:false); an existing
// one answers 501.
func (s *Server) handleDeleteMessage(w http.ResponseWriter, r *http.Request) {
	pid, txn := r.PathValue("partitionId"), r.PathValue("transactionId")
	id, err := engine.ParseUUID(pid)
	ok := false
	if err == nil {
		if ok, err = s.e.DeleteMessage(r.Context(), id, txn); err != nil {
			s.writeErr(w, err)
			return
		}
	}
	msg := "Message deleted successfully"
	if !ok {
		msg = "Message not found"
	}
	s.writeValue(w, http.StatusOK, map[string]any{"success": ok, "partitionId": pid, "transactionId": txn, "message": msg})
}

// rawPayload is a stored payload for encoding/json: the JSON text as is,
// or a JSON string when it is not JSON.
func rawPayload(p []byte) any {
	if validJSON(p) {
		return json.RawMessage(p)
	}
	return string(p)
}

func strOrNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// paging reads limit (default def, at most 10000; 0 means def) and offset.
func paging(raw string, def int) (limit, offset int, err error) { return pageOf(raw, def) }

// timeRange reads from and to; from defaults to now-def (0 def: open).
func timeRange(raw string, def time.Duration, now int64) (since, until int64, err error) {
	if v := queryParam(raw, "from"); v != "" {
		t, err := parseTime(v)
		if err != nil {
			return 0, 0, badRequest("from: " + err.Error())
		}
		since = t.UnixNano()
	} else if def > 0 {
		since = now - int64(def)
	}
	if v := queryParam(raw, "to"); v != "" {
		t, err := parseTime(v)
		if err != nil {
			return 0, 0, badRequest("to: " + err.Error())
		}
		until = t.UnixNano()
	}
	return since, until, nil
}
