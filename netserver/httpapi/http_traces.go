package httpapi

import (
	"encoding/json"
	"net/http"
	"sort"

	"github.com/regentmq/regent/engine"
)

// Traces: POST /api/v1/traces, GET /api/v1/traces/{partitionId}/{transactionId},
// GET /api/v1/traces/by-name/{traceName}, GET /api/v1/traces/names.
//
// Regent keeps trace events in a queue of its own, __regent_traces, pushed
// through the engine like any message (so they are durable and go through
// the same journal), one partition per traced message's partition. The
// queue is left out of the resource listings. The keys of trace answers
// are snake_case, as in Queen.

const tracesQueue = internalPrefix + "traces"

// traceEvent is a stored trace.
type traceEvent struct {
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	EventType     string          `json:"eventType"`
	Data          json.RawMessage `json:"data"`
	ConsumerGroup string          `json:"consumerGroup"`
	TraceNames    []string        `json:"traceNames"`
}

// POST /api/v1/traces
func (s *Server) handleAddTrace(w http.ResponseWriter, r *http.Request) {
	var req struct {
		TransactionID string          `json:"transactionId"`
		PartitionID   string          `json:"partitionId"`
		Data          json.RawMessage `json:"data"`
		ConsumerGroup string          `json:"consumerGroup"`
		EventType     string          `json:"eventType"`
		TraceNames    json.RawMessage `json:"traceNames"`
	}
	if !s.decodeBody(w, r, &req, false) {
		return
	}
	if req.TransactionID == "" || req.PartitionID == "" || len(req.Data) == 0 {
		writeError(w, http.StatusBadRequest, "transactionId, partitionId and data are required")
		return
	}
	ev := traceEvent{TransactionID: req.TransactionID, PartitionID: req.PartitionID, Data: req.Data,
		ConsumerGroup: req.ConsumerGroup, EventType: req.EventType}
	if ev.ConsumerGroup == "" {
		ev.ConsumerGroup = engine.QueueModeGroup
	}
	if ev.EventType == "" {
		ev.EventType = "info"
	}
	if len(req.TraceNames) > 0 {
		var one string
		if json.Unmarshal(req.TraceNames, &one) == nil {
			if one != "" {
				ev.TraceNames = []string{one}
			}
		} else if json.Unmarshal(req.TraceNames, &ev.TraceNames) != nil {
			writeError(w, http.StatusBadRequest, "traceNames must be a string or an array of strings")
			return
		}
	}
	pid, err := engine.ParseUUID(req.PartitionID)
	var m engine.Message
	if err == nil {
		m, err = s.e.FindMessage(pid, req.TransactionID)
	}
	if err != nil {
		s.writeValue(w, http.StatusNotFound, map[string]any{"success": false, "error": "Message not found"})
		return
	}
	ev.Queue, ev.Partition = m.Queue, m.Partition
	payload, err := json.Marshal(ev)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	res, err := s.e.Push(r.Context(), []engine.PushItem{{Queue: tracesQueue, Partition: pid.String(), Payload: payload}})
	if err == nil && res[0].Status == engine.Failed {
		err = res[0].Err
	}
	if err != nil {
		s.writeErr(w, err)
		return
	}
	s.writeValue(w, http.StatusCreated, map[string]any{"success": true, "traceId": res[0].MessageID.String()})
}

type storedTrace struct {
	id      engine.UUID
	created int64
	ev      traceEvent
	pid     engine.UUID // its partition of the traces queue
}

// scanTraces calls fn with the traces of one message partition (or of all
// of them, partition == ""), reading the traces queue a partition at a
// time.
func (s *Server) scanTraces(partition string, fn func(*storedTrace)) {
	scan := func(name string) {
		s.e.ScanMessages(tracesQueue, name, 0, 0, func(m *engine.Message) bool {
			t := storedTrace{id: m.ID, created: m.CreatedAt, pid: m.PartitionID}
			if json.Unmarshal(m.Payload, &t.ev) == nil {
				fn(&t)
			}
			return true
		})
	}
	if partition != "" {
		scan(partition)
		return
	}
	s.e.EachPartition(tracesQueue, func(p *engine.PartitionView) bool {
		scan(p.Name)
		return true
	})
}

func (t *storedTrace) names() []string {
	if t.ev.TraceNames == nil {
		return []string{}
	}
	return t.ev.TraceNames
}

// GET /api/v1/traces/{partitionId}/{transactionId}
func (s *Server) handleTraces(w http.ResponseWriter, r *http.Request) {
	pid, txn := r.PathValue("partitionId"), r.PathValue("transactionId")
	out := []map[string]any{}
	if id, err := engine.ParseUUID(pid); err == nil {
		s.scanTraces(id.String(), func(t *storedTrace) {
			if t.ev.TransactionID != txn {
				return
			}
			out = append(out, map[string]any{
				"id": t.id.String(), "event_type": t.ev.EventType, "data": t.ev.Data,
				"consumer_group": t.ev.ConsumerGroup, "worker_id": nil, "created_at": fmtTime(t.created),
				"trace_names": t.names(),
			})
		})
	}
	s.writeValue(w, http.StatusOK, map[string]any{"traces": out})
}

// GET /api/v1/traces/by-name/{traceName}?limit=100&offset=0 (newest first;
// offset + limit at most 20,000)
func (s *Server) handleTracesByName(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("traceName")
	limit, offset, err := paging(r.URL.RawQuery, 100)
	if err == nil {
		err = sortedWindow(limit, offset)
	}
	if err != nil {
		s.writeErr(w, err)
		return
	}
	// The newest offset+limit traces, kept without their data (read again
	// for the page).
	type ref struct {
		id, pid engine.UUID
		created int64
		n       int
	}
	top := newTopK(offset+limit, func(a, b ref) bool {
		if a.created != b.created {
			return a.created > b.created
		}
		return a.n < b.n
	})
	total := 0
	s.scanTraces("", func(t *storedTrace) {
		for _, n := range t.ev.TraceNames {
			if n == name {
				top.push(ref{t.id, t.pid, t.created, total})
				total++
				return
			}
		}
	})
	refs := window(top.sorted(), limit, offset)
	found := make([]storedTrace, 0, len(refs))
	for _, x := range refs {
		m, err := s.e.FindMessage(x.pid, x.id.String())
		t := storedTrace{id: x.id, created: x.created, pid: x.pid}
		if err == nil && json.Unmarshal(m.Payload, &t.ev) == nil {
			found = append(found, t)
		}
	}
	out := make([]map[string]any, len(found))
	for i := range found {
		t := &found[i]
		var payload any
		if pid, err := engine.ParseUUID(t.ev.PartitionID); err == nil {
			if m, err := s.e.FindMessage(pid, t.ev.TransactionID); err == nil {
				payload = rawPayload(m.Payload)
			}
		}
		out[i] = map[string]any{
			"id": t.id.String(), "transaction_id": t.ev.TransactionID, "partition_id": t.ev.PartitionID,
			"event_type": t.ev.EventType, "data": t.ev.Data, "consumer_group": t.ev.ConsumerGroup,
			"worker_id": nil, "created_at": fmtTime(t.created), "queue_name": t.ev.Queue,
			"partition_name": t.ev.Partition, "message_payload": payload, "trace_names": t.names(),
		}
	}
	s.writeValue(w, http.StatusOK, map[string]any{"traces": out, "total": total,
		"pagination": map[string]int{"limit": limit, "offset": offset}})
}

// GET /api/v1/traces/names?limit=50&offset=0 (most recently seen first)
func (s *Server) handleTraceNames(w http.ResponseWriter, r *http.Request) {
	limit, offset, err := paging(r.URL.RawQuery, 50)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	type agg struct {
		name     string
		count    int
		messages map[string]bool
		last     int64
	}
	by := map[string]*agg{}
	s.scanTraces("", func(t *storedTrace) {
		for _, n := range t.ev.TraceNames {
			a := by[n]
			if a == nil {
				a = &agg{name: n, messages: map[string]bool{}}
				by[n] = a
			}
			a.count++
			a.messages[t.ev.PartitionID+"/"+t.ev.TransactionID] = true
			a.last = max(a.last, t.created)
		}
	})
	all := make([]*agg, 0, len(by))
	for _, a := range by {
		all = append(all, a)
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].last != all[j].last {
			return all[i].last > all[j].last
		}
		return all[i].name < all[j].name
	})
	total := len(all)
	all = all[min(offset, len(all)):]
	all = all[:min(limit, len(all))]
	out := make([]map[string]any, len(all))
	for i, a := range all {
		out[i] = map[string]any{"trace_name": a.name, "trace_count": a.count, "message_count": len(a.messages),
			"last_seen": fmtTime(a.last)}
	}
	s.writeValue(w, http.StatusOK, map[string]any{"trace_names": out, "total": total,
		"pagination": map[string]int{"limit": limit, "offset": offset}})
}
