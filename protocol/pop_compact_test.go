package protocol

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"unsafe"
)

// compactSample is a reply whose messages exercise every choice of the
// compact layout: an id's text and an explicit transactionId, the same
// partition and a new one (and back to the first, which is sent again), the
// same lease and a new one, no lease (autoAck), extreme numbers.
func compactSample() *PopReply {
	p1, p2 := UUID{1, 1}, UUID{2, 2}
	l1, l2 := UUID{9, 1}, UUID{9, 2}
	return &PopReply{Queue: "orders.eu", Group: "billing", Cut: true, Messages: []Message{
		{ID: UUID{0xa1}, TransactionID: "", TraceID: "t1", Payload: []byte("one"), CreatedAt: 1, Partition: "p-é", PartitionID: p1, Offset: 7, LeaseID: l1, LeaseExpires: 100, RetryCount: 0},
		{ID: UUID{0xa2}, TransactionID: "order-2", Payload: []byte("two"), CreatedAt: 2, Partition: "p-é", PartitionID: p1, Offset: 8, LeaseID: l1, LeaseExpires: 100, RetryCount: 3},
		{ID: UUID{0xa3}, Payload: nil, CreatedAt: -5, Partition: "second", PartitionID: p2, Offset: math.MaxUint64, LeaseID: l1, LeaseExpires: 100, RetryCount: math.MaxUint32},
		{ID: UUID{0xa4}, TransactionID: strings.Repeat("x", 300), Payload: bytes.Repeat([]byte{0}, 1000), Partition: "p-é", PartitionID: p1, Offset: 9, LeaseID: l2, LeaseExpires: 200},
		{ID: UUID{0xa5}, Partition: "p-é", PartitionID: p1, Offset: 10, LeaseID: l2, LeaseExpires: 201},
		{ID: UUID{0xa6}, Partition: "", PartitionID: p1, Offset: 11}, // another name for the same id: sent again
		{ID: UUID{0xa7}, Partition: "", PartitionID: p1, Offset: 12}, // no lease, as the one before
	}}
}

// withIDTexts is what a compact reply decodes to: an empty transactionId
// reads as the id's text, as the 1.4 layout sends it.
func withIDTexts(r *PopReply) *PopReply {
	out := *r
	out.compact, out.arena = false, arena{}
	out.Messages = append([]Message(nil), r.Messages...)
	for i := range out.Messages {
		if out.Messages[i].TransactionID == "" {
			out.Messages[i].TransactionID = out.Messages[i].ID.String()
		}
	}
	return &out
}

// TestCompactPopReplyRoundTrip: a compact reply decodes to the messages the
// 1.4 layout carries, in fewer bytes, into an arena that does not grow.
func TestCompactPopReplyRoundTrip(t *testing.T) {
	r := compactSample()
	r.SetCompact(true)
	body := r.AppendBody(nil)
	var got PopReply
	got.SetCompact(true)
	if err := got.Decode(body); err != nil {
		t.Fatal(err)
	}
	want := withIDTexts(r)
	if d := equal(want, &got); d != "" {
		t.Fatalf("compact reply decodes differently: %s", d)
	}
	// The 1.4 layout of the same messages decodes to the same values.
	var full PopReply
	if err := full.Decode(want.AppendBody(nil)); err != nil {
		t.Fatal(err)
	}
	if d := equal(&full, &got); d != "" {
		t.Fatalf("compact and 1.4 layouts differ: %s", d)
	}
	checkInArena(t, &got)

	// Decoded into a value that held a larger reply before.
	big := &PopReply{Queue: "q", Messages: make([]Message, 50)}
	for i := range big.Messages {
		big.Messages[i] = Message{ID: UUID{byte(i)}, Payload: bytes.Repeat([]byte("z"), 4000), Partition: "p"}
	}
	big.SetCompact(true)
	var reused PopReply
	reused.SetCompact(true)
	if err := reused.Decode(big.AppendBody(nil)); err != nil {
		t.Fatal(err)
	}
	if err := reused.Decode(body); err != nil {
		t.Fatal(err)
	}
	if d := equal(want, &reused); d != "" {
		t.Fatalf("reused decode differs: %s", d)
	}
}

// TestCompactPopReplySmaller: a batch from one partition under one lease,
// pushed without transactionIds (the common pop), leaves out the id's text,
// the partition and the lease of every message but the first.
func TestCompactPopReplySmaller(t *testing.T) {
	r := &PopReply{Queue: "q", Group: "g", Messages: make([]Message, 100)}
	for i := range r.Messages {
		r.Messages[i] = Message{ID: UUID{byte(i), 7}, Payload: bytes.Repeat([]byte("p"), 128), CreatedAt: int64(i),
			Partition: "p3", PartitionID: UUID{3}, Offset: uint64(1000 + i), LeaseID: UUID{4}, LeaseExpires: 99}
	}
	full := withIDTexts(r).AppendBody(nil)
	r.SetCompact(true)
	compact := r.AppendBody(nil)
	// Per message: the id's text (36 bytes and its length, less the tag),
	// the partition (3 + 16 bytes, less the tag) and the lease (24 bytes).
	if saved, least := len(full)-len(compact), 99*(36+18+24); saved < least {
		t.Fatalf("compact %d bytes, 1.4 layout %d: saved %d, want at least %d", len(compact), len(full), saved, least)
	}
	t.Logf("100 messages of 128 bytes: %d bytes compact, %d in the 1.4 layout", len(compact), len(full))
}

// TestCompactPopReplyStreaming: a reply encoded message by message (as the
// server does) is the same frame as AppendPopReply's.
func TestCompactPopReplyStreaming(t *testing.T) {
	r := compactSample()
	r.SetCompact(true)
	dst, start := AppendPopReplyStart([]byte("prefix"), 9, r.Queue, r.Group, len(r.Messages))
	for i := range r.Messages {
		var prev *Message
		if i > 0 {
			prev = &r.Messages[i-1]
		}
		dst = AppendPopMessageCompact(dst, &r.Messages[i], prev)
	}
	dst = AppendPopReplyCut(dst)
	PatchLength(dst, start)
	if want := AppendPopReply([]byte("prefix"), 9, r); !bytes.Equal(dst, want) {
		t.Fatal("streamed compact frame differs")
	}
}

// TestCompactPopReplyMalformed: what cannot be a compact reply is refused
// with ErrMalformed, never a panic or a value read from nowhere.
func TestCompactPopReplyMalformed(t *testing.T) {
	head := func(n byte) []byte { return []byte{1, 'q', 1, 'g', n} }
	msg := func(txnTag, partTag byte, retryTag uint64) []byte {
		b := appendUUID(nil, UUID{1})
		b = append(b, txnTag, 0, 0)
		b = appendI64(b, 5)
		b = append(b, partTag)
		if partTag != 0 {
			b = append(b, make([]byte, int(partTag)-1)...)
			b = appendUUID(b, UUID{2})
		}
		b = append(b, 3)
		b = appendUv(b, retryTag)
		if retryTag&1 == 0 {
			b = appendUUID(b, UUID{4})
			b = appendI64(b, 6)
		}
		return b
	}
	ok := append(head(1), msg(0, 2, 2)...)
	var r PopReply
	r.SetCompact(true)
	if err := r.Decode(ok); err != nil || r.Messages[0].TransactionID != (UUID{1}).String() || r.Messages[0].RetryCount != 1 {
		t.Fatalf("the well-formed body: %v %+v", err, r.Messages)
	}
	for name, body := range map[string][]byte{
		"first repeats a partition":  append(head(1), msg(0, 0, 2)...),
		"first repeats a lease":      append(head(1), msg(0, 2, 3)...),
		"retry count beyond 32 bits": append(head(1), msg(0, 2, uint64(math.MaxUint32+1)<<1)...),
		"transactionId beyond body":  append(head(1), msg(200, 2, 2)...),
		"count beyond body":          append(head(3), msg(0, 2, 2)...),
		"trailing bytes":             append(append(head(1), msg(0, 2, 2)...), 7),
		"truncated":                  ok[:len(ok)-1],
	} {
		var r PopReply
		r.SetCompact(true)
		if err := r.Decode(body); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

// checkInArena: every string and payload of r lies in its arena (decoding
// never grew it into a second array).
func checkInArena(t *testing.T, r *PopReply) {
	t.Helper()
	buf := r.arena.buf[:cap(r.arena.buf)]
	if len(buf) == 0 {
		return
	}
	lo, hi := uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&buf[0]))+uintptr(len(buf))
	in := func(what string, p *byte, n int) {
		if n == 0 {
			return
		}
		if a := uintptr(unsafe.Pointer(p)); a < lo || a+uintptr(n) > hi {
			t.Fatalf("%s is outside the arena", what)
		}
	}
	in("queue", unsafe.StringData(r.Queue), len(r.Queue))
	for i := range r.Messages {
		m := &r.Messages[i]
		in("transactionId", unsafe.StringData(m.TransactionID), len(m.TransactionID))
		in("partition", unsafe.StringData(m.Partition), len(m.Partition))
		in("traceId", unsafe.StringData(m.TraceID), len(m.TraceID))
		if len(m.Payload) > 0 {
			in("payload", &m.Payload[0], len(m.Payload))
		}
	}
}

// FuzzPopReplyCompact: any body either decodes, and then encodes and
// decodes again to the same value within its arena, or is refused as
// malformed.
func FuzzPopReplyCompact(f *testing.F) {
	r := compactSample()
	r.SetCompact(true)
	f.Add(r.AppendBody(nil))
	f.Add([]byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		var v PopReply
		v.SetCompact(true)
		err := v.Decode(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("decode error %v is not ErrMalformed", err)
			}
			return
		}
		checkInArena(t, &v)
		enc := v.AppendBody(nil)
		var w PopReply
		w.SetCompact(true)
		if err := w.Decode(enc); err != nil {
			t.Fatalf("re-encoding does not decode: %v", err)
		}
		if d := equal(&v, &w); d != "" {
			t.Fatalf("re-decoded value differs: %s", d)
		}
	})
}
