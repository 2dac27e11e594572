package httpapi

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/regentmq/regent/engine"
)

// The dashboard's message finder, for its Message page:
//
//	GET /api/v1/dashboard/messages?queue=Q&partition=P&offset=N
//	    the message at offset N of partition P (by name) of queue Q
//	GET /api/v1/dashboard/messages?transactionId=T[&queue=Q][&partition=P]
//	    the messages with transaction id T (or message id T), in the
//	    partitions named, of the queue named, or of every queue
//
// Both answer {"messages":[{queue, partition, partitionId, offset, id,
// transactionId, createdAt}], "partitionsSearched", "complete"}: at most
// dashFindMax messages, and a search by transaction id looks in at most
// dashFindPartitionsMax partitions ("complete" false when it stopped
// there). No message found answers 404 {"error":"Message not found"}; an
// unknown queue or partition 404 with its own words; a request that names
// neither an offset nor a transaction id, or an offset without its queue and
// partition, 400.
const (
	dashFindMax           = 20
	dashFindPartitionsMax = 100_000
)

// foundJSON is a message the finder answers with (its strings copied: the
// engine's may be reused once a scan returns).
func foundJSON(m *engine.Message) map[string]any {
	return map[string]any{
		"queue": strings.Clone(m.Queue), "partition": strings.Clone(m.Partition), "partitionId": m.PartitionID.String(),
		"offset": m.Offset, "id": m.ID.String(), "transactionId": strings.Clone(m.TransactionID),
		"createdAt": fmtTime(m.CreatedAt),
	}
}

// GET /api/v1/dashboard/messages
func (s *Server) handleDashFind(w http.ResponseWriter, r *http.Request) {
	raw := r.URL.RawQuery
	queue, part := queryParam(raw, "queue"), queryParam(raw, "partition")
	offText, txn := queryParam(raw, "offset"), queryParam(raw, "transactionId")
	if queue != "" && !s.visibleQueue(queue) {
		writeError(w, http.StatusNotFound, "Queue not found")
		return
	}
	switch {
	case offText != "":
		off, err := strconv.ParseUint(offText, 10, 64)
		if err != nil {
			s.writeErr(w, badRequest("offset: not a whole number: "+strconv.Quote(offText)))
			return
		}
		if queue == "" || part == "" {
			s.writeErr(w, badRequest("offset: name the queue and the partition too"))
			return
		}
		m, ok, err := s.messageAt(queue, part, off)
		if err != nil {
			writeError(w, http.StatusNotFound, "Partition not found")
			return
		}
		if !ok {
			writeError(w, http.StatusNotFound, "Message not found")
			return
		}
		s.writeValue(w, http.StatusOK, map[string]any{"messages": []any{m}, "partitionsSearched": 1, "complete": true})
	case txn != "":
		s.findTxn(w, queue, part, txn)
	default:
		s.writeErr(w, badRequest("name a queue, partition and offset, or a transactionId"))
	}
}

// visibleQueue reports whether queue exists and is not one of the broker's
// own.
func (s *Server) visibleQueue(queue string) bool {
	v, err := s.e.ViewQueueHead(queue)
	return err == nil && !internalQueue(v.Name)
}

// messageAt finds the message at offset off of queue/part. The engine reads
// messages by creation time, which grows with the offset: a binary search
// over time finds the push record that holds off (each probe reads one
// record), then a scan from there reaches it. err is the partition's
// (unknown); ok is false when no message is at off (outside the partition,
// not yet committed, removed, or lost).
func (s *Server) messageAt(queue, part string, off uint64) (map[string]any, bool, error) {
	pv, err := s.e.ViewPartition(queue, part)
	if err != nil {
		return nil, false, err
	}
	if off < pv.Low || off >= pv.Durable || pv.Oldest == 0 {
		return nil, false, nil
	}
	// firstAt is the offset of the first message created at or after since.
	firstAt := func(since int64) (uint64, bool) {
		var o uint64
		got := false
		s.e.ScanMessages(queue, part, since, 0, func(m *engine.Message) bool {
			o, got = m.Offset, true
			return false
		})
		return o, got
	}
	// The latest time whose first message is at or before off.
	lo, hi := pv.Oldest, max(pv.Newest, pv.Oldest)
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if o, got := firstAt(mid); got && o <= off {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	var out map[string]any
	s.e.ScanMessages(queue, part, lo, 0, func(m *engine.Message) bool {
		if m.Offset == off {
			out = foundJSON(m)
		}
		return m.Offset < off
	})
	return out, out != nil, nil
}

// findTxn answers the messages whose transaction id (or message id) is
// txn, in the partitions named part (all when "") of queue (every queue
// when "").
func (s *Server) findTxn(w http.ResponseWriter, queue, part, txn string) {
	var vs []engine.QueueView
	if queue != "" {
		v, _ := s.e.ViewQueueHead(queue)
		vs = []engine.QueueView{v}
	} else {
		for _, v := range s.heads() {
			if !internalQueue(v.Name) {
				vs = append(vs, v)
			}
		}
	}
	out := []any{}
	searched, complete := 0, true
	for i := range vs {
		s.e.EachPartition(vs[i].Name, func(p *engine.PartitionView) bool {
			if part != "" && p.Name != part {
				return true
			}
			if searched >= dashFindPartitionsMax || len(out) >= dashFindMax {
				complete = false
				return false
			}
			searched++
			if m, err := s.e.FindMessage(p.ID, txn); err == nil {
				out = append(out, foundJSON(&m))
			}
			return true
		})
		if !complete {
			break
		}
	}
	if len(out) == 0 && !complete {
		writeError(w, http.StatusNotFound, "Message not found in the first "+strconv.Itoa(searched)+
			" partitions searched: name its queue to search the rest")
		return
	}
	if len(out) == 0 {
		writeError(w, http.StatusNotFound, "Message not found")
		return
	}
	s.writeValue(w, http.StatusOK, map[string]any{"messages": out, "partitionsSearched": searched, "complete": complete})
}
