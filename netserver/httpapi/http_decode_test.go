package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/regentmq/regent/engine"
)

var jsonSamples = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `1.5e-3`, `"s"`, `"\u00e9\ud83d\ude00"`, `{"a":[1,{"b":null}]}`,
	` { "a" : 1 } `, `[1,2,3]`, `"\\\"\/\b\f\n\r\t"`,
	// invalid
	``, `{`, `}`, `[1,]`, `{"a":1,}`, `{"a"}`, `{a:1}`, `01`, `1.`, `.5`, `1e`, `-`, `tru`, `nul`, `"abc`, "\"a\x01\"",
	`"\x"`, `"\u12"`, `[1 2]`, `{"a":1 "b":2}`, `1 2`, `[`, `{"a":`,
}

func TestJSONReaderAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range jsonSamples {
		if got, want := validJSON([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("validJSON(%q) = %v, encoding/json says %v", s, got, want)
		}
	}
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	if validJSON([]byte(deep)) {
		t.Error("validJSON accepted nesting beyond maxDepth")
	}
}

func TestJSONReaderStrings(t *testing.T) {
	for _, s := range []string{`"plain"`, `"esc\"aped"`, `"\u00e9t\u00e9"`, `"\ud83d\ude00"`, `"\ud800x"`, `"tab\tnl\n"`} {
		r := jsonReader{b: []byte(s)}
		got := string(r.str())
		var want string
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatal(err)
		}
		if r.err != nil || got != want {
			t.Errorf("str(%s) = %q (%v), want %q", s, got, r.err, want)
		}
	}
}

func TestParsePushItemsAliasesPayloads(t *testing.T) {
	body := []byte(`{"other":{"x":[1]},"items":[{"queue":"q","partition":"p","payload":[1, 2],"transactionId":"t","traceId":null,"producerSub":"x"},{"queue":"q","data":"d"}]}`)
	items, err := parsePushItems(body, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.PushItem{
		{Queue: "q", Partition: "p", TransactionID: "t", Payload: []byte(`[1, 2]`)},
		{Queue: "q", Payload: []byte(`"d"`)},
	}
	if len(items) != len(want) {
		t.Fatalf("items %v", items)
	}
	for i := range want {
		g, w := items[i], want[i]
		if g.Queue != w.Queue || g.Partition != w.Partition || g.TransactionID != w.TransactionID || g.TraceID != w.TraceID || string(g.Payload) != string(w.Payload) {
			t.Errorf("item %d: %+v, want %+v", i, g, w)
		}
	}
}

// FuzzParsePush feeds arbitrary bodies to the push decoder: it never
// panics, and what it accepts is what encoding/json reads, with every
// payload a valid JSON value.
func FuzzParsePush(f *testing.F) {
	f.Add([]byte(`{"items":[{"queue":"q","payload":{"a":1}}]}`))
	f.Add([]byte(`{"items":[{"queue":"q","partition":"p","transactionId":"t","traceId":"x","payload":null},{"queue":"r","data":[1,"2"]}]}`))
	f.Add([]byte(`{"items":[]}`))
	f.Add([]byte(`{"items":[{"queue":"\u0071","payload":"\ud83d\ude00"}],"x":{}}`))
	for _, s := range jsonSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		items, err := parsePushItems(body, nil)
		if err != nil {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		var ref struct {
			Items []map[string]json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(body, &ref); err != nil {
			t.Fatalf("accepted %q that encoding/json refuses: %v", body, err)
		}
		if len(ref.Items) != len(items) {
			t.Fatalf("%d items, encoding/json reads %d in %q", len(items), len(ref.Items), body)
		}
		for i, it := range items {
			if !json.Valid(it.Payload) {
				t.Fatalf("item %d payload %q is not JSON", i, it.Payload)
			}
			var q string
			// Invalid UTF-8 is kept as sent (encoding/json replaces it; the
			// engine refuses such names).
			if json.Unmarshal(ref.Items[i]["queue"], &q) != nil || (q != it.Queue && utf8.ValidString(it.Queue)) {
				t.Fatalf("item %d queue %q, encoding/json reads %q", i, it.Queue, q)
			}
		}
	})
}

// FuzzJSONReader checks the validating scanner against encoding/json and
// that the ack decoder never panics.
func FuzzJSONReader(f *testing.F) {
	for _, s := range jsonSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, encoding/json says %v", b, got, want)
		}
		r := jsonReader{b: b}
		var a ackFields
		readAck(&r, &a)
	})
}
