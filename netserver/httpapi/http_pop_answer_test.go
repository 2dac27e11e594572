package httpapi

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/engine"
)

// refAppendPopAnswer is appendPopAnswer as it was before the faster string
// scanning and the timestamp memo, on the byte-at-a-time refAppendString
// and the memo-less appendTime: the answer must not move by a byte.
func refAppendPopAnswer(b []byte, group string, msgs []engine.Message, cut bool) []byte {
	m0 := &msgs[0]
	parts := 1
	for i := 1; i < len(msgs); i++ {
		if msgs[i].PartitionID != msgs[i-1].PartitionID {
			parts++
		}
	}
	str := refAppendString
	strOrNull := func(b []byte, s string) []byte {
		if s == "" {
			return append(b, "null"...)
		}
		return str(b, s)
	}
	payload := func(b []byte, p []byte) []byte {
		if len(p) > 0 && json.Valid(p) && jsonDepth(p) <= maxDepth+1 {
			return append(b, p...)
		}
		return str(b, string(p))
	}
	b = append(b, `{"success":true,"queue":`...)
	b = str(b, m0.Queue)
	b = append(b, `,"partition":`...)
	b = str(b, m0.Partition)
	b = append(b, `,"partitionId":`...)
	b = appendUUID(b, m0.PartitionID)
	b = append(b, `,"leaseId":`...)
	b = appendLease(b, m0.LeaseID)
	b = append(b, `,"consumerGroup":`...)
	b = str(b, group)
	b = append(b, `,"partitionsClaimed":`...)
	b = appendInt(b, int64(parts))
	if cut {
		b = append(b, `,"truncated":true`...)
	}
	b = append(b, `,"messages":[`...)
	for i := range msgs {
		m := &msgs[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendUUID(b, m.ID)
		b = append(b, `,"transactionId":`...)
		b = str(b, m.TransactionID)
		b = append(b, `,"traceId":`...)
		b = strOrNull(b, m.TraceID)
		b = append(b, `,"data":`...)
		b = payload(b, m.Payload)
		b = append(b, `,"createdAt":`...)
		b = appendTime(b, m.CreatedAt)
		b = append(b, `,"retryCount":`...)
		b = appendInt(b, int64(m.RetryCount))
		b = append(b, `,"producerSub":`...)
		b = strOrNull(b, m.ProducerSub)
		b = append(b, `,"partitionId":`...)
		b = appendUUID(b, m.PartitionID)
		b = append(b, `,"partition":`...)
		b = str(b, m.Partition)
		b = append(b, `,"queue":`...)
		b = str(b, m.Queue)
		b = append(b, `,"leaseId":`...)
		b = appendLease(b, m.LeaseID)
		b = append(b, `,"consumerGroup":`...)
		b = str(b, group)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// jsonDepth is the deepest nesting of arrays and objects in valid JSON p.
func jsonDepth(p []byte) int {
	depth, most, inStr := 0, 0, false
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case inStr && c == '\\':
			i++
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '[' || c == '{':
			depth++
			most = max(most, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return most
}

// queenMessage is one message of Queen's pop answer, for encoding/json.
type queenMessage struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	TraceID       *string         `json:"traceId"`
	Data          json.RawMessage `json:"data"`
	CreatedAt     *string         `json:"createdAt"`
	RetryCount    int             `json:"retryCount"`
	ProducerSub   *string         `json:"producerSub"`
	PartitionID   string          `json:"partitionId"`
	Partition     string          `json:"partition"`
	Queue         string          `json:"queue"`
	LeaseID       string          `json:"leaseId"`
	ConsumerGroup string          `json:"consumerGroup"`
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// encodingJSONPopAnswer is the answer as encoding/json writes it.
func encodingJSONPopAnswer(t *testing.T, group string, msgs []engine.Message, cut bool) []byte {
	lease := func(u engine.UUID) string {
		if u.IsZero() {
			return ""
		}
		return u.String()
	}
	parts := 1
	qm := make([]queenMessage, len(msgs))
	for i, m := range msgs {
		if i > 0 && m.PartitionID != msgs[i-1].PartitionID {
			parts++
		}
		data, _ := json.Marshal(string(m.Payload))
		if len(m.Payload) > 0 && validJSON(m.Payload) {
			data = m.Payload
		}
		qm[i] = queenMessage{
			ID: m.ID.String(), TransactionID: m.TransactionID, TraceID: strPtr(m.TraceID), Data: data,
			CreatedAt: timePtr(m.CreatedAt), RetryCount: m.RetryCount, ProducerSub: strPtr(m.ProducerSub),
			PartitionID: m.PartitionID.String(), Partition: m.Partition, Queue: m.Queue, LeaseID: lease(m.LeaseID), ConsumerGroup: group,
		}
	}
	ans := map[string]any{
		"success": true, "queue": msgs[0].Queue, "partition": msgs[0].Partition, "partitionId": msgs[0].PartitionID.String(),
		"leaseId": lease(msgs[0].LeaseID), "consumerGroup": group, "partitionsClaimed": parts, "messages": qm,
	}
	if cut {
		ans["truncated"] = true
	}
	b, err := json.Marshal(ans)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// oddMessages has every field set and unset, texts with quotes, control
// characters, unicode, line separators and invalid UTF-8, payloads that are
// JSON, are not, hold invalid UTF-8, or are 1 MiB, over two partitions (one
// of them autoAck: no lease).
func oddMessages() []engine.Message {
	texts := []string{"", "plain", `q"uo\te`, "ctl\x00\x01\x1f\x7f", "tab\tnl\n\r", "é日本\U0001F600", "bad\xff\xfeutf8", "\u2028\u2029", "<&>", strings.Repeat("long text ", 100)}
	payloads := [][]byte{
		[]byte(`{"a":1}`), []byte(` [1, "two", {"3": null}] `), []byte(`"just a string"`), []byte(`12.5e3`), []byte(`null`), []byte(`true`),
		[]byte(`{"bad":"\xff"}`), []byte(`{"esc":"\u00e9\n\"\\"}`), nil, []byte(`not json`), []byte(`{"a":1`), []byte("\x00\x01binary\xff"),
		[]byte(`{"big":"` + strings.Repeat("x", 1<<20) + `"}`), []byte(strings.Repeat("y", 1<<20)), []byte(`{"a":1} {"b":2}`),
		[]byte(strings.Repeat("[", maxDepth+5) + strings.Repeat("]", maxDepth+5)),
	}
	r := rand.New(rand.NewPCG(11, 12))
	p1, p2, lease := randUUID(r), randUUID(r), randUUID(r)
	created := time.Date(2026, 12, 31, 23, 59, 59, 999_999_000, time.UTC).UnixNano()
	var msgs []engine.Message
	for i := 0; i < 40; i++ {
		m := engine.Message{
			ID: randUUID(r), TransactionID: texts[i%len(texts)], TraceID: texts[(i+3)%len(texts)], Payload: payloads[i%len(payloads)],
			CreatedAt: created + int64(i)*137_000_123, RetryCount: i % 4, ProducerSub: texts[(i+5)%len(texts)],
			Queue: "q" + texts[i/20], Partition: texts[(i/20+4)%len(texts)], PartitionID: p1, LeaseID: lease, Group: "g",
		}
		if i >= 20 {
			m.PartitionID, m.LeaseID = p2, engine.UUID{}
		}
		if i%7 == 3 {
			m.CreatedAt = 0
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// The pop answer is byte for byte what it was (when the engine made
// transactionIds of ids), and what encoding/json
// reads back from it is what encoding/json writes for the same messages.
func TestPopAnswerEncoding(t *testing.T) {
	msgs := oddMessages()
	for _, group := range []string{"g", "__QUEUE_MODE__", "grp\"\x01é\xff"} {
		for _, cut := range []bool{false, true} {
			for _, ms := range [][]engine.Message{msgs, msgs[:1], msgs[19:21], msgs[20:]} {
				// The pop asks for bare transactionIds (PopRequest.BareTxn):
				// without, the engine gives a message pushed without one its
				// id's text, which is what the answer said before.
				full := slices.Clone(ms)
				for i := range full {
					if full[i].TransactionID == "" {
						full[i].TransactionID = full[i].ID.String()
					}
				}
				got := appendPopAnswer([]byte("junk"), group, ms, cut)[4:]
				if want := refAppendPopAnswer(nil, group, full, cut); !bytes.Equal(got, want) {
					i := 0
					for i < len(got) && i < len(want) && got[i] == want[i] {
						i++
					}
					t.Fatalf("answer differs from the byte-at-a-time encoder at byte %d: %.80q, was %.80q", i, got[i:], want[i:])
				}
				if !json.Valid(got) {
					t.Fatalf("answer is not JSON")
				}
				var a, b any
				if err := json.Unmarshal(got, &a); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(encodingJSONPopAnswer(t, group, full, cut), &b); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(a, b) {
					t.Fatalf("answer reads back differently from encoding/json's for group %q, %d messages", group, len(ms))
				}
			}
		}
	}
}
