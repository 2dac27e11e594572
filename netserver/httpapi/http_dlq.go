package httpapi

import (
	"net/http"

	"github.com/regentmq/regent/engine"
)

// dlqPageBytes bounds a page of dead letters by size (engine.DLQEntry.Size:
// payloads, strings and a fixed part per entry).
const dlqPageBytes = 16 << 20

// GET /api/v1/dlq?queue=&consumerGroup=&partition=&from=&to=&limit=100&offset=0
//
// Lists dead-letter entries, oldest first, with Queen's keys (errorMessage,
// retryCount, data, failedAt). Unlike Queen, every filter works (partition
// and the failedAt range from/to included), paging is applied exactly, and
// total says how many entries match in all. A page holds at most 10,000
// entries and about dlqPageBytes of them (payloads included; the first
// entry always): one cut short by its size says where the next begins in
// pagination.next (null when none follows). A cluster's broker lists every
// broker's entries (Config.DLQ).
func (s *Server) handleDLQ(w http.ResponseWriter, r *http.Request) {
	raw := r.URL.RawQuery
	since, until, err := timeRange(raw, 0, 0)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	limit, offset, err := paging(raw, 100)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	f := engine.DLQFilter{
		Queue: queryParam(raw, "queue"), Group: queryParam(raw, "consumerGroup"), Partition: queryParam(raw, "partition"),
		Limit: limit, Offset: offset, MaxBytes: dlqPageBytes,
	}
	if since != 0 {
		f.From = timeOf(since)
	}
	if until != 0 {
		f.To = timeOf(until)
	}
	var entries []engine.DLQEntry
	var total int
	switch {
	case s.cfg.DLQ != nil:
		entries, total, err = s.cfg.DLQ(r.Context(), f)
	case s.e != nil:
		entries, total, err = s.e.DLQ(f)
	default:
		notServedWithoutEngine(w, r)
		return
	}
	if err != nil {
		s.writeErr(w, err)
		return
	}
	b := []byte(`{"messages":[`)
	for i := range entries {
		d := &entries[i]
		m := &d.Message
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendUUID(b, m.ID)
		b = append(b, `,"entryId":`...)
		b = appendUUID(b, d.ID)
		b = append(b, `,"transactionId":`...)
		b = appendString(b, m.TransactionID)
		b = append(b, `,"partitionId":`...)
		b = appendUUID(b, m.PartitionID)
		b = append(b, `,"queue":`...)
		b = appendString(b, m.Queue)
		b = append(b, `,"partition":`...)
		b = appendString(b, m.Partition)
		b = append(b, `,"consumerGroup":`...)
		b = appendString(b, m.Group)
		b = append(b, `,"errorMessage":`...)
		b = appendStringOrNull(b, d.Error)
		b = append(b, `,"retryCount":`...)
		b = appendInt(b, int64(d.RetryCount))
		b = append(b, `,"data":`...)
		b = appendPayload(b, m.Payload)
		b = append(b, `,"traceId":`...)
		b = appendStringOrNull(b, m.TraceID)
		b = append(b, `,"producerSub":`...)
		b = appendStringOrNull(b, m.ProducerSub)
		b = append(b, `,"createdAt":`...)
		b = appendTime(b, m.CreatedAt)
		b = append(b, `,"failedAt":`...)
		b = appendTime(b, d.FailedAt)
		b = append(b, '}')
	}
	b = append(b, `],"total":`...)
	b = appendInt(b, int64(total))
	b = append(b, `,"pagination":{"limit":`...)
	b = appendInt(b, int64(limit))
	b = append(b, `,"offset":`...)
	b = appendInt(b, int64(offset))
	b = append(b, `,"next":`...)
	if next := offset + len(entries); next < total {
		b = appendInt(b, int64(next))
	} else {
		b = append(b, "null"...)
	}
	b = append(b, "}}"...)
	writeJSON(w, http.StatusOK, b)
}
