package httpapi_test

import (
	"strings"
	"testing"

	"github.com/regentmq/regent/log"
	"github.com/regentmq/regent/netserver/httpapi"
)

// TestNoRequestBuildsARecordTheJournalRefuses: the two requests that stopped
// the journal for good (a dlq ack of many large messages in one request, its
// dead letters carrying their payloads in one record above the journal's
// largest entry; a redrive of a large dead-letter queue as one record) now
// go through in bounded records, and an unrelated push right after each is
// queued. Scaled down: the journal takes entries of 4 MiB, the engine keeps
// its records within 1 MiB, the messages are of 500 KiB.
func TestNoRequestBuildsARecordTheJournalRefuses(t *testing.T) {
	h := newHarnessLog(t, log.Config{Sync: log.SyncNone, MaxEntryBytes: 4 << 20, MaxBatchBytes: 1 << 20},
		func(_ *httpapi.Config, ec *engineConfig) { ec.MaxRecordBytes = 1 << 20 })
	big := strings.Repeat("x", 500<<10)
	for i := 0; i < 17; i++ {
		h.push(obj{"queue": "huge", "partition": "p", "payload": big + string(rune('a'+i))})
	}
	ms := msgsOf(h.pop("huge?consumerGroup=g&batch=17"))
	if len(ms) != 17 {
		t.Fatalf("popped %d of 17", len(ms))
	}
	acks := make([]obj, len(ms))
	for i, m := range ms {
		acks[i] = ackOf(m, "dlq")
		acks[i]["error"] = "too big to handle"
	}
	for i, r := range h.ackBatch("g", acks...) {
		if r["success"] != true {
			t.Fatalf("dlq ack %d of 17 messages of 500 KiB (8.5 MB of dead letters): %v", i, r)
		}
	}
	h.push(obj{"queue": "unrelated", "payload": "after the acks"})
	var red struct {
		Redriven int `json:"redriven"`
	}
	h.call("POST", "/api/v1/dlq/redrive", obj{"queue": "huge"}, 200, &red)
	if red.Redriven != 17 {
		t.Fatalf("redrove %d of 17", red.Redriven)
	}
	h.push(obj{"queue": "unrelated", "payload": "after the redrive"})
	if err := h.e.Healthy(); err != nil {
		t.Fatalf("the engine: %v", err)
	}
	var dl obj
	h.call("GET", "/api/v1/dlq?queue=huge", nil, 200, &dl)
	if dl["total"] != 0.0 {
		t.Fatalf("dlq after the redrive: %v", dl["total"])
	}
}
