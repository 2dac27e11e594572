package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/regentmq/regent/engine"
)

// Queen's streams API (0.15): the server side of the SDKs' stateful stream
// processing (engine/streams.go). Three POST routes, each a JSON object in
// and out:
//
//	POST /streams/v1/queries     register a query (idempotent; a changed config_hash is
//	                             refused unless reset, which wipes its state)
//	POST /streams/v1/cycle       commit a cycle: state_ops, push_items and the source ack,
//	                             all or nothing
//	POST /streams/v1/state/get   read a state shard (keys, key_prefix, ripe_at_or_before)
//
// As Queen: an empty body is 400 {"error":"Empty request body"}, bad JSON
// 400 "Invalid JSON: ...", a body that is not an object 400 "request body
// must be a JSON object", a missing required field 400 "<field> is
// required". A registration with another config hash and no reset, and a
// cycle that fails (a stale lease, a message not found, a bound of the
// state), answer 200 with success false and the error, everything rolled
// back; the SDKs raise them without retrying. A broker that cannot take the
// change now (the journal behind, the disk full, shutting down) answers
// 429 or 503, which the SDKs retry. JSON null stands for absent in every
// optional field (state_ops, push_items, ack, keys, release_lease).

// streamsBody reads a streams route's body as a JSON object: its fields,
// raw. On failure it has answered.
func (s *Server) streamsBody(w http.ResponseWriter, r *http.Request) (map[string]json.RawMessage, bool) {
	body, ok := s.readBody(w, r, false)
	if !ok {
		return nil, false
	}
	defer s.putBody(body)
	b := bytes.TrimSpace(*body)
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		if !json.Valid(b) {
			writeError(w, http.StatusBadRequest, "Invalid JSON: "+err.Error())
		} else {
			writeError(w, http.StatusBadRequest, "request body must be a JSON object")
		}
		return nil, false
	}
	if fields == nil { // the body was null
		writeError(w, http.StatusBadRequest, "request body must be a JSON object")
		return nil, false
	}
	return fields, true // Unmarshal copied what it kept: the body goes back
}

// jsonString returns a field that is a JSON string.
func jsonString(f map[string]json.RawMessage, key string) (string, bool) {
	raw, ok := f[key]
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// isNull reports whether a field is absent or JSON null.
func isNull(f map[string]json.RawMessage, key string) bool {
	raw, ok := f[key]
	return !ok || string(raw) == "null"
}

// requiredString answers 400 "<key> is required" unless key is a non-empty
// string.
func requiredString(w http.ResponseWriter, f map[string]json.RawMessage, key string) (string, bool) {
	v, ok := jsonString(f, key)
	if !ok || v == "" {
		writeError(w, http.StatusBadRequest, key+" is required")
		return "", false
	}
	return v, true
}

// POST /streams/v1/queries
//
//	{"name":"q","source_queue":"src","sink_queue":"sink","config_hash":"<hex>","reset":false}
//	→ 200 {"success":true,"query_id":"<uuid>","name":"q","config_hash":"<hex>","fresh":true,"reset":false}
//	→ 200 {"success":false,"query_id":"<uuid>","name":"q","error":"config_hash mismatch: ..."}
func (s *Server) handleStreamQueries(w http.ResponseWriter, r *http.Request) {
	f, ok := s.streamsBody(w, r)
	if !ok {
		return
	}
	var reg engine.QueryRegistration
	for _, field := range []struct {
		key string
		dst *string
	}{{"name", &reg.Name}, {"source_queue", &reg.SourceQueue}, {"config_hash", &reg.ConfigHash}} {
		if *field.dst, ok = requiredString(w, f, field.key); !ok {
			return
		}
	}
	reg.SinkQueue, _ = jsonString(f, "sink_queue")
	if !isNull(f, "reset") {
		if err := json.Unmarshal(f["reset"], &reg.Reset); err != nil {
			writeError(w, http.StatusBadRequest, "reset must be a boolean")
			return
		}
	}
	res, err := s.e.RegisterQuery(r.Context(), reg)
	if errors.Is(err, engine.ErrConflict) {
		b := []byte(`{"success":false,"query_id":`)
		b = appendUUID(b, res.Query.ID)
		b = append(b, `,"name":`...)
		b = appendString(b, reg.Name)
		b = append(b, `,"error":`...)
		b = appendString(b, "config_hash mismatch: operator chain changed for queryId '"+reg.Name+
			"'. Pass reset:true to wipe existing state, or use a new queryId.")
		writeJSON(w, http.StatusOK, append(b, '}'))
		return
	}
	if err != nil {
		s.writeErr(w, err)
		return
	}
	b := []byte(`{"success":true,"query_id":`)
	b = appendUUID(b, res.Query.ID)
	b = append(b, `,"name":`...)
	b = appendString(b, res.Query.Name)
	b = append(b, `,"config_hash":`...)
	b = appendString(b, res.Query.ConfigHash)
	b = append(b, `,"fresh":`...)
	b = appendBool(b, res.Fresh)
	b = append(b, `,"reset":`...)
	b = appendBool(b, res.Reset)
	writeJSON(w, http.StatusOK, append(b, '}'))
}

// cycleFailure answers a cycle that changed nothing: 200 and success false,
// with Queen's words for its two common causes.
func cycleFailure(w http.ResponseWriter, query, part string, err error) {
	msg := errText(err)
	switch {
	case errors.Is(err, engine.ErrLeaseInvalid):
		msg = "Invalid or expired lease"
	case errors.Is(err, engine.ErrMessageNotFound):
		msg = "Message not found"
	}
	b := []byte(`{"success":false,"query_id":`)
	b = appendString(b, query)
	b = append(b, `,"partition_id":`...)
	b = appendString(b, part)
	b = append(b, `,"queueName":null,"state_ops_applied":0,"push_results":[],"ack_result":null,"error":`...)
	b = appendString(b, msg)
	writeJSON(w, http.StatusOK, append(b, '}'))
}

// passing reports whether err is the broker's, not the cycle's: the
// journal behind or failed, the disk full, a shutdown. Those answer 429 or
// 503, which the SDKs retry.
func passing(err error) bool {
	return errors.Is(err, engine.ErrOverloaded) || errors.Is(err, engine.ErrJournal) || errors.Is(err, engine.ErrClosed)
}

// POST /streams/v1/cycle
//
//	{"query_id":"<uuid>","partition_id":"<uuid>","consumer_group":"streams.q",
//	 "state_ops":[{"type":"upsert","key":"k","value":{...}},{"type":"delete","key":"k2"}],
//	 "push_items":[{"queue":"sink","partition":"p","payload":{...}}],
//	 "ack":{"transactionId":"t","leaseId":"<uuid>","status":"completed","count":3},
//	 "release_lease":true}
//	→ 200 {"success":true,"query_id","partition_id","queueName","state_ops_applied",
//	       "push_results":[{"index","transaction_id","status","message_id","partition_id","trace_id","queueName"}],
//	       "ack_result":{"success":true,"count","lease_released","dlq"} | null}
func (s *Server) handleStreamCycle(w http.ResponseWriter, r *http.Request) {
	f, ok := s.streamsBody(w, r)
	if !ok {
		return
	}
	query, part, ok := shardIDs(w, f)
	if !ok {
		return
	}
	c, err := parseCycle(f, query, part)
	if err != nil {
		cycleFailure(w, query, part, err)
		return
	}
	stampProducer(r, c.Pushes)
	res, err := s.e.Cycle(r.Context(), c)
	if err != nil {
		if passing(err) {
			s.writeErr(w, err)
			return
		}
		cycleFailure(w, query, part, err)
		return
	}
	b := []byte(`{"success":true,"query_id":`)
	b = appendUUID(b, c.QueryID)
	b = append(b, `,"partition_id":`...)
	b = appendUUID(b, c.PartitionID)
	b = append(b, `,"queueName":`...)
	b = appendStringOrNull(b, res.Queue)
	b = append(b, `,"state_ops_applied":`...)
	b = appendInt(b, int64(res.StateOpsApplied))
	b = append(b, `,"push_results":[`...)
	for i, pr := range res.Pushes {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = appendInt(b, int64(i))
		b = append(b, `,"transaction_id":`...)
		if txn := c.Pushes[i].TransactionID; txn != "" {
			b = appendString(b, txn)
		} else {
			b = appendUUID(b, pr.MessageID)
		}
		status := "queued"
		if pr.Status == engine.Duplicate {
			status = "duplicate"
		}
		b = append(b, `,"status":"`...)
		b = append(b, status...)
		b = append(b, `","message_id":`...)
		b = appendUUID(b, pr.MessageID)
		if pr.Status != engine.Duplicate {
			b = append(b, `,"partition_id":`...)
			b = appendUUID(b, pr.PartitionID)
			b = append(b, `,"trace_id":`...)
			b = appendStringOrNull(b, c.Pushes[i].TraceID)
		}
		b = append(b, `,"queueName":`...)
		b = appendString(b, c.Pushes[i].Queue)
		b = append(b, '}')
	}
	b = append(b, `],"ack_result":`...)
	if a := res.Ack; a != nil {
		b = append(b, `{"success":true,"count":`...)
		b = appendInt(b, int64(a.Count))
		b = append(b, `,"lease_released":`...)
		b = appendBool(b, a.LeaseReleased)
		b = append(b, `,"dlq":`...)
		b = appendBool(b, a.DeadLettered)
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	writeJSON(w, http.StatusOK, append(b, '}'))
}

// parseCycle reads a cycle's fields. Its errors are the cycle's (answered
// 200 with success false, as Queen answers what its procedure refuses).
// Strings and payloads alias f, which the engine copies what it keeps from.
func parseCycle(f map[string]json.RawMessage, query, part string) (engine.StreamCycle, error) {
	var c engine.StreamCycle
	var err error
	if c.QueryID, err = engine.ParseUUID(query); err != nil {
		return c, badRequest("query_id: invalid input syntax for type uuid: " + query)
	}
	if c.PartitionID, err = engine.ParseUUID(part); err != nil {
		return c, badRequest("partition_id: invalid input syntax for type uuid: " + part)
	}
	c.Group, _ = jsonString(f, "consumer_group")
	if !isNull(f, "state_ops") {
		var ops []map[string]json.RawMessage
		if json.Unmarshal(f["state_ops"], &ops) != nil {
			return c, badRequest("state_ops must be an array of objects")
		}
		for _, op := range ops {
			typ, _ := jsonString(op, "type")
			key, ok := jsonString(op, "key")
			switch typ {
			case "upsert", "delete":
			default:
				return c, badRequest("Unknown state_op type: " + typ)
			}
			if !ok {
				return c, badRequest("a state_op needs a key (a string)")
			}
			so := engine.StateOp{Key: key, Delete: typ == "delete"}
			if !so.Delete {
				so.Value = []byte("{}") // Queen stores {} for an upsert without a value
				if v, ok := op["value"]; ok {
					so.Value = compactJSON(v)
				}
				so.WindowEnd, so.HasWindowEnd = windowEnd(so.Value)
			}
			c.State = append(c.State, so)
		}
	}
	if !isNull(f, "push_items") {
		rd := jsonReader{b: f["push_items"]}
		if !rd.arrayNext() {
			return c, badRequest("push_items must be an array")
		}
		rd.i++
		first := true
		var names interner
		for rd.more(']', &first) {
			var it engine.PushItem
			if err := parsePushItem(&rd, &it, &names); err != nil {
				return c, err
			}
			c.Pushes = append(c.Pushes, it)
		}
		if rd.err != nil {
			return c, invalidJSON(rd.err)
		}
	}
	release := true
	if !isNull(f, "release_lease") {
		if json.Unmarshal(f["release_lease"], &release) != nil {
			return c, badRequest("release_lease must be a boolean")
		}
	}
	if !isNull(f, "ack") {
		var a map[string]json.RawMessage
		if json.Unmarshal(f["ack"], &a) != nil || a == nil {
			return c, badRequest("ack must be an object")
		}
		txn, ok := jsonString(a, "transactionId")
		if !ok || txn == "" {
			return c, badRequest("ack.transactionId is required")
		}
		sa := &engine.StreamAck{TransactionID: txn, ReleaseLease: release, Count: 1}
		if lease, ok := jsonString(a, "leaseId"); ok && lease != "" {
			if sa.LeaseID, err = engine.ParseUUID(lease); err != nil {
				return c, badRequest("Invalid or expired lease")
			}
		}
		status := "completed"
		if !isNull(a, "status") {
			if status, ok = jsonString(a, "status"); !ok {
				return c, badRequest("ack.status must be a string")
			}
		}
		switch status {
		case "completed", "success":
		case "failed", "dlq":
			sa.DeadLetter = true
		default:
			return c, badRequest("Unknown ack.status: " + status)
		}
		if !isNull(a, "count") {
			var n float64
			if json.Unmarshal(a["count"], &n) != nil || n < 0 || n > math.MaxInt32 {
				return c, badRequest("ack.count must be a number")
			}
			sa.Count = int(n)
		}
		sa.Error, _ = jsonString(a, "error")
		c.Ack = sa
	}
	return c, nil
}

// compactJSON returns a JSON value without insignificant spaces (as Queen's
// JSONB stores it, near enough), in a buffer of its own.
func compactJSON(v json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return bytes.Clone(v)
	}
	return b.Bytes()
}

// windowEnd reads a state value's windowEnd: a JSON number member of an
// object, which state/get's ripe_at_or_before compares (the SDKs write
// whole milliseconds).
func windowEnd(v []byte) (int64, bool) {
	if len(v) == 0 || v[0] != '{' {
		return 0, false
	}
	var o struct {
		WindowEnd json.RawMessage `json:"windowEnd"`
	}
	if json.Unmarshal(v, &o) != nil {
		return 0, false
	}
	return jsonMillis(o.WindowEnd)
}

// jsonMillis reads a JSON number (not a string holding one) as whole
// milliseconds, rounded down; false for anything else or out of range.
func jsonMillis(raw json.RawMessage) (int64, bool) {
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, false
	}
	var n float64
	if json.Unmarshal(raw, &n) != nil || n > math.MaxInt64 || n < math.MinInt64 {
		return 0, false
	}
	return int64(math.Floor(n)), true
}

// shardIDs reads the query_id and partition_id every streams cycle and
// state read names (strings; answered 400 "<field> is required" if not).
func shardIDs(w http.ResponseWriter, f map[string]json.RawMessage) (query, part string, ok bool) {
	for _, field := range []struct {
		key string
		dst *string
	}{{"query_id", &query}, {"partition_id", &part}} {
		if *field.dst, ok = jsonString(f, field.key); !ok {
			writeError(w, http.StatusBadRequest, field.key+" is required")
			return "", "", false
		}
	}
	return query, part, true
}

// POST /streams/v1/state/get
//
//	{"query_id":"<uuid>","partition_id":"<uuid>","keys":["k"],"key_prefix":"tumb:60\u001f","ripe_at_or_before":1700000000000}
//	→ 200 {"success":true,"rows":[{"key":"k","value":{...},"updated_at":"2026-..."}]}
func (s *Server) handleStreamState(w http.ResponseWriter, r *http.Request) {
	f, ok := s.streamsBody(w, r)
	if !ok {
		return
	}
	query, part, ok := shardIDs(w, f)
	if !ok {
		return
	}
	qid, err := engine.ParseUUID(query)
	if err != nil {
		writeError(w, http.StatusBadRequest, "query_id: invalid input syntax for type uuid: "+query)
		return
	}
	pid, err := engine.ParseUUID(part)
	if err != nil {
		writeError(w, http.StatusBadRequest, "partition_id: invalid input syntax for type uuid: "+part)
		return
	}
	var filter engine.StateFilter
	if raw, ok := f["keys"]; ok && len(raw) > 0 && raw[0] == '[' {
		var keys []any
		if json.Unmarshal(raw, &keys) == nil {
			for _, k := range keys {
				if s, ok := k.(string); ok {
					filter.Keys = append(filter.Keys, s)
				}
			}
		}
	}
	filter.Prefix, _ = jsonString(f, "key_prefix")
	filter.RipeAtOrBefore, filter.HasRipe = jsonMillis(f["ripe_at_or_before"])
	rows, err := s.e.State(qid, pid, filter)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	b := []byte(`{"success":true,"rows":[`)
	for i, row := range rows {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":`...)
		b = appendString(b, row.Key)
		b = append(b, `,"value":`...)
		b = append(b, row.Value...)
		b = append(b, `,"updated_at":`...)
		b = appendString(b, row.UpdatedAt.UTC().Format(time.RFC3339Nano))
		b = append(b, '}')
	}
	writeJSON(w, http.StatusOK, append(b, "]}"...))
}
