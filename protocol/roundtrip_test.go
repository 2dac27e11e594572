package protocol

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// raceEnabled is set by race_test.go: the race detector allocates.
var raceEnabled bool

// TestRoundTrip encodes every sample as a frame, reads the frame back, and
// decodes its body into a new value and into a reused one.
func TestRoundTrip(t *testing.T) {
	for _, s := range samples() {
		t.Run(s.name, func(t *testing.T) {
			frame := frameOf(s.body)
			f, n, err := ReadFrame(frame, len(frame)+MinMaxFrame)
			if err != nil || n != len(frame) {
				t.Fatalf("ReadFrame: n=%d err=%v (frame %d bytes)", n, err, len(frame))
			}
			if f.Op != s.body.Op() || f.ID != 42 || f.IsReply() != s.body.IsReply() || f.IsError() {
				t.Fatalf("header %+v", f.Header)
			}
			got := newLike(s.body)
			if err := got.Decode(f.Body); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if d := equal(s.body, got); d != "" {
				t.Fatalf("decoded value differs: %s", d)
			}
			// Decoded values must not alias the input.
			for i := range frame {
				frame[i] = 0xA5
			}
			if d := equal(s.body, got); d != "" {
				t.Fatalf("decoded value changed with its input: %s", d)
			}
			// Re-encoding gives the same bytes.
			if !bytes.Equal(bodyOf(got), bodyOf(s.body)) {
				t.Fatal("re-encoding differs")
			}
		})
	}
}

// TestDecodeReuse decodes every sample into one value per type, one after
// the other (large after small and small after large), and checks each
// result against a fresh decode: nothing stale may survive.
func TestDecodeReuse(t *testing.T) {
	reused := map[string]Body{}
	ss := samples()
	// Twice over, so every sample also follows the maximal one.
	for _, s := range append(ss, ss...) {
		name := bodyName(s.body)
		r := reused[name]
		if r == nil {
			r = newLike(s.body)
			reused[name] = r
		}
		if err := r.Decode(bodyOf(s.body)); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if d := equal(s.body, r); d != "" {
			t.Fatalf("%s: reused decode differs: %s", s.name, d)
		}
	}
}

// TestDetach checks that strings decoded before Detach survive later
// decodes, and that without Detach the arena is reused.
func TestDetach(t *testing.T) {
	a := &PushRequest{Items: []PushItem{{Queue: "orders", Payload: []byte("one")}}}
	b := &PushRequest{Items: []PushItem{{Queue: "XXXXXX", Payload: []byte("two")}}}
	var r PushRequest
	if err := r.Decode(bodyOf(a)); err != nil {
		t.Fatal(err)
	}
	q, p := r.Items[0].Queue, r.Items[0].Payload
	r.Detach()
	if err := r.Decode(bodyOf(b)); err != nil {
		t.Fatal(err)
	}
	if q != "orders" || string(p) != "one" {
		t.Fatalf("detached values changed: %q %q", q, p)
	}
	if r.Items[0].Queue != "XXXXXX" {
		t.Fatalf("decode after detach: %q", r.Items[0].Queue)
	}
}

// TestPoison checks that Poison overwrites every string and payload a
// decode put in the arena, and that a value decodes normally after it.
func TestPoison(t *testing.T) {
	in := &AckRequest{Items: []AckItem{{TransactionID: "tx-1", Group: "g", Status: AckDLQ, Error: "first error"}}}
	var r AckRequest
	if err := r.Decode(bodyOf(in)); err != nil {
		t.Fatal(err)
	}
	txn, errText := r.Items[0].TransactionID, r.Items[0].Error
	r.Poison()
	for _, s := range []string{txn, errText} {
		if s != strings.Repeat("\xa5", len(s)) {
			t.Fatalf("after Poison a decoded string reads %q", s)
		}
	}
	if err := r.Decode(bodyOf(in)); err != nil || r.Items[0].Error != "first error" {
		t.Fatalf("decode after Poison: %q %v", r.Items[0].Error, err)
	}
}

// TestDecodePayloadCap checks that a decoded payload cannot be appended to
// over its neighbours in the arena.
func TestDecodePayloadCap(t *testing.T) {
	in := &PushRequest{Items: []PushItem{{Queue: "q", Payload: []byte("ab")}, {Queue: "q", Payload: []byte("cd")}}}
	var r PushRequest
	if err := r.Decode(bodyOf(in)); err != nil {
		t.Fatal(err)
	}
	_ = append(r.Items[0].Payload, 'Z')
	if string(r.Items[1].Payload) != "cd" || r.Items[1].Queue != "q" {
		t.Fatal("append to a payload overwrote the next field")
	}
}

// TestKnownLayouts pins a few encodings byte by byte, so that a change to
// the wire format shows up as a failing test and not only as a changed
// round trip.
func TestKnownLayouts(t *testing.T) {
	cases := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"ping", AppendPingRequest(nil, 1),
			[]byte{0, 0, 0, 10, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 1}},
		{"ping reply", AppendPingReply(nil, 0x0102030405060708),
			[]byte{0, 0, 0, 10, 0x02, 1, 1, 2, 3, 4, 5, 6, 7, 8}},
		{"hello", AppendHelloRequest(nil, 7, &HelloRequest{Major: 1, Minor: 2, ClientName: "go"}),
			[]byte{0, 0, 0, 17, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 1, 0, 2, 2, 'g', 'o'}},
		{"auth", AppendAuthRequest(nil, 1, &AuthRequest{Token: "t"}),
			[]byte{0, 0, 0, 12, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 't'}},
		{"error", AppendError(nil, OpPop, 9, CodeQueueNotFound, "q"),
			[]byte{0, 0, 0, 14, 0x11, 3, 0, 0, 0, 0, 0, 0, 0, 9, 0, 2, 1, 'q'}},
		{"push", AppendPushRequest(nil, 3, &PushRequest{Items: []PushItem{{Queue: "q", Payload: []byte{0xAB}}}}),
			[]byte{0, 0, 0, 18, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 3, 1, 1, 'q', 0, 0, 0, 1, 0xAB}},
		{"lease extend reply", AppendLeaseExtendReply(nil, 1, &LeaseExtendReply{Expires: -2}),
			[]byte{0, 0, 0, 18, 0x13, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}},
		{"browse", AppendBrowseRequest(nil, 2, &BrowseRequest{Queue: "q", Partition: "p", Start: BrowseLast, N: 300,
			Limit: 5, MaxPayload: 1, Resume: UUID{15: 9}, ResumeOffset: 7}),
			append([]byte{0, 0, 0, 36, 0x2A, 0, 0, 0, 0, 0, 0, 0, 0, 2, 1, 'q', 1, 'p', 1, 0xac, 0x02, 5, 1},
				0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 7)},
		{"browse reply", AppendBrowseReply(nil, 2, &BrowseReply{Queue: "q",
			Messages: []BrowseMessage{{TransactionID: "t", CreatedAt: 1, Partition: "p", Offset: 4, Size: 2, Payload: []byte{0xAB}}},
			Gaps:     []BrowseGap{{Before: 1, Partition: "p", First: 5, Last: 6, Reason: GapDeleted}}, More: true, NextOffset: 8}),
			[]byte{0, 0, 0, 104, 0x2A, 1, 0, 0, 0, 0, 0, 0, 0, 2, 1, 'q',
				1, // one message
				0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 't', 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 'p',
				0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 2, 1, 0xAB, 0,
				1, // one gap
				1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 'p', 5, 6, 4,
				1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8}},
	}
	for _, c := range cases {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("%s:\n got % x\nwant % x", c.name, c.got, c.want)
		}
	}
}

// TestAppendKeepsPrefix checks that encoders append after what dst holds
// and patch only their own frame's length.
func TestAppendKeepsPrefix(t *testing.T) {
	dst := []byte("prefix")
	dst = AppendPingRequest(dst, 1)
	dst = AppendPushRequest(dst, 2, &PushRequest{Items: []PushItem{{Queue: "q"}}})
	if string(dst[:6]) != "prefix" {
		t.Fatal("prefix overwritten")
	}
	b := dst[6:]
	for id := uint64(1); id <= 2; id++ {
		f, n, err := ReadFrame(b, 0)
		if err != nil || f.ID != id {
			t.Fatalf("frame %d: %+v %v", id, f.Header, err)
		}
		b = b[n:]
	}
	if len(b) != 0 {
		t.Fatalf("%d bytes left", len(b))
	}
}

// TestNamedEncoders checks that every Append<Type> function writes the same
// frame as AppendFrame.
func TestNamedEncoders(t *testing.T) {
	push := &PushRequest{Items: []PushItem{{Queue: "q", Payload: []byte("x")}}}
	cases := []struct {
		got  []byte
		body Body
	}{
		{AppendHelloRequest(nil, 5, &HelloRequest{Major: 1}), &HelloRequest{Major: 1}},
		{AppendHelloReply(nil, 5, &HelloReply{MaxFrame: 9}), &HelloReply{MaxFrame: 9}},
		{AppendPingRequest(nil, 5), &PingRequest{}},
		{AppendPingReply(nil, 5), &PingReply{}},
		{AppendAuthRequest(nil, 5, &AuthRequest{Token: "t"}), &AuthRequest{Token: "t"}},
		{AppendAuthReply(nil, 5, &AuthReply{Enforced: true, Role: RoleAdmin}), &AuthReply{Enforced: true, Role: RoleAdmin}},
		{AppendPushRequest(nil, 5, push), push},
		{AppendPushReply(nil, 5, &PushReply{}), &PushReply{}},
		{AppendPopRequest(nil, 5, &PopRequest{Queue: "q"}), &PopRequest{Queue: "q"}},
		{AppendPopReply(nil, 5, &PopReply{Queue: "q"}), &PopReply{Queue: "q"}},
		{AppendAckRequest(nil, 5, &AckRequest{}), &AckRequest{}},
		{AppendAckReply(nil, 5, &AckReply{}), &AckReply{}},
		{AppendLeaseExtendRequest(nil, 5, &LeaseExtendRequest{DurationMs: 1}), &LeaseExtendRequest{DurationMs: 1}},
		{AppendLeaseExtendReply(nil, 5, &LeaseExtendReply{}), &LeaseExtendReply{}},
		{AppendTransactionRequest(nil, 5, &TransactionRequest{}), &TransactionRequest{}},
		{AppendTransactionReply(nil, 5, &TransactionReply{}), &TransactionReply{}},
		{AppendConfigureRequest(nil, 5, &ConfigureRequest{Queue: "q"}), &ConfigureRequest{Queue: "q"}},
		{AppendConfigureReply(nil, 5, &ConfigureReply{}), &ConfigureReply{}},
		{AppendQueueInfoRequest(nil, 5, &QueueInfoRequest{Queue: "q"}), &QueueInfoRequest{Queue: "q"}},
		{AppendQueueInfoReply(nil, 5, &QueueInfoReply{}), &QueueInfoReply{}},
		{AppendQueueListRequest(nil, 5), &QueueListRequest{}},
		{AppendQueueListReply(nil, 5, &QueueListReply{}), &QueueListReply{}},
		{AppendDeleteQueueRequest(nil, 5, &DeleteQueueRequest{Queue: "q"}), &DeleteQueueRequest{Queue: "q"}},
		{AppendDeleteQueueReply(nil, 5, &DeleteQueueReply{Existed: true}), &DeleteQueueReply{Existed: true}},
		{AppendSeekRequest(nil, 5, &SeekRequest{ToEnd: true}), &SeekRequest{ToEnd: true}},
		{AppendSeekReply(nil, 5, &SeekReply{}), &SeekReply{}},
		{AppendDeleteGroupRequest(nil, 5, &DeleteGroupRequest{Group: "g"}), &DeleteGroupRequest{Group: "g"}},
		{AppendDeleteGroupReply(nil, 5, &DeleteGroupReply{}), &DeleteGroupReply{}},
		{AppendDLQListRequest(nil, 5, &DLQListRequest{Limit: 3}), &DLQListRequest{Limit: 3}},
		{AppendDLQListReply(nil, 5, &DLQListReply{}), &DLQListReply{}},
		{AppendStatsRequest(nil, 5), &StatsRequest{}},
		{AppendStatsReply(nil, 5, &StatsReply{}), &StatsReply{}},
		{AppendDLQRedriveRequest(nil, 5, &DLQRedriveRequest{DLQSelect: DLQSelect{Queue: "q"}}), &DLQRedriveRequest{DLQSelect: DLQSelect{Queue: "q"}}},
		{AppendDLQRedriveReply(nil, 5, &DLQRedriveReply{}), &DLQRedriveReply{}},
		{AppendDLQPurgeRequest(nil, 5, &DLQPurgeRequest{}), &DLQPurgeRequest{}},
		{AppendDLQPurgeReply(nil, 5, &DLQPurgeReply{Purged: 2}), &DLQPurgeReply{Purged: 2}},
		{AppendBrowseRequest(nil, 5, &BrowseRequest{Queue: "q", N: 3}), &BrowseRequest{Queue: "q", N: 3}},
		{AppendBrowseReply(nil, 5, &BrowseReply{Queue: "q"}), &BrowseReply{Queue: "q"}},
		{AppendQueryRegisterRequest(nil, 5, &QueryRegisterRequest{Name: "n"}), &QueryRegisterRequest{Name: "n"}},
		{AppendQueryRegisterReply(nil, 5, &QueryRegisterReply{Fresh: true}), &QueryRegisterReply{Fresh: true}},
		{AppendCycleRequest(nil, 5, &CycleRequest{HasAck: true}), &CycleRequest{HasAck: true}},
		{AppendCycleReply(nil, 5, &CycleReply{Queue: "q"}), &CycleReply{Queue: "q"}},
		{AppendStateGetRequest(nil, 5, &StateGetRequest{Prefix: "p"}), &StateGetRequest{Prefix: "p"}},
		{AppendStateGetReply(nil, 5, &StateGetReply{}), &StateGetReply{}},
		{AppendMetadataRequest(nil, 5), &MetadataRequest{}},
		{AppendMetadataReply(nil, 5, &MetadataReply{Cluster: "c"}), &MetadataReply{Cluster: "c"}},
		{AppendRaftRequest(nil, 5, &RaftRequest{From: 2, Msgs: []RaftMessage{{Shard: 7, Data: []byte{1, 2}}}}),
			&RaftRequest{From: 2, Msgs: []RaftMessage{{Shard: 7, Data: []byte{1, 2}}}}},
		{AppendRaftReply(nil, 5), &RaftReply{}},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		seen[bodyName(c.body)] = true
		if want := AppendFrame(nil, 5, c.body); !bytes.Equal(c.got, want) {
			t.Errorf("%s: named encoder differs from AppendFrame", bodyName(c.body))
		}
	}
	for _, b := range allBodies() {
		if !seen[bodyName(b)] {
			t.Errorf("%s has no named encoder case", bodyName(b))
		}
	}
}

// TestRegistry checks NewRequest and NewReply against the opcode list.
func TestRegistry(t *testing.T) {
	for _, op := range Ops() {
		req, rep := NewRequest(op), NewReply(op)
		if req == nil || rep == nil {
			t.Fatalf("%v: no body type", op)
		}
		if req.Op() != op || rep.Op() != op || req.IsReply() || !rep.IsReply() {
			t.Errorf("%v: %s/%s report op %v/%v reply %v/%v", op, bodyName(req), bodyName(rep),
				req.Op(), rep.Op(), req.IsReply(), rep.IsReply())
		}
		if !strings.HasSuffix(bodyName(req), "Request") || !strings.HasSuffix(bodyName(rep), "Reply") {
			t.Errorf("%v: odd type names %s/%s", op, bodyName(req), bodyName(rep))
		}
		if _, ok := req.(interface{ Detach() }); !ok {
			t.Errorf("%s has no Detach", bodyName(req))
		}
		if _, ok := rep.(interface{ Detach() }); !ok {
			t.Errorf("%s has no Detach", bodyName(rep))
		}
	}
	if NewRequest(0) != nil || NewReply(0xff) != nil {
		t.Error("unknown opcodes give bodies")
	}
	if n := len(Ops()); n != 24 {
		t.Errorf("%d opcodes", n)
	}
}

// TestDecodeAllocs checks that decoding into a reused value does not
// allocate once the value has seen a body as large.
func TestDecodeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, s := range samples() {
		if !strings.HasSuffix(s.name, "/max") {
			continue
		}
		body := bodyOf(s.body)
		v := newLike(s.body)
		if err := v.Decode(body); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(20, func() { _ = v.Decode(body) }); n != 0 {
			t.Errorf("%s: %v allocs per decode", s.name, n)
		}
		dst := make([]byte, 0, len(body)+HeaderSize)
		if n := testing.AllocsPerRun(20, func() { dst = AppendFrame(dst[:0], 1, v) }); n != 0 {
			t.Errorf("%s: %v allocs per encode", s.name, n)
		}
	}
}

// TestFieldsCovered guards the filler: a maximal sample must have every
// exported field non-zero, so that TestRoundTrip covers every field.
func TestFieldsCovered(t *testing.T) {
	for _, s := range samples() {
		if !strings.HasSuffix(s.name, "/max") {
			continue
		}
		if p := zeroField(reflect.ValueOf(s.body).Elem(), bodyName(s.body)); p != "" {
			t.Errorf("%s: field %s is zero", s.name, p)
		}
	}
}

func zeroField(v reflect.Value, path string) string {
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				if p := zeroField(v.Field(i), path+"."+v.Type().Field(i).Name); p != "" {
					return p
				}
			}
		}
		return ""
	case reflect.Slice:
		if v.Len() == 0 {
			return path
		}
		return zeroField(v.Index(0), path+"[0]")
	}
	if v.IsZero() {
		return path
	}
	return ""
}

// TestArenaShrinks checks that a value gives back an arena far larger than
// the bodies it now decodes.
func TestArenaShrinks(t *testing.T) {
	var r PushRequest
	if err := r.Decode(bodyOf(&PushRequest{Items: []PushItem{{Queue: "q", Payload: make([]byte, 4<<20)}}})); err != nil {
		t.Fatal(err)
	}
	small := bodyOf(&PushRequest{Items: []PushItem{{Queue: "q", Payload: []byte("x")}}})
	if err := r.Decode(small); err != nil {
		t.Fatal(err)
	}
	if c := cap(r.arena.buf); c > 1<<20 {
		t.Fatalf("arena kept %d bytes", c)
	}
}

// TestPopReplyStreaming: a reply encoded message by message is the same
// frame as AppendPopReply's.
func TestPopReplyStreaming(t *testing.T) {
	for _, s := range samples() {
		r, ok := s.body.(*PopReply)
		if !ok {
			continue
		}
		dst, start := AppendPopReplyStart([]byte("prefix"), 9, r.Queue, r.Group, len(r.Messages))
		for i := range r.Messages {
			dst = AppendPopMessage(dst, &r.Messages[i])
		}
		if r.Cut {
			dst = AppendPopReplyCut(dst)
		}
		PatchLength(dst, start)
		if want := AppendPopReply([]byte("prefix"), 9, r); !bytes.Equal(dst, want) {
			t.Fatalf("%s: streamed frame differs", s.name)
		}
	}
}

// TestRequestStreaming: push and ack requests begun with
// Append{Push,Ack}RequestStart, encoded item by item (as the client does) and
// patched are the same frames as AppendPushRequest's and AppendAckRequest's.
// Both share the item encoders, so this checks the header, count and length;
// TestRoundTrip checks the items themselves.
func TestRequestStreaming(t *testing.T) {
	push, ack := 0, 0
	for _, s := range samples() {
		var got, want []byte
		switch r := s.body.(type) {
		case *PushRequest:
			push++
			dst, start := AppendPushRequestStart([]byte("prefix"), 9, len(r.Items))
			for i := range r.Items {
				it := &r.Items[i]
				dst = AppendPushItem(dst, it.Queue, it.Partition, it.TransactionID, it.TraceID, it.Payload)
			}
			PatchLength(dst, start)
			got, want = dst, AppendPushRequest([]byte("prefix"), 9, r)
		case *AckRequest:
			ack++
			dst, start := AppendAckRequestStart([]byte("prefix"), 9, len(r.Items))
			for i := range r.Items {
				dst = AppendAckItem(dst, &r.Items[i])
			}
			PatchLength(dst, start)
			got, want = dst, AppendAckRequest([]byte("prefix"), 9, r)
		default:
			continue
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: streamed frame differs", s.name)
		}
	}
	if push == 0 || ack == 0 {
		t.Fatalf("samples hold %d push and %d ack requests", push, ack)
	}
}

// TestPageFieldsAreTrailing: the 1.2 page fields of QueueInfo and
// QueueList are trailing fields: a request or reply that does not use them
// is byte for byte what 1.1 sends, so a 1.1 peer reads it.
func TestPageFieldsAreTrailing(t *testing.T) {
	v11 := appendStr(nil, "q")
	if b := bodyOf(&QueueInfoRequest{Queue: "q"}); !bytes.Equal(b, v11) {
		t.Errorf("QueueInfoRequest without a page: % x, want the 1.1 body % x", b, v11)
	}
	paged := bodyOf(&QueueInfoRequest{Queue: "q", Limit: 5})
	if want := append(append(append([]byte(nil), v11...), make([]byte, 16)...), 5); !bytes.Equal(paged, want) {
		t.Errorf("QueueInfoRequest with a limit: % x, want % x", paged, want)
	}
	if b := bodyOf(&QueueListRequest{}); len(b) != 0 {
		t.Errorf("QueueListRequest without a page: % x, want the empty 1.1 body", b)
	}
	reply := &QueueInfoReply{QueueSummary: QueueSummary{Name: "q"}, Partitions: []PartitionInfo{{Name: "p"}}}
	last := bodyOf(reply)
	reply.More = true
	if more := bodyOf(reply); !bytes.Equal(more, append(last, 1)) {
		t.Errorf("QueueInfoReply.More is not one trailing byte")
	}
	var got QueueInfoReply
	if err := got.Decode(last); err != nil || got.More {
		t.Errorf("a 1.1 reply decodes as More=%v: %v", got.More, err)
	}
	list := bodyOf(&QueueListReply{Queues: []QueueSummary{{Name: "q"}}})
	var gotList QueueListReply
	if err := gotList.Decode(append(list, 1)); err != nil || !gotList.More {
		t.Errorf("QueueListReply with More: %v %v", gotList.More, err)
	}
}

// TestLostOffsetsTravelAfterThePartitions: PartitionInfo.Lost (offsets lost
// to journal damage) comes back from QueueInfoReply for the partitions that
// have some, in the 1.2 tail, with More as it was; a reply without lost
// offsets and without More is the 1.1 body; a decoded reply reused for one
// without lost offsets keeps none; a tail naming a partition outside the
// page, or one twice, is malformed.
func TestLostOffsetsTravelAfterThePartitions(t *testing.T) {
	lost := []OffsetRange{{First: 3, Last: 9}, {First: 12, Last: 12}}
	for _, more := range []bool{false, true} {
		reply := &QueueInfoReply{QueueSummary: QueueSummary{Name: "q"}, More: more,
			Partitions: []PartitionInfo{{Name: "a"}, {Name: "b", Lost: lost}, {Name: "c"}}}
		var got QueueInfoReply
		if err := got.Decode(bodyOf(reply)); err != nil {
			t.Fatal(err)
		}
		if got.More != more || len(got.Partitions) != 3 || len(got.Partitions[0].Lost)+len(got.Partitions[2].Lost) != 0 ||
			!reflect.DeepEqual(got.Partitions[1].Lost, lost) {
			t.Fatalf("more=%v: decoded %+v", more, got)
		}
		if err := got.Decode(bodyOf(&QueueInfoReply{Partitions: []PartitionInfo{{Name: "a"}, {Name: "b"}}})); err != nil || len(got.Partitions[1].Lost) != 0 {
			t.Fatalf("reused for a reply without lost offsets: %+v %v", got.Partitions, err)
		}
	}
	base := bodyOf(&QueueInfoReply{Partitions: []PartitionInfo{{Name: "a"}}})
	for name, tail := range map[string][]byte{
		"outside the page": {0, 1, 1, 1, 0, 0},
		"twice":            {0, 2, 0, 1, 0, 0, 0, 1, 0, 0},
		"not a bool":       {2},
	} {
		var got QueueInfoReply
		if err := got.Decode(append(append([]byte(nil), base...), tail...)); err == nil {
			t.Errorf("a tail with a partition %s decodes: %+v", name, got)
		}
	}
}
