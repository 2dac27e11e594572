package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/protocol"
)

// POST /api/v1/ack
//
//	{"transactionId":"tx","partitionId":"<uuid>","status":"completed","leaseId":"<uuid>","consumerGroup":"g","error":"why"}
//
// POST /api/v1/ack/batch
//
//	{"consumerGroup":"g","acknowledgments":[{...as above...}, ...]}
//
// Both answer 200 with an array, one result per ack, in order:
// {"index","transactionId","success","error","queueName","partitionName",
// "leaseReleased","dlq"}. A refused ack (lease expired or released, lease
// missing on a server that checks leases, message not in flight, unknown
// status) is success:false with the reason, never an HTTP error: it usually
// means the message is coming back. Acks are applied in order through the
// data plane's AckAsync (the engine's, alone) and answered once durable;
// the cursor rule, retry counts and the dead-letter queue are the
// engine's. A message is named by its partitionId and transactionId (a
// message pushed without a transactionId has its id as transactionId).
// In a cluster, an ack another broker applied answers queueName and
// partitionName null: the binary protocol's ack result does not carry
// them.

// ackCall holds one ack request's pooled state.
type ackCall struct {
	acks  []ackFields      // a batch's acknowledgments as read (aliasing the body)
	txns  []string         // per request item: its transactionId (for the answer)
	bad   []string         // per request item: why it was refused before the engine, or ""
	items []engine.AckItem // the items sent to the engine
	idx   []int            // request index of each engine item
	res   []engine.AckResult
	pid   uuidMemo // the last partitionId read, and its UUID
	lease uuidMemo // the last leaseId read, and its UUID
	ch    chan error
	done  func(error)
}

var ackCalls = sync.Pool{New: func() any {
	c := &ackCall{ch: make(chan error, 1)}
	c.done = func(err error) { c.ch <- err }
	return c
}}

func (c *ackCall) release() {
	if cap(c.items) > maxPooledItems || cap(c.txns) > maxPooledItems || cap(c.acks) > maxPooledItems {
		c.items, c.res, c.txns, c.bad, c.idx, c.acks = nil, nil, nil, nil, nil, nil
	}
	clear(c.acks[:cap(c.acks)])
	c.acks = c.acks[:0]
	c.pid, c.lease = uuidMemo{}, uuidMemo{}
	clear(c.items[:cap(c.items)])
	clear(c.res[:cap(c.res)])
	clear(c.txns[:cap(c.txns)])
	clear(c.bad[:cap(c.bad)])
	c.items, c.res, c.txns, c.bad, c.idx = c.items[:0], c.res[:0], c.txns[:0], c.bad[:0], c.idx[:0]
	ackCalls.Put(c)
}

// ackFields is one acknowledgment as sent.
type ackFields struct {
	txn, pid, lease, group, status, errText []byte
	statusBool                              int8 // 1 true, -1 false, 0 a string (or none)
	hasTxn, hasPid                          bool
}

// readAck reads one acknowledgment object.
func readAck(r *jsonReader, a *ackFields) {
	if !r.open('{', "each acknowledgment must be an object") {
		return
	}
	first := true
	for r.more('}', &first) {
		readAckField(r, unsafeString(r.key()), a)
	}
}

// add turns one acknowledgment into an engine item, or notes why it is
// refused before reaching the engine.
func (c *ackCall) add(a *ackFields, group []byte) {
	i := len(c.txns)
	c.txns = append(c.txns, unsafeString(a.txn))
	c.bad = append(c.bad, "")
	it := engine.AckItem{TransactionID: unsafeString(a.txn)}
	var err error
	if it.PartitionID, err = c.pid.parse(a.pid); err != nil {
		c.bad[i] = "Message not found: partitionId is not a UUID"
		return
	}
	if len(a.lease) > 0 {
		if it.LeaseID, err = c.lease.parse(a.lease); err != nil {
			c.bad[i] = "Invalid or expired lease: leaseId is not a UUID"
			return
		}
	}
	switch {
	case a.statusBool > 0:
		it.Status = engine.Completed
	case a.statusBool < 0:
		it.Status = engine.FailedAck
	default:
		if it.Status, err = engine.ParseAckStatus(unsafeString(a.status)); err != nil {
			c.bad[i] = err.Error()
			return
		}
	}
	if len(group) == 0 {
		group = a.group
	}
	it.Group = unsafeString(group)
	if it.Group == "" {
		it.Group = engine.QueueModeGroup
	}
	if len(a.errText) > 0 {
		it.Error = string(a.errText) // kept by dead-letter entries: copied
	}
	c.items = append(c.items, it)
	c.idx = append(c.idx, i)
}

func (s *Server) handleAck(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r, false)
	if !ok {
		return
	}
	defer s.putBody(body)
	c := ackCalls.Get().(*ackCall)
	defer c.release()
	rd := jsonReader{b: *body}
	var a ackFields
	readAck(&rd, &a)
	rd.end()
	switch {
	case rd.err != nil:
		s.writeErr(w, invalidJSON(rd.err))
		return
	case !a.hasTxn || len(a.txn) == 0:
		writeError(w, http.StatusBadRequest, "transactionId is required")
		return
	case !a.hasPid || len(a.pid) == 0:
		writeError(w, http.StatusBadRequest, "partitionId is required to ensure message uniqueness")
		return
	}
	c.add(&a, nil)
	s.runAcks(r.Context(), w, c)
}

func (s *Server) handleAckBatch(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r, false)
	if !ok {
		return
	}
	defer s.putBody(body)
	c := ackCalls.Get().(*ackCall)
	defer c.release()
	if msg, err := c.readBatch(*body); err != nil {
		s.writeErr(w, err)
		return
	} else if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	s.runAcks(r.Context(), w, c)
}

// readBatch reads a batch ack body into c's items. A body it refuses
// answers either msg (a 400 with that text) or err (invalid JSON, through
// writeErr).
func (c *ackCall) readBatch(body []byte) (msg string, err error) {
	rd := jsonReader{b: body}
	if !rd.open('{', "the body must be a JSON object") {
		return "", invalidJSON(rd.err)
	}
	var group []byte
	found := false
	// The acknowledgments are read first and turned into engine items once
	// the top-level consumerGroup (which may come after them) is known.
	first := true
	for rd.more('}', &first) {
		switch string(rd.key()) {
		case "consumerGroup":
			group = rd.optStr("consumerGroup must be a string")
		case "acknowledgments":
			if !rd.arrayNext() {
				if rd.err != nil {
					return "", invalidJSON(rd.err)
				}
				return "acknowledgments array is required", nil
			}
			rd.i++
			found = true
			afirst := true
			for rd.more(']', &afirst) {
				c.acks = append(c.acks, ackFields{})
				a := &c.acks[len(c.acks)-1]
				readAck(&rd, a)
				if rd.err != nil {
					break
				}
				if !a.hasTxn || len(a.txn) == 0 {
					return "Each acknowledgment must have a valid transactionId", nil
				}
				if !a.hasPid || len(a.pid) == 0 {
					return "Each acknowledgment must have a valid partitionId", nil
				}
			}
		default:
			rd.skip()
		}
	}
	rd.end()
	if rd.err != nil {
		return "", invalidJSON(rd.err)
	}
	if !found {
		return "acknowledgments array is required", nil
	}
	for i := range c.acks {
		c.add(&c.acks[i], group)
	}
	return "", nil
}

// runAcks sends c's items to the data plane (the engine, alone) and
// answers.
func (s *Server) runAcks(ctx context.Context, w http.ResponseWriter, c *ackCall) {
	if cap(c.res) < len(c.items) {
		c.res = make([]engine.AckResult, len(c.items))
	}
	c.res = c.res[:len(c.items)]
	if len(c.items) > 0 {
		s.dp.AckAsync(ctx, c.items, c.res, c.done)
		if err := <-c.ch; err != nil {
			s.writeErr(w, err)
			return
		}
	}
	out := getBuf()
	defer putBuf(out)
	b := append(*out, '[')
	k := 0
	for i := range c.txns {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = appendInt(b, int64(i))
		b = append(b, `,"transactionId":`...)
		b = appendString(b, c.txns[i])
		if c.bad[i] != "" {
			b = append(b, `,"success":false,"error":`...)
			b = appendString(b, c.bad[i])
			b = append(b, `,"queueName":null,"partitionName":null,"leaseReleased":false,"dlq":false}`...)
			continue
		}
		res := &c.res[k]
		k++
		if res.Err != nil {
			b = append(b, `,"success":false,"error":`...)
			b = appendString(b, ackErrText(res.Err))
		} else {
			b = append(b, `,"success":true,"error":null`...)
		}
		b = append(b, `,"queueName":`...)
		b = appendStringOrNull(b, res.Queue)
		b = append(b, `,"partitionName":`...)
		b = appendStringOrNull(b, res.Partition)
		b = append(b, `,"leaseReleased":`...)
		b = appendBool(b, res.LeaseReleased)
		b = append(b, `,"dlq":`...)
		b = appendBool(b, res.DeadLettered)
		b = append(b, '}')
	}
	b = append(b, ']')
	*out = b
	writeJSON(w, http.StatusOK, b)
}

// ackErrText words a refused ack as Queen's clients expect ("Invalid or
// expired lease", "Message not found") followed by the engine's reason:
// this broker's engine's, or, for an ack forwarded to another broker, the
// reason that broker sent (a *protocol.Error with the same meaning).
func ackErrText(err error) string {
	code := protocol.CodeOf(err)
	switch {
	case errors.Is(err, engine.ErrLeaseRequired) || code == protocol.CodeLeaseRequired:
		return "Lease required: this server checks leases, send the leaseId the pop returned (regent serve --unchecked-acks takes acks without one, as Queen does): " + errText(err)
	case errors.Is(err, engine.ErrLeaseInvalid) || code == protocol.CodeLeaseInvalid:
		return "Invalid or expired lease: " + errText(err)
	case errors.Is(err, engine.ErrMessageNotFound) || code == protocol.CodeMessageNotFound:
		return "Message not found: " + errText(err)
	}
	return errText(err)
}

// POST /api/v1/lease/{leaseId}/extend  {"seconds":60}
//
// Extends every partition lease of a pop to at least now+seconds while it
// is live. Always 200 with a one-element array; a lease that is gone is
// success:false.
func (s *Server) handleLeaseExtend(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r, true)
	if !ok {
		return
	}
	defer s.putBody(body)
	seconds := 60.0
	if len(strings.TrimSpace(unsafeString(*body))) > 0 {
		rd := jsonReader{b: *body}
		if !rd.open('{', "the body must be a JSON object") {
			s.writeErr(w, invalidJSON(rd.err))
			return
		}
		first := true
		for rd.more('}', &first) {
			if string(rd.key()) == "seconds" && rd.peek() != 'n' {
				seconds = rd.float("seconds must be a number")
			} else {
				rd.skip()
			}
		}
		rd.end()
		if rd.err != nil {
			s.writeErr(w, invalidJSON(rd.err))
			return
		}
	}
	if seconds <= 0 {
		writeError(w, http.StatusBadRequest, "seconds must be positive")
		return
	}
	leaseText := r.PathValue("leaseId")
	b := []byte(`[{"index":0,"leaseId":`)
	b = appendString(b, leaseText)
	id, err := engine.ParseUUID(leaseText)
	var exp time.Time
	if err == nil {
		type answer struct {
			exp time.Time
			err error
		}
		ch := make(chan answer, 1)
		s.dp.ExtendLeaseAsync(r.Context(), id, time.Duration(seconds*float64(time.Second)), func(exp time.Time, err error) { ch <- answer{exp, err} })
		a := <-ch
		exp, err = a.exp, a.err
	}
	switch {
	case err == nil:
		b = append(b, `,"success":true,"error":null,"expiresAt":`...)
		b = appendTime(b, exp.UnixNano())
	case errors.Is(err, engine.ErrLeaseInvalid) || errors.Is(err, engine.ErrBadUUID) || protocol.CodeOf(err) == protocol.CodeLeaseInvalid:
		b = append(b, `,"success":false,"error":`...)
		b = appendString(b, "Lease not found or expired: "+errText(err))
		b = append(b, `,"expiresAt":null`...)
	default:
		s.writeErr(w, err)
		return
	}
	b = append(b, "}]"...)
	writeJSON(w, http.StatusOK, b)
}
