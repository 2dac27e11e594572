package protocol

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"unsafe"
)

// UUID is a 16-byte identifier (message, partition, queue and lease ids),
// sent as 16 raw bytes. It has the same layout as the engine's UUID, so the
// server converts between them with a plain conversion.
type UUID [16]byte

// IsZero reports whether u is all zeros (no id).
func (u UUID) IsZero() bool { return u == UUID{} }

// String formats u as 8-4-4-4-12 hex digits.
func (u UUID) String() string {
	var b [36]byte
	u.text(&b)
	return string(b[:])
}

// text writes u as String does into b.
func (u UUID) text(b *[36]byte) {
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
}

// Encoding primitives. Every body is a sequence of these:
//
//	u8, u16, u32, i64   fixed width, big-endian (i64 is two's complement)
//	uv                  unsigned LEB128 varint (encoding/binary's Uvarint)
//	sv                  zig-zag signed varint (encoding/binary's Varint)
//	bool                u8, 0 or 1 (other values are malformed)
//	str, bytes          uv length, then that many bytes
//	uuid                16 raw bytes

func appendU16(dst []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(dst, v) }
func appendU32(dst []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(dst, v) }
func appendI64(dst []byte, v int64) []byte  { return binary.BigEndian.AppendUint64(dst, uint64(v)) }
func appendUv(dst []byte, v uint64) []byte  { return binary.AppendUvarint(dst, v) }
func appendSv(dst []byte, v int64) []byte   { return binary.AppendVarint(dst, v) }
func appendUUID(dst []byte, u UUID) []byte  { return append(dst, u[:]...) }

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func appendStr(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst []byte, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// arena is the byte store that a decoded value's strings and payloads live
// in. It is owned by the value (embedded in every type with a Decode
// method), sized once per decode to the body's length, and reused by the
// next decode: that is what makes steady-state decoding allocation-free,
// and why decoded strings and byte slices are valid only until the next
// Decode into the same value (or until Detach).
type arena struct{ buf []byte }

// Detach gives up the value's arena: every string and byte slice decoded so
// far stays valid for good, and the next Decode allocates a fresh arena.
// Call it before handing decoded strings to code that keeps them.
func (a *arena) Detach() { a.buf = nil }

// Poison overwrites every byte of the value's arena (its whole capacity)
// with 0xA5, so that any string or byte slice still pointing into it
// reads as garbage. It is a test hook: a server poisons a request once it
// is answered to prove that nothing it kept aliases the request's memory,
// which the next request decoded into the same value would overwrite.
func (a *arena) Poison() {
	b := a.buf[:cap(a.buf)]
	for i := range b {
		b[i] = 0xA5
	}
}

// reset prepares the arena for a body of n bytes: every string and slice
// decoded from it fits in n bytes, so the arena never grows during a decode
// and earlier strings of the same decode are never moved.
//
// An arena far larger than the body (after one huge frame) is given back,
// so that a long-lived value does not pin it.
func (a *arena) reset(n int) {
	if cap(a.buf) < n || (cap(a.buf) > 1<<20 && n < cap(a.buf)/8) {
		a.buf = make([]byte, 0, n)
		return
	}
	a.buf = a.buf[:0]
}

func (a *arena) str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	start := len(a.buf)
	a.buf = append(a.buf, b...)
	return unsafe.String(&a.buf[start], len(b))
}

// idText is u's text (String) in the arena.
func (a *arena) idText(u UUID) string {
	var b [36]byte
	u.text(&b)
	return a.str(b[:])
}

func (a *arena) bytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	start := len(a.buf)
	a.buf = append(a.buf, b...)
	return a.buf[start:len(a.buf):len(a.buf)]
}

// dec reads a body. Errors are sticky: after the first one every read
// returns a zero value, so decoders read straight through and check once at
// the end (finish). why is a static reason, so failing does not allocate
// until finish builds the error.
type dec struct {
	b   []byte
	a   *arena
	why string
}

func newDec(body []byte, a *arena) dec {
	a.reset(len(body))
	return dec{b: body, a: a}
}

func (d *dec) fail(why string) {
	if d.why == "" {
		d.why = why
	}
	d.b = nil
}

func (d *dec) u8() uint8 {
	if len(d.b) < 1 {
		d.fail("truncated")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *dec) u16() uint16 {
	if len(d.b) < 2 {
		d.fail("truncated")
		return 0
	}
	v := binary.BigEndian.Uint16(d.b)
	d.b = d.b[2:]
	return v
}

func (d *dec) u32() uint32 {
	if len(d.b) < 4 {
		d.fail("truncated")
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *dec) i64() int64 {
	if len(d.b) < 8 {
		d.fail("truncated")
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return int64(v)
}

func (d *dec) uv() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		if n == 0 {
			d.fail("truncated")
		} else {
			d.fail("varint overflow")
		}
		return 0
	}
	d.b = d.b[n:]
	return v
}

// uv32 reads a uv that must fit in 32 bits.
func (d *dec) uv32() uint32 {
	v := d.uv()
	if v > math.MaxUint32 {
		d.fail("value above 32 bits")
		return 0
	}
	return uint32(v)
}

func (d *dec) sv() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		if n == 0 {
			d.fail("truncated")
		} else {
			d.fail("varint overflow")
		}
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) sv32() int32 {
	v := d.sv()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail("value above 32 bits")
		return 0
	}
	return int32(v)
}

func (d *dec) bool() bool {
	switch d.u8() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail("bool is neither 0 nor 1")
	return false
}

func (d *dec) uuid() (u UUID) {
	if len(d.b) < 16 {
		d.fail("truncated")
		return u
	}
	copy(u[:], d.b)
	d.b = d.b[16:]
	return u
}

// raw reads a uv length and returns that many bytes of the input (not
// copied: callers copy into the arena).
func (d *dec) raw() []byte { return d.rawN(d.uv()) }

// rawN reads n bytes (a length read before).
func (d *dec) rawN(n uint64) []byte {
	if n > uint64(len(d.b)) {
		d.fail("length beyond body")
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) str() string   { return d.a.str(d.raw()) }
func (d *dec) bytes() []byte { return d.a.bytes(d.raw()) }

// count reads an element count and checks that the rest of the body can
// hold that many elements of at least min bytes each, so that a forged
// count cannot make the decoder allocate more than the body justifies.
func (d *dec) count(min int) int {
	n := d.uv()
	if n > uint64(len(d.b)/min) {
		d.fail("count beyond body")
		return 0
	}
	return int(n)
}

// finish reports the first failure, or bytes left over after the last
// field, as a CodeMalformed error naming what was being decoded.
func (d *dec) finish(what string) error {
	if d.why == "" && len(d.b) != 0 {
		d.why = "trailing bytes"
	}
	if d.why == "" {
		return nil
	}
	return &Error{Code: CodeMalformed, Msg: what + ": " + d.why}
}

// resize returns s with length n, reusing its array (and so the slices
// inside its old elements) when it is large enough. Decoders overwrite
// every field of every element.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
