package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/regentmq/regent/engine"
)

// Dead-letter operations Queen lacks: redrive entries back to their
// partitions as new messages (each leaves a "redrive" trace on the new
// message, naming the entry and the message it came from) and purge them.
//
//	POST /api/v1/dlq/redrive  {"queue","consumerGroup","partition","from","to","ids":[entry ids]}
//	  → 200 {"redriven":n,"messages":[{"entryId","messageId","partitionId","queue","partition"}]}
//	POST /api/v1/dlq/purge    (the same body) → 200 {"purged":n}
//
// An empty body selects every entry; "queue" (or "ids") narrows it.

type dlqSelectBody struct {
	Queue         string   `json:"queue"`
	ConsumerGroup string   `json:"consumerGroup"`
	Partition     string   `json:"partition"`
	From          string   `json:"from"`
	To            string   `json:"to"`
	IDs           []string `json:"ids"`
}

func (s *Server) dlqSelection(w http.ResponseWriter, r *http.Request) (engine.DLQFilter, []engine.UUID, bool) {
	var body dlqSelectBody
	if !s.decodeBody(w, r, &body, true) {
		return engine.DLQFilter{}, nil, false
	}
	f := engine.DLQFilter{Queue: body.Queue, Group: body.ConsumerGroup, Partition: body.Partition}
	for _, t := range []struct {
		s   string
		dst *time.Time
	}{{body.From, &f.From}, {body.To, &f.To}} {
		if t.s == "" {
			continue
		}
		v, err := parseTime(t.s)
		if err != nil {
			writeError(w, http.StatusBadRequest, "from and to must be timestamps (RFC 3339)")
			return f, nil, false
		}
		*t.dst = v
	}
	var ids []engine.UUID
	for _, s := range body.IDs {
		id, err := engine.ParseUUID(s)
		if err != nil {
			writeError(w, http.StatusBadRequest, "ids must be dead-letter entry ids (UUIDs)")
			return f, nil, false
		}
		ids = append(ids, id)
	}
	return f, ids, true
}

func (s *Server) handleDLQRedrive(w http.ResponseWriter, r *http.Request) {
	f, ids, ok := s.dlqSelection(w, r)
	if !ok {
		return
	}
	red, err := s.e.RedriveDLQ(r.Context(), f, ids)
	if err != nil && len(red) == 0 {
		s.writeErr(w, err)
		return
	}
	out := make([]map[string]any, 0, len(red))
	for _, x := range red {
		out = append(out, map[string]any{"entryId": x.Entry.String(), "messageId": x.MessageID.String(),
			"partitionId": x.PartitionID.String(), "queue": x.Queue, "partition": x.Partition})
		s.traceRedrive(r, x)
	}
	res := map[string]any{"redriven": len(red), "messages": out}
	if err != nil {
		res["error"] = err.Error() // some went back before the failure
	}
	s.writeValue(w, http.StatusOK, res)
}

// traceRedrive records, on the new message, where it came from.
func (s *Server) traceRedrive(r *http.Request, x engine.Redriven) {
	data, _ := json.Marshal(map[string]string{"dlqEntryId": x.Entry.String()})
	ev := traceEvent{TransactionID: x.MessageID.String(), PartitionID: x.PartitionID.String(), Data: data,
		ConsumerGroup: engine.QueueModeGroup, EventType: "redrive", TraceNames: []string{"dlq-redrive"},
		Queue: x.Queue, Partition: x.Partition}
	payload, err := json.Marshal(ev)
	if err != nil {
		return
	}
	if _, err := s.e.Push(r.Context(), []engine.PushItem{{Queue: tracesQueue, Partition: x.PartitionID.String(), Payload: payload}}); err != nil {
		s.log.Warn("redrive trace not recorded", "message", x.MessageID, "err", err)
	}
}

func (s *Server) handleDLQPurge(w http.ResponseWriter, r *http.Request) {
	f, ids, ok := s.dlqSelection(w, r)
	if !ok {
		return
	}
	n, err := s.e.PurgeDLQ(r.Context(), f, ids)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	s.writeValue(w, http.StatusOK, map[string]any{"purged": n})
}
