package httpapi

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver"
)

// GET /api/v1/pop/queue/{queue}
// GET /api/v1/pop/queue/{queue}/partition/{partition}
//
// Query: batch (1), wait (false), timeout (ms, 30000), consumerGroup
// (__QUEUE_MODE__), autoAck (false), subscriptionMode ("new" skips history
// for a group that has never read the queue; anything else means all),
// subscriptionFrom ("now", or a timestamp), partitions (1; the wildcard
// route only). Answers 200 with the messages and their lease, or 204 when
// there is nothing (also after a long poll's timeout, and while pops are
// paused by maintenance).
//
// Every pop goes through the data plane's PopAsync (the engine's, alone).
// A long poll (wait=true) parks there and is cancelled when the client
// goes away (the request's context ends), so a vanished client never takes
// messages; if they were handed over in the same instant, their lease is
// given back at once with a retry ack (no retry is spent).

type popAnswer struct {
	msgs []engine.Message
	cut  bool
	err  error
}

type popCall struct {
	ch   chan popAnswer
	done func([]engine.Message, bool, error)
}

var popCalls = sync.Pool{New: func() any {
	c := &popCall{ch: make(chan popAnswer, 1)}
	c.done = func(m []engine.Message, cut bool, err error) { c.ch <- popAnswer{m, cut, err} }
	return c
}}

func (s *Server) handlePop(w http.ResponseWriter, r *http.Request) {
	if s.popMaintenance.Load() {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	req, err := popRequest(r)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	// The answer is encoded and dropped: it goes into a pooled buffer, and
	// the transactionId of a message pushed without one is written from
	// its id here rather than made a string by the engine.
	req.BareTxn = true
	// Queen's clients ack by transactionId.
	req.AcksByName = true
	mb := netserver.PopBuf(req.Batch)
	if mb != nil {
		req.Buf = *mb
	}
	c := popCalls.Get().(*popCall)
	pw := s.dp.PopAsync(req, c.done)
	if pw != nil {
		// Parked: the engine holds no Buf (the answer brings its own).
		netserver.RecyclePopBuf(mb, nil)
		mb = nil
		s.met.parked.Add(1)
		defer s.met.parked.Add(-1)
	}
	var a popAnswer
	select {
	case a = <-c.ch:
	case <-r.Context().Done():
		if pw != nil && pw.Cancel() {
			popCalls.Put(c)
			return // nothing was taken
		}
		a = <-c.ch
		popCalls.Put(c)
		s.giveBack(a.msgs)
		netserver.RecyclePopBuf(mb, a.msgs)
		return
	}
	popCalls.Put(c)
	// The answer may be in Buf: it goes back to the pool once encoded.
	defer netserver.RecyclePopBuf(mb, a.msgs)
	if a.err != nil {
		s.writeErr(w, a.err)
		return
	}
	if len(a.msgs) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	out := getBuf()
	defer putBuf(out)
	*out = appendPopAnswer(*out, req.Group, a.msgs, a.cut)
	writeJSON(w, http.StatusOK, *out)
}

// popRequest reads a pop's path and query.
func popRequest(r *http.Request) (engine.PopRequest, error) {
	raw := r.URL.RawQuery
	batch, err := queryInt(raw, "batch", 1)
	if err != nil {
		return engine.PopRequest{}, err
	}
	timeout, err := queryInt(raw, "timeout", 30000)
	if err != nil {
		return engine.PopRequest{}, err
	}
	req := engine.PopRequest{
		Queue:     r.PathValue("queue"),
		Partition: r.PathValue("partition"),
		Group:     queryParam(raw, "consumerGroup"),
		Batch:     batch,
		Wait:      queryBool(raw, "wait"),
		Timeout:   time.Duration(timeout) * time.Millisecond,
		AutoAck:   queryBool(raw, "autoAck"),
	}
	if req.Group == "" {
		req.Group = engine.QueueModeGroup
	}
	if req.Queue == "" { // GET /api/v1/pop?namespace=&task=: pop by labels
		req.Namespace, req.Task = queryParam(raw, "namespace"), queryParam(raw, "task")
		if req.Namespace == "" && req.Task == "" {
			return req, badRequest("name a queue in the path, or a namespace and/or a task")
		}
	}
	if req.Partition == "" {
		if req.Partitions, err = queryInt(raw, "partitions", 1); err != nil {
			return req, err
		}
	}
	if req.Timeout <= 0 {
		req.Timeout = 30 * time.Second
	}
	switch queryParam(raw, "subscriptionMode") {
	case "new", "new-only":
		req.Subscription = engine.SubNew
	}
	if from := queryParam(raw, "subscriptionFrom"); from != "" {
		if from == "now" {
			req.Subscription = engine.SubNew
		} else {
			t, err := parseTime(from)
			if err != nil {
				return req, badRequest("subscriptionFrom: " + err.Error())
			}
			req.Subscription, req.From = engine.SubFrom, t
		}
	}
	return req, nil
}

// giveBack releases the leases of messages whose client went away before it
// could be answered: a retry ack of each partition's first message gives
// the whole lease back, spending no retry.
func (s *Server) giveBack(msgs []engine.Message) {
	var acks []engine.AckItem
	for i := range msgs {
		m := &msgs[i]
		if m.LeaseID.IsZero() || (i > 0 && msgs[i-1].PartitionID == m.PartitionID) {
			continue
		}
		acks = append(acks, engine.AckItem{
			PartitionID: m.PartitionID, HasOffset: true, Offset: m.Offset,
			LeaseID: m.LeaseID, Group: m.Group, Status: engine.Retry,
		})
	}
	if len(acks) > 0 {
		s.dp.AckAsync(context.Background(), acks, make([]engine.AckResult, len(acks)), func(error) {})
	}
}

// appendPopAnswer encodes Queen's pop answer. Messages of one partition are
// contiguous and share their partition id and lease id, which are
// formatted once per run.
func appendPopAnswer(b []byte, group string, msgs []engine.Message, cut bool) []byte {
	m0 := &msgs[0]
	parts := 1
	for i := 1; i < len(msgs); i++ {
		if msgs[i].PartitionID != msgs[i-1].PartitionID {
			parts++
		}
	}
	b = append(b, `{"success":true,"queue":`...)
	b = appendString(b, m0.Queue)
	b = append(b, `,"partition":`...)
	b = appendString(b, m0.Partition)
	b = append(b, `,"partitionId":`...)
	b = appendUUID(b, m0.PartitionID)
	b = append(b, `,"leaseId":`...)
	b = appendLease(b, m0.LeaseID)
	b = append(b, `,"consumerGroup":`...)
	b = appendString(b, group)
	b = append(b, `,"partitionsClaimed":`...)
	b = appendInt(b, int64(parts))
	if cut {
		// Regent's: the pop's byte budget (the server's MaxPopBytes) left
		// out messages that were ready; pop again for them.
		b = append(b, `,"truncated":true`...)
	}
	b = append(b, `,"messages":[`...)
	// The per-partition tail of each message, formatted once per run.
	var tail []byte
	var tailBuf [256]byte
	var times timeMemo
	for i := range msgs {
		m := &msgs[i]
		if i == 0 || m.PartitionID != msgs[i-1].PartitionID || m.LeaseID != msgs[i-1].LeaseID {
			tail = tailBuf[:0]
			tail = append(tail, `,"partitionId":`...)
			tail = appendUUID(tail, m.PartitionID)
			tail = append(tail, `,"partition":`...)
			tail = appendString(tail, m.Partition)
			tail = append(tail, `,"queue":`...)
			tail = appendString(tail, m.Queue)
			tail = append(tail, `,"leaseId":`...)
			tail = appendLease(tail, m.LeaseID)
			tail = append(tail, `,"consumerGroup":`...)
			tail = appendString(tail, group)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendUUID(b, m.ID)
		b = append(b, `,"transactionId":`...)
		if m.TransactionID == "" { // pushed without one (PopRequest.BareTxn): its id's text
			b = appendUUID(b, m.ID)
		} else {
			b = appendString(b, m.TransactionID)
		}
		b = append(b, `,"traceId":`...)
		b = appendStringOrNull(b, m.TraceID)
		b = append(b, `,"data":`...)
		b = appendPayload(b, m.Payload)
		b = append(b, `,"createdAt":`...)
		b = times.appendTime(b, m.CreatedAt)
		b = append(b, `,"retryCount":`...)
		b = appendInt(b, int64(m.RetryCount))
		b = append(b, `,"producerSub":`...)
		b = appendStringOrNull(b, m.ProducerSub)
		b = append(b, tail...)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// appendLease appends a lease id, or "" for autoAck pops (as Queen does).
func appendLease(b []byte, id engine.UUID) []byte {
	if id.IsZero() {
		return append(b, `""`...)
	}
	return appendUUID(b, id)
}

// queryParam returns the first value of key in a raw query string, decoded,
// or "". It does not allocate unless the value is escaped.
func queryParam(raw, key string) string {
	for raw != "" {
		var kv string
		if i := indexByte(raw, '&'); i >= 0 {
			kv, raw = raw[:i], raw[i+1:]
		} else {
			kv, raw = raw, ""
		}
		if len(kv) > len(key) && kv[len(key)] == '=' && kv[:len(key)] == key {
			return unescapeQuery(kv[len(key)+1:])
		}
	}
	return ""
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// queryInt reads a count parameter: def when absent; a value that is not a
// whole number of at least 0 is refused (ErrInvalid, naming the parameter).
func queryInt(raw, key string, def int) (int, error) {
	v := queryParam(raw, key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, badRequest(fmt.Sprintf("%s: want a whole number of at least 0, not %q", key, v))
	}
	return n, nil
}

// queryBool is true only for "true" or "1" (as Queen does).
func queryBool(raw, key string) bool {
	v := queryParam(raw, key)
	return v == "true" || v == "1"
}

// parseTime reads the timestamps clients send: RFC 3339 (with or without
// fractions or zone; no zone means UTC), a date, or Unix milliseconds.
// Times beyond what Unix nanoseconds hold (years 1678 to 2262) are clamped.
func parseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return clampTime(t), nil
		}
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms > -9e15 && ms < 9e15 {
		return clampTime(time.UnixMilli(ms)), nil
	}
	return time.Time{}, errBadTime(s)
}

var (
	minTime = time.Unix(0, math.MinInt64+1)
	maxTime = time.Unix(0, math.MaxInt64)
)

func clampTime(t time.Time) time.Time {
	switch {
	case t.Before(minTime):
		return minTime
	case t.After(maxTime):
		return maxTime
	}
	return t
}

type errBadTime string

func (e errBadTime) Error() string {
	return "cannot read timestamp " + strconv.Quote(string(e)) + " (want RFC 3339, e.g. 2026-01-02T15:04:05Z)"
}

// unescapeQuery decodes a query value; it allocates only for escaped text.
func unescapeQuery(v string) string {
	for i := 0; i < len(v); i++ {
		if v[i] == '%' || v[i] == '+' {
			if u, err := url.QueryUnescape(v); err == nil {
				return u
			}
			return v
		}
	}
	return v
}
