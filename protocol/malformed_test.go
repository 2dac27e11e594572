package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// decodeSafely decodes body into v and turns a panic into a test failure.
func decodeSafely(t *testing.T, v Body, body []byte) (err error) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("%s: Decode panicked on % x: %v", bodyName(v), body, p)
		}
	}()
	return v.Decode(body)
}

// TestTruncatedBodies cuts every sample's body at every point: each strict
// prefix must be refused with a malformed error, never accepted, never a
// panic; except a prefix that is itself the whole encoding of what it
// decodes to (a body without a field added by a later minor version, such
// as HelloRequest.MaxFrame; for QueueListRequest, whose 1.1 body is empty,
// the empty prefix).
func TestTruncatedBodies(t *testing.T) {
	for _, s := range samples() {
		body := bodyOf(s.body)
		v := newLike(s.body)
		for i := 0; i < len(body); i++ {
			// A copy of exactly i bytes, so reading past it would fault.
			cut := append([]byte(nil), body[:i]...)
			err := decodeSafely(t, v, cut)
			if err == nil && bytes.Equal(bodyOf(v), cut) {
				continue // an earlier minor version's whole body
			}
			if err == nil {
				t.Fatalf("%s: prefix of %d/%d bytes accepted", s.name, i, len(body))
			}
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s: prefix %d: %v is not ErrMalformed", s.name, i, err)
			}
		}
	}
}

// TestTrailingBytes checks that bytes after the last field are refused.
func TestTrailingBytes(t *testing.T) {
	for _, s := range samples() {
		body := append(bodyOf(s.body), 0)
		err := decodeSafely(t, newLike(s.body), body)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "trailing") {
			t.Fatalf("%s: trailing byte: %v", s.name, err)
		}
	}
}

// TestGarbage feeds random bytes, and samples with random bytes flipped, to
// every decoder: errors are fine, panics are not, and whatever decodes must
// re-encode and decode to the same value.
func TestGarbage(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	ss := samples()
	for i := 0; i < 20000; i++ {
		s := ss[rnd.IntN(len(ss))]
		var in []byte
		if i%2 == 0 {
			in = make([]byte, rnd.IntN(200))
			for j := range in {
				in[j] = byte(rnd.UintN(256))
			}
		} else {
			in = bodyOf(s.body)
			for k := 0; k < 1+rnd.IntN(3) && len(in) > 0; k++ {
				in[rnd.IntN(len(in))] ^= byte(1 + rnd.UintN(255))
			}
		}
		v := newLike(s.body)
		if decodeSafely(t, v, in) == nil {
			checkReencode(t, v)
		}
	}
}

// checkReencode re-encodes a decoded value, decodes that into a new value
// and into the same one, and requires all three to agree.
func checkReencode(t *testing.T, v Body) {
	t.Helper()
	enc := bodyOf(v)
	w := newLike(v)
	if err := w.Decode(enc); err != nil {
		t.Fatalf("%s: re-encoding of a decoded value does not decode: %v", bodyName(v), err)
	}
	if d := equal(v, w); d != "" {
		t.Fatalf("%s: re-decoded value differs: %s", bodyName(v), d)
	}
	if enc2 := bodyOf(w); string(enc2) != string(enc) {
		t.Fatalf("%s: second encoding differs", bodyName(v))
	}
	if err := v.Decode(enc); err != nil {
		t.Fatalf("%s: decoding into the same value: %v", bodyName(v), err)
	}
	if d := equal(v, w); d != "" {
		t.Fatalf("%s: decoding into the same value differs: %s", bodyName(v), d)
	}
}

// TestForgedCounts sends bodies whose element counts claim far more than
// the body holds: they must be refused before anything is allocated for
// them.
func TestForgedCounts(t *testing.T) {
	huge := binary.AppendUvarint(nil, 1<<40)
	cases := []struct {
		v    Body
		body []byte
	}{
		{&PushRequest{}, huge},
		{&PushReply{}, huge},
		{&AckRequest{}, huge},
		{&AckReply{}, huge},
		{&TransactionRequest{}, huge},
		{&TransactionReply{}, append([]byte{0, 0, 0}, huge...)},
		{&PopReply{}, append([]byte{0, 0}, huge...)},
		{&QueueListReply{}, huge},
		{&DLQListReply{}, append([]byte{0}, huge...)},
		{&StatsReply{}, append(make([]byte, 11), huge...)},
		// A count that fits the body only if elements were 1 byte long.
		{&PushRequest{}, append(binary.AppendUvarint(nil, 100), make([]byte, 100)...)},
		{&PopReply{}, append([]byte{0, 0, 50}, make([]byte, 50*minMessage-1)...)},
	}
	for _, c := range cases {
		err := decodeSafely(t, c.v, c.body)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "count beyond body") {
			t.Errorf("%s: %v", bodyName(c.v), err)
		}
		if !raceEnabled {
			v := newLike(c.v)
			if a := testing.AllocsPerRun(10, func() { _ = v.Decode(c.body) }); a > 3 {
				t.Errorf("%s: %v allocations for a forged count", bodyName(c.v), a)
			}
		}
	}
	// A string length beyond the body.
	var r HelloRequest
	if err := r.Decode([]byte{0, 1, 0, 0, 0xff, 0xff, 0x03}); err == nil || !strings.Contains(err.Error(), "length beyond body") {
		t.Errorf("string length: %v", err)
	}
}

func TestBadValues(t *testing.T) {
	pop := bodyOf(&PopRequest{Queue: "q"})
	badBool := append([]byte(nil), pop...)
	badBool[len(badBool)-3] = 2 // autoAck (namespace and task, empty, follow it)
	cases := []struct {
		name string
		v    Body
		body []byte
		why  string
	}{
		{"bool 2", &PopRequest{}, badBool, "bool"},
		{"uv32 overflow", &HelloReply{}, append([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0}, binary.AppendUvarint(nil, 1<<32)...), "32 bits"},
		{"varint overflow", &SeekReply{}, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, "overflow"},
		{"undefined option bits", &ConfigureRequest{}, append([]byte{1, 'q'}, binary.AppendUvarint(nil, uint64(OptAll)+1)...), "option bits"},
		{"priority above int32", &ConfigureRequest{}, priorityBody(1 << 40), "32 bits"},
		{"empty body with bytes", &PingRequest{}, []byte{0}, "must be empty"},
	}
	for _, c := range cases {
		err := decodeSafely(t, c.v, c.body)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// priorityBody is a configure request whose priority is p.
func priorityBody(p int64) []byte {
	b := appendStr(nil, "q")
	b = appendUv(b, 0)
	for range 7 {
		b = appendUv(b, 0)
	}
	b = appendBool(b, false)
	for range 3 {
		b = appendUv(b, 0)
	}
	b = appendSv(b, p)
	b = append(b, 0, 0, 0)
	b = appendUv(b, 0)
	b = appendStr(b, "")
	return appendStr(b, "")
}

// TestUnknownEnumsDecode checks that decoders leave enum checks to the
// receiver: an undefined status decodes, and Valid says no.
func TestUnknownEnumsDecode(t *testing.T) {
	in := &AckRequest{Items: []AckItem{{Status: 9}}}
	var r AckRequest
	if err := r.Decode(bodyOf(in)); err != nil || r.Items[0].Status.Valid() {
		t.Fatalf("%v %v", err, r.Items[0].Status.Valid())
	}
	var c ConfigureRequest
	if err := c.Decode(priorityBody(-5)); err != nil || c.Options.Priority != -5 {
		t.Fatalf("priority body: %v %d", err, c.Options.Priority)
	}
}
