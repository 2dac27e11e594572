package tcp_test

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver/tcp"
	"github.com/regentmq/regent/protocol"
)

// browseErr sends req and returns the error reply's code and message
// (failing when the answer is not an error).
func (s *speaker) browseErr(req *protocol.BrowseRequest) (protocol.Code, string) {
	s.t.Helper()
	s.id++
	s.nc.Write(protocol.AppendFrame(nil, s.id, req))
	s.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	fr, err := s.rd.Next()
	if err != nil || !fr.IsError() {
		s.t.Fatalf("browse %+v: %v, error frame %v", req, err, fr.IsError())
	}
	var e protocol.ErrorReply
	if err := e.Decode(fr.Body); err != nil {
		s.t.Fatal(err)
	}
	return e.Code, e.Message
}

// browseAll pages through req (a page never above the speaker's frame of
// frame bytes) and returns the messages.
func (s *speaker) browseAll(req protocol.BrowseRequest, frame int) (msgs []protocol.BrowseMessage, pages int) {
	s.t.Helper()
	for pages = 1; ; pages++ {
		var r protocol.BrowseReply
		if size := s.call(&req, &r); size > frame {
			s.t.Fatalf("page %d: %d bytes, above the frame of %d", pages, size, frame)
		}
		for _, m := range r.Messages {
			m.Payload = bytes.Clone(m.Payload)
			msgs = append(msgs, m)
		}
		if !r.More {
			return msgs, pages
		}
		req.Resume, req.ResumeOffset = r.NextPartition, r.NextOffset
	}
}

// TestTCPBrowseFitsTheFrame: messages of 1 MiB browsed over a 3 MiB frame
// come two a page, whole; a client reading 64 KiB frames gets one a page,
// cut, with its size; the largest message a push accepts, with the longest
// names, comes whole in one reply. No page passes its frame.
func TestTCPBrowseFitsTheFrame(t *testing.T) {
	const frame = 3 << 20
	f := newTCP(t, func(c *tcp.Config) { c.MaxFrameBytes = frame })
	mib := bytes.Repeat([]byte("m"), 1<<20)
	for i := 0; i < 5; i++ {
		mib[0] = byte('0' + i)
		if _, err := f.e.Push(context.Background(), []engine.PushItem{{Queue: "fat", Payload: mib}}); err != nil {
			t.Fatal(err)
		}
	}
	s := speak(t, f, protocol.VersionMinor, frame)
	msgs, pages := s.browseAll(protocol.BrowseRequest{Queue: "fat", Limit: 100}, frame)
	if len(msgs) != 5 || pages != 3 {
		t.Fatalf("3 MiB frames: %d messages in %d pages", len(msgs), pages)
	}
	for i, m := range msgs {
		if m.Offset != uint64(i) || m.Size != 1<<20 || len(m.Payload) != 1<<20 || m.Payload[0] != byte('0'+i) {
			t.Fatalf("message %d: offset %d, %d of %d bytes", i, m.Offset, len(m.Payload), m.Size)
		}
	}

	const small = 64 << 10
	s2 := speak(t, f, protocol.VersionMinor, small)
	msgs, pages = s2.browseAll(protocol.BrowseRequest{Queue: "fat", Partition: "Default", Start: protocol.BrowseLast, N: 3}, small)
	if len(msgs) != 3 || pages != 3 || msgs[0].Offset != 2 {
		t.Fatalf("64 KiB frames, last 3: %d messages in %d pages", len(msgs), pages)
	}
	for _, m := range msgs {
		if m.Size != 1<<20 || len(m.Payload) < 60<<10 || len(m.Payload) >= small || m.Payload[0] != byte('0'+m.Offset) {
			t.Fatalf("a cut message: offset %d, %d of %d bytes", m.Offset, len(m.Payload), m.Size)
		}
	}
	// With payloads cut to 100 bytes, the five come in one small page.
	var r protocol.BrowseReply
	if size := s2.call(&protocol.BrowseRequest{Queue: "fat", MaxPayload: 100}, &r); len(r.Messages) != 5 || r.More || size > 2000 {
		t.Fatalf("payloads cut to 100: %d messages, more %v, %d bytes", len(r.Messages), r.More, size)
	}

	// The largest message, with the longest names.
	long := strings.Repeat("n", engine.MaxNameBytes)
	largest := bytes.Repeat([]byte("L"), f.e.MaxPayloadBytes())
	res, err := f.e.Push(context.Background(), []engine.PushItem{{Queue: long, Partition: long, TransactionID: long, TraceID: long, Payload: largest}})
	if err != nil || res[0].Status != engine.Queued {
		t.Fatalf("push of the largest: %+v %v", res, err)
	}
	msgs, pages = s.browseAll(protocol.BrowseRequest{Queue: long}, frame)
	if len(msgs) != 1 || pages != 1 || int(msgs[0].Size) != len(largest) || !bytes.Equal(msgs[0].Payload, largest) || msgs[0].TraceID != long {
		t.Fatalf("the largest message: %d messages in %d pages, %d of %d bytes", len(msgs), pages, len(msgs[0].Payload), msgs[0].Size)
	}
}

// TestTCPBrowse: paging a queue's partitions with limits (0 and huge),
// refusals with their codes (and the connection stays open), and nothing
// leased: a pop afterwards gets the messages.
func TestTCPBrowse(t *testing.T) {
	f := newTCP(t)
	var items []engine.PushItem
	for i := 0; i < 10_050; i++ {
		items = append(items, engine.PushItem{Queue: "many", Partition: "p" + strconv.Itoa(i%3), Payload: []byte(strconv.Itoa(i))})
	}
	if _, err := f.e.Push(context.Background(), items); err != nil {
		t.Fatal(err)
	}
	s := speak(t, f, protocol.VersionMinor, protocol.DefaultMaxFrame)
	var r protocol.BrowseReply
	if s.call(&protocol.BrowseRequest{Queue: "many"}, &r); len(r.Messages) != engine.DefaultBrowsePage || !r.More || r.NextOffset != 100 {
		t.Fatalf("limit 0: %d messages, more %v, next %d", len(r.Messages), r.More, r.NextOffset)
	}
	if s.call(&protocol.BrowseRequest{Queue: "many", Limit: 1<<32 - 1}, &r); len(r.Messages) != engine.MaxBrowsePage || !r.More {
		t.Fatalf("limit 2^32-1: %d messages, more %v", len(r.Messages), r.More)
	}
	msgs, pages := s.browseAll(protocol.BrowseRequest{Queue: "many", Limit: 1000}, protocol.DefaultMaxFrame)
	if len(msgs) != 10_050 || pages != 11 || msgs[3350].Partition != "p1" || msgs[3350].Offset != 0 {
		t.Fatalf("all by 1000: %d messages in %d pages", len(msgs), pages)
	}
	for _, c := range []struct {
		req  protocol.BrowseRequest
		code protocol.Code
		msg  string
	}{
		{protocol.BrowseRequest{Queue: "nope"}, protocol.CodeQueueNotFound, `"nope"`},
		{protocol.BrowseRequest{Queue: "many", Partition: "nope"}, protocol.CodePartitionNotFound, "many/nope"},
		{protocol.BrowseRequest{Queue: "many", Start: protocol.BrowseLast}, protocol.CodeInvalid, "at least 1"},
		{protocol.BrowseRequest{Queue: "many", Start: 9}, protocol.CodeInvalid, "browse start"},
		{protocol.BrowseRequest{Queue: "many", Resume: protocol.UUID{1}}, protocol.CodeInvalid, "resume point"},
	} {
		if code, msg := s.browseErr(&c.req); code != c.code || !strings.Contains(msg, c.msg) {
			t.Errorf("%+v: %s %q, want %s %q", c.req, code, msg, c.code, c.msg)
		}
	}
	if _, err := f.e.ViewQueue("nope"); err == nil {
		t.Error("browsing created queue nope")
	}
	ms, err := f.c.Queue("many").Partition("p2").Batch(3).Pop(ctx5(t))
	if err != nil || texts(ms) != "2,5,8" {
		t.Fatalf("pop after browsing: %s %v", texts(ms), err)
	}
}
