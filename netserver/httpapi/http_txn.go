package httpapi

import (
	"crypto/rand"
	"net/http"

	"github.com/regentmq/regent/engine"
)

// POST /api/v1/transaction
//
//	{"operations":[
//	   {"type":"ack","transactionId":"in","partitionId":"<uuid>","status":"completed","consumerGroup":"g","leaseId":"<opt>"},
//	   {"type":"push","items":[{"queue":"next","partition":"p","payload":{...}}]}],
//	 "requiredLeases":["<leaseId>"]}
//
// Applies every ack and push all or nothing, as one durable step
// (engine.TransactionAsync). Always 200: {"transactionId","success",
// "results":[...]} with one result per ack and per pushed item, in order;
// when any ack would be refused (or a push is invalid), nothing is applied,
// success is false and error says which operation and why.
//
// Queen's clients do not put the lease on each ack of a transaction: they
// list the leases in requiredLeases. An ack without a leaseId is checked
// against the live lease of its (group, partition) when that lease is in
// requiredLeases (or against the only lease listed), so the lease rule of
// SEMANTICS.md holds for transactions too. On a server with unchecked acks
// (engine.Config.UncheckedAcks) requiredLeases is ignored, as Queen ignores
// it: such an ack stays lease-less and is taken for a message in flight
// under any live lease of its group, like a lease-less POST /api/v1/ack.

type txnOp struct {
	push  bool
	index int // into acks or pushes
}

func (s *Server) handleTransaction(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r, false)
	if !ok {
		return
	}
	defer s.putBody(body)
	rd := jsonReader{b: *body}
	if !rd.open('{', "the body must be a JSON object") {
		s.writeErr(w, invalidJSON(rd.err))
		return
	}
	var (
		acks     []engine.AckItem
		ackTxns  []string
		pushes   []engine.PushItem
		ops      []txnOp
		required []engine.UUID
		badOp    string
		found    bool
	)
	first := true
	for rd.more('}', &first) {
		switch string(rd.key()) {
		case "operations":
			if !rd.arrayNext() {
				if rd.err != nil {
					s.writeErr(w, invalidJSON(rd.err))
					return
				}
				writeError(w, http.StatusBadRequest, "operations array required")
				return
			}
			rd.i++
			found = true
			ofirst := true
			for rd.more(']', &ofirst) {
				var a ackFields
				var typ []byte
				var items []engine.PushItem
				var names interner
				if !rd.open('{', "each operation must be an object") {
					break
				}
				kfirst := true
				for rd.more('}', &kfirst) {
					switch k := unsafeString(rd.key()); k {
					case "type":
						typ = rd.optStr("type must be a string")
					case "items":
						if !rd.arrayNext() {
							if rd.err != nil {
								s.writeErr(w, invalidJSON(rd.err))
								return
							}
							writeError(w, http.StatusBadRequest, "a push operation needs an items array")
							return
						}
						rd.i++
						ifirst := true
						for rd.more(']', &ifirst) {
							var it engine.PushItem
							if err := parsePushItem(&rd, &it, &names); err != nil {
								s.writeErr(w, err)
								return
							}
							items = append(items, it)
						}
					default:
						readAckField(&rd, k, &a)
					}
				}
				switch string(typ) {
				case "ack":
					if !a.hasTxn || len(a.txn) == 0 || !a.hasPid || len(a.pid) == 0 {
						writeError(w, http.StatusBadRequest, "an ack operation needs transactionId and partitionId")
						return
					}
					it, reason := txnAckItem(&a)
					if reason != "" && badOp == "" {
						badOp = "ACK operation failed: " + reason
					}
					ops = append(ops, txnOp{index: len(acks)})
					acks = append(acks, it)
					ackTxns = append(ackTxns, unsafeString(a.txn))
				case "push":
					for _, it := range items {
						ops = append(ops, txnOp{push: true, index: len(pushes)})
						pushes = append(pushes, it)
					}
				default:
					if badOp == "" {
						badOp = "unknown operation type " + string(typ) + " (want ack or push)"
					}
				}
			}
		case "requiredLeases":
			if rd.isNull() {
				continue
			}
			if !rd.open('[', "requiredLeases must be an array") {
				break
			}
			lfirst := true
			for rd.more(']', &lfirst) {
				if id, err := engine.ParseUUID(unsafeString(rd.optStr("requiredLeases must hold strings"))); err == nil {
					required = append(required, id)
				}
			}
		default:
			rd.skip()
		}
	}
	rd.end()
	if rd.err != nil {
		s.writeErr(w, invalidJSON(rd.err))
		return
	}
	if !found {
		writeError(w, http.StatusBadRequest, "operations array required")
		return
	}
	if len(ops) == 0 && badOp == "" {
		writeError(w, http.StatusBadRequest, "operations array cannot be empty")
		return
	}
	txID := s.newID()
	if badOp != "" {
		b := []byte(`{"transactionId":`)
		b = appendUUID(b, txID)
		b = append(b, `,"success":false,"error":`...)
		b = appendString(b, badOp)
		b = append(b, `,"results":[]}`...)
		writeJSON(w, http.StatusOK, b)
		return
	}
	for i := range acks {
		if acks[i].LeaseID.IsZero() {
			acks[i].LeaseID = s.requiredLease(&acks[i], required)
		}
	}
	type answer struct {
		r   engine.TxnResult
		err error
	}
	ch := make(chan answer, 1)
	stampProducer(r, pushes)
	s.dp.TransactionAsync(r.Context(), acks, pushes, func(r engine.TxnResult, err error) { ch <- answer{r, err} })
	a := <-ch
	if a.err != nil {
		s.writeErr(w, a.err)
		return
	}
	s.writeTxnResult(w, txID, ops, acks, ackTxns, pushes, &a.r)
}

// readAckField reads one field of an ack operation.
func readAckField(rd *jsonReader, k string, a *ackFields) {
	switch k {
	case "transactionId":
		a.hasTxn = rd.peek() == '"'
		a.txn = rd.optStr("transactionId must be a string")
	case "partitionId":
		a.hasPid = rd.peek() == '"'
		a.pid = rd.optStr("partitionId must be a string")
	case "leaseId":
		a.lease = rd.optStr("leaseId must be a string")
	case "consumerGroup":
		a.group = rd.optStr("consumerGroup must be a string")
	case "error":
		if rd.peek() == '"' {
			a.errText = rd.str()
		} else {
			rd.skip()
		}
	case "status":
		switch rd.peek() {
		case 't', 'f':
			if rd.boolean("status must be a string") {
				a.statusBool = 1
			} else {
				a.statusBool = -1
			}
		default:
			a.status = rd.optStr("status must be a string")
		}
	default:
		rd.skip()
	}
}

// txnAckItem turns an ack operation into an engine item, or says why it is
// refused.
func txnAckItem(a *ackFields) (engine.AckItem, string) {
	var c ackCall
	c.add(a, nil)
	if c.bad[0] != "" {
		return engine.AckItem{}, c.bad[0]
	}
	return c.items[0], ""
}

// requiredLease picks the lease an ack without a leaseId is checked against:
// the live lease of its (group, partition) when the transaction listed it,
// otherwise the transaction's only listed lease; none on a server with
// unchecked acks.
func (s *Server) requiredLease(it *engine.AckItem, required []engine.UUID) engine.UUID {
	if len(required) == 0 || s.uncheckedAcks() {
		return engine.UUID{}
	}
	if live, ok := s.dp.LiveLease(it.PartitionID, it.Group); ok {
		for _, id := range required {
			if id == live {
				return id
			}
		}
	}
	if len(required) == 1 {
		return required[0]
	}
	return engine.UUID{}
}

func (s *Server) writeTxnResult(w http.ResponseWriter, txID engine.UUID, ops []txnOp, acks []engine.AckItem, ackTxns []string, pushes []engine.PushItem, r *engine.TxnResult) {
	b := []byte(`{"transactionId":`)
	b = appendUUID(b, txID)
	if r.Err == nil {
		b = append(b, `,"success":true,"error":null`...)
	} else {
		msg := errText(r.Err)
		for i := range r.Acks {
			if r.Acks[i].Err != nil {
				msg = "ACK operation failed: " + ackErrText(r.Acks[i].Err)
				break
			}
		}
		if msg == errText(r.Err) {
			for i := range r.Pushes {
				if r.Pushes[i].Status == engine.Failed && r.Pushes[i].Err != nil {
					msg = "PUSH operation failed: " + r.Pushes[i].Err.Error()
					break
				}
			}
		}
		b = append(b, `,"success":false,"error":`...)
		b = appendString(b, msg)
	}
	b = append(b, `,"results":[`...)
	for i, op := range ops {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = appendInt(b, int64(i))
		if !op.push {
			ar := &r.Acks[op.index]
			b = append(b, `,"type":"ack","transactionId":`...)
			b = appendString(b, ackTxns[op.index])
			if ar.Err != nil {
				b = append(b, `,"success":false,"error":`...)
				b = appendString(b, ackErrText(ar.Err))
			} else {
				b = append(b, `,"success":`...)
				b = appendBool(b, r.Err == nil)
				b = append(b, `,"error":null`...)
			}
			b = append(b, `,"dlq":`...)
			b = appendBool(b, ar.DeadLettered)
			b = append(b, '}')
			continue
		}
		pr := &r.Pushes[op.index]
		it := &pushes[op.index]
		b = append(b, `,"type":"push","success":`...)
		b = appendBool(b, pr.Status == engine.Queued || pr.Status == engine.Duplicate)
		b = append(b, `,"status":`...)
		if pr.Status == 0 {
			b = append(b, `"not_applied"`...)
		} else {
			b = appendString(b, pr.Status.String())
		}
		b = append(b, `,"transactionId":`...)
		switch {
		case it.TransactionID != "":
			b = appendString(b, it.TransactionID)
		default:
			b = appendUUIDOrNull(b, pr.MessageID)
		}
		b = append(b, `,"messageId":`...)
		b = appendUUIDOrNull(b, pr.MessageID)
		b = append(b, `,"partitionId":`...)
		b = appendUUIDOrNull(b, pr.PartitionID)
		b = append(b, `,"queueName":`...)
		b = appendString(b, it.Queue)
		if pr.Status == engine.Failed && pr.Err != nil {
			b = append(b, `,"error":`...)
			b = appendString(b, pr.Err.Error())
		}
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	writeJSON(w, http.StatusOK, b)
}

// newID names a transaction: the engine's next id, or without one a
// random (version 4) UUID.
func (s *Server) newID() engine.UUID {
	if s.e != nil {
		return s.e.NewID()
	}
	var u engine.UUID
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// uncheckedAcks is the engine's UncheckedAcks, or without one the
// configuration's.
func (s *Server) uncheckedAcks() bool {
	if s.e != nil {
		return s.e.UncheckedAcks()
	}
	return s.cfg.UncheckedAcks
}
