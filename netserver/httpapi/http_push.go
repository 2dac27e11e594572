package httpapi

import (
	"net/http"
	"sync"

	"github.com/regentmq/regent/engine"
)

// POST /api/v1/push
//
//	{"items":[{"queue":"q","partition":"p","payload":{...},"transactionId":"tx","traceId":"..."}]}
//
// answers 201 with one result per item, in order, with Queen's snake_case
// keys: queued (durable under the journal's sync policy), duplicate (naming
// the existing message) or failed (with the reason, and like every result
// the transactionId sent, as Queen's failed results carry it). One bad item
// does not fail its neighbours; a body that is not that shape is a 400.
//
// The payload travels as the raw JSON text the client sent (any JSON value:
// objects, arrays, strings, numbers, null), byte for byte: it is never
// decoded. Payloads, transactionIds and traceIds alias the request body (the
// engine copies what it keeps before PushAsync returns); queue and
// partition names are copied, once per run of items that repeat them (the
// engine keys its queue map with the name it is given), so a push of n
// items costs no allocation per item here.

// pushCall holds one push request's pooled state.
type pushCall struct {
	items []engine.PushItem
	res   []engine.PushResult
	ch    chan error
	done  func(error) // ch <- err, bound once
}

var pushCalls = sync.Pool{New: func() any {
	c := &pushCall{ch: make(chan error, 1)}
	c.done = func(err error) { c.ch <- err }
	return c
}}

// maxPooledItems keeps huge batches' slices out of the pool.
const maxPooledItems = 4096

func (c *pushCall) release() {
	if cap(c.items) > maxPooledItems {
		c.items, c.res = nil, nil
	}
	clear(c.items[:cap(c.items)])
	clear(c.res[:cap(c.res)])
	c.items, c.res = c.items[:0], c.res[:0]
	pushCalls.Put(c)
}

func (s *Server) handlePush(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r, false)
	if !ok {
		return
	}
	defer s.putBody(body)
	c := pushCalls.Get().(*pushCall)
	defer c.release()
	var err error
	if c.items, err = parsePushItems(*body, c.items); err != nil {
		s.writeErr(w, err)
		return
	}
	stampProducer(r, c.items)
	if cap(c.res) < len(c.items) {
		c.res = make([]engine.PushResult, len(c.items))
	}
	c.res = c.res[:len(c.items)]
	s.dp.PushAsync(r.Context(), c.items, c.res, c.done)
	if err := <-c.ch; err != nil {
		s.writeErr(w, err)
		return
	}
	out := getBuf()
	defer putBuf(out)
	*out = appendPushResults(*out, c.items, c.res)
	writeJSON(w, http.StatusCreated, *out)
}

// stampProducer writes the token's subject into every item when auth is on;
// a producerSub in the body is never taken (parsePushItem skips it).
func stampProducer(r *http.Request, items []engine.PushItem) {
	if c := ClaimsFrom(r.Context()); c != nil {
		for i := range items {
			items[i].ProducerSub = c.Subject
		}
	}
}

// parsePushItems reads {"items":[...]} into items (reused). Strings and
// payloads alias body.
func parsePushItems(body []byte, items []engine.PushItem) ([]engine.PushItem, error) {
	r := jsonReader{b: body}
	if !r.open('{', "the body must be a JSON object") {
		return items, invalidJSON(r.err)
	}
	found := false
	first := true
	for r.more('}', &first) {
		if string(r.key()) != "items" {
			r.skip()
			continue
		}
		if !r.arrayNext() {
			if r.err != nil {
				return items, invalidJSON(r.err)
			}
			return items, badRequest("items array is required")
		}
		found = true
		r.i++
		ifirst := true
		var names interner
		for r.more(']', &ifirst) {
			var it engine.PushItem
			if err := parsePushItem(&r, &it, &names); err != nil {
				return items, err
			}
			items = append(items, it)
		}
	}
	r.end()
	if r.err != nil {
		return items, invalidJSON(r.err)
	}
	if !found {
		return items, badRequest("items array is required")
	}
	return items, nil
}

// parsePushItem reads one push item. Both "payload" and "data" name the
// payload (Queen's transaction route accepts both); a missing payload is {}.
func parsePushItem(r *jsonReader, it *engine.PushItem, names *interner) error {
	if r.peek() != '{' {
		if r.err == nil {
			return badRequest("each item must be an object")
		}
		return invalidJSON(r.err)
	}
	r.i++
	hasQueue, hasPayload := false, false
	first := true
	for r.more('}', &first) {
		switch string(r.key()) {
		case "queue":
			if r.peek() != '"' {
				return badRequest("Queue must be a string")
			}
			it.Queue = names.queue(r.str())
			hasQueue = true
		case "partition":
			if c := r.peek(); c != '"' && c != 'n' {
				return badRequest("Partition must be a string")
			}
			it.Partition = names.partition(r.optStr(""))
		case "transactionId":
			if c := r.peek(); c != '"' && c != 'n' {
				return badRequest("TransactionId must be a string")
			}
			it.TransactionID = unsafeString(r.optStr(""))
		case "traceId":
			if c := r.peek(); c != '"' && c != 'n' {
				return badRequest("TraceId must be a string")
			}
			it.TraceID = unsafeString(r.optStr(""))
		case "payload":
			it.Payload = r.raw()
			hasPayload = true
		case "data":
			if !hasPayload {
				it.Payload = r.raw()
				hasPayload = true
			} else {
				r.skip()
			}
		default:
			// producerSub (stamped from the token, never taken from the
			// body) and anything else: ignored.
			r.skip()
		}
	}
	if r.err != nil {
		return invalidJSON(r.err)
	}
	if !hasQueue {
		return badRequest("Queue must be a string")
	}
	if !hasPayload {
		it.Payload = emptyObject
	}
	return nil
}

var emptyObject = []byte("{}")

// interner copies queue and partition names, reusing the previous item's
// copy when the name repeats (the usual case: a batch for one partition).
type interner struct{ q, p string }

func (n *interner) queue(b []byte) string {
	if string(b) != n.q {
		n.q = string(b)
	}
	return n.q
}

func (n *interner) partition(b []byte) string {
	if string(b) != n.p {
		n.p = string(b)
	}
	return n.p
}

// appendPushResults encodes Queen's push answer.
func appendPushResults(b []byte, items []engine.PushItem, res []engine.PushResult) []byte {
	b = append(b, '[')
	for i := range res {
		if i > 0 {
			b = append(b, ',')
		}
		r := &res[i]
		b = append(b, `{"index":`...)
		b = appendInt(b, int64(i))
		b = append(b, `,"transaction_id":`...)
		switch {
		case r.TransactionID != "":
			b = appendString(b, r.TransactionID)
		case !r.MessageID.IsZero():
			b = appendUUID(b, r.MessageID)
		default:
			b = append(b, "null"...)
		}
		b = append(b, `,"status":"`...)
		b = append(b, r.Status.String()...)
		b = append(b, '"')
		if r.Status == engine.Failed {
			b = append(b, `,"error":`...)
			msg := "push failed"
			if r.Err != nil {
				msg = r.Err.Error()
			}
			b = appendString(b, msg)
		} else {
			b = append(b, `,"message_id":`...)
			b = appendUUIDOrNull(b, r.MessageID)
			b = append(b, `,"partition_id":`...)
			b = appendUUIDOrNull(b, r.PartitionID)
			b = append(b, `,"trace_id":`...)
			b = appendStringOrNull(b, items[i].TraceID)
		}
		b = append(b, `,"queueName":`...)
		b = appendString(b, items[i].Queue)
		b = append(b, '}')
	}
	return append(b, ']')
}
