package engine

import (
	"encoding/binary"
	"errors"
	"unsafe"
)

// Append-style encoders and a bounds-checked decoder for journal records and
// snapshots. The decoder never panics and never allocates more than the input
// holds: a malformed record gives errCorruptRecord.

var errCorruptRecord = errors.New("engine: corrupt journal record")

func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
func appendVarint(b []byte, v int64) []byte   { return binary.AppendVarint(b, v) }
func appendU64(b []byte, v uint64) []byte     { return binary.BigEndian.AppendUint64(b, v) }
func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
func appendBytes(b []byte, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}
func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = errCorruptRecord
	}
	r.b = nil
}

func (r *reader) u8() byte {
	if len(r.b) < 1 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) bool() bool { return r.u8() != 0 }

func (r *reader) u64() uint64 {
	if len(r.b) < 8 {
		r.fail()
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a length that must be coverable by the remaining input at
// minSize bytes per element (so a forged count cannot make us allocate).
func (r *reader) count(minSize int) int {
	v := r.uvarint()
	if minSize < 1 {
		minSize = 1
	}
	if v > uint64(len(r.b)/minSize) {
		r.fail()
		return 0
	}
	return int(v)
}

// bytesRef returns a sub-slice of the input (no copy).
func (r *reader) bytesRef() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// strRef returns a string that aliases the input: valid only as long as the
// input is (used for records whose buffer the engine keeps).
func (r *reader) strRef() string {
	p := r.bytesRef()
	if len(p) == 0 {
		return ""
	}
	return unsafe.String(&p[0], len(p))
}

// str returns a copied string.
func (r *reader) str() string { return string(r.bytesRef()) }

func (r *reader) uuid() UUID {
	var u UUID
	if len(r.b) < 16 {
		r.fail()
		return u
	}
	copy(u[:], r.b)
	r.b = r.b[16:]
	return u
}

func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

const stripeSize = unsafe.Sizeof(stripe{})

func uintptrOf(s *stripe) uintptr { return uintptr(unsafe.Pointer(s)) }
