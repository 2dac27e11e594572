package engine

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"unsafe"
)

// The UUID type is part of the data model (state.go); here are its text
// forms and the generator of message and lease ids.

// ErrBadUUID is returned by ParseUUID for text that is not a UUID.
var ErrBadUUID = errors.New("engine: not a UUID")

// ParseUUID parses the canonical form (hyphens optional).
func ParseUUID(s string) (UUID, error) {
	// The canonical 8-4-4-4-12 form (either case), as every door answers
	// ids, read through a table: acks name two ids per message.
	if u, ok := parseHyphenated(s, &unhex); ok {
		return u, nil
	}
	return parseUUIDLoose(s)
}

// canonicalUUID parses s only when it is exactly the canonical text of a
// UUID (lower-case, hyphenated: what UUID.String gives), the form in which
// a message pushed without a transactionId is named by its id.
func canonicalUUID(s string) (UUID, bool) { return parseHyphenated(s, &unhexLower) }

// parseHyphenated reads the 8-4-4-4-12 form through a table of hex digit
// values (0xff: not a digit).
func parseHyphenated(s string, table *[256]byte) (UUID, bool) {
	var u UUID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	var bad byte
	for k, i := range uuidHexAt {
		hi, lo := table[s[i]], table[s[i+1]]
		bad |= hi | lo
		u[k] = hi<<4 | lo
	}
	return u, bad&0xf0 == 0
}

// uuidHexAt is where each byte's two hex digits start in the canonical
// 8-4-4-4-12 form.
var uuidHexAt = [16]int{0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34}

// unhex is each hex digit's value (either case), unhexLower the same for
// lower-case digits only; 0xff for other bytes.
var unhex, unhexLower = hexTable(true), hexTable(false)

func hexTable(upper bool) (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := byte(0); i < 10; i++ {
		t['0'+i] = i
	}
	for i := byte(0); i < 6; i++ {
		t['a'+i] = 10 + i
		if upper {
			t['A'+i] = 10 + i
		}
	}
	return t
}

// parseUUIDLoose is ParseUUID of any form: 32 hex digits, dashes anywhere.
func parseUUIDLoose(s string) (UUID, error) {
	var u UUID
	var hexd [32]byte
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '-' {
			continue
		}
		if n == 32 {
			return u, ErrBadUUID
		}
		hexd[n] = c
		n++
	}
	if n != 32 {
		return u, ErrBadUUID
	}
	if _, err := hex.Decode(u[:], hexd[:]); err != nil {
		return u, ErrBadUUID
	}
	return u, nil
}

// uuidGen makes UUIDv7s: 48 bits of Unix milliseconds, then a 12-bit counter
// that keeps ids made in the same millisecond ordered, then 62 random bits.
type uuidGen struct {
	state atomic.Uint64 // ms<<12 | counter
}

func (g *uuidGen) next(nowNanos int64) UUID {
	ms := uint64(nowNanos / 1e6)
	var v uint64
	for {
		old := g.state.Load()
		v = ms << 12
		if v <= old {
			v = old + 1 // same (or earlier) millisecond: count on
		}
		if g.state.CompareAndSwap(old, v) {
			break
		}
	}
	var u UUID
	binary.BigEndian.PutUint64(u[0:8], v<<4) // 48-bit ms, 12-bit counter, leaves 4 bits
	// u[0:6] = ms, u[6:8] = counter<<4; place version 7 in the high nibble of u[6].
	c := uint16(v & 0xfff)
	u[6] = 0x70 | byte(c>>8)
	u[7] = byte(c)
	binary.BigEndian.PutUint64(u[8:16], rand.Uint64())
	u[8] = 0x80 | u[8]&0x3f // RFC 4122 variant
	return u
}

// idText gives the text form of message ids (the transactionId of a message
// pushed without one) out of one buffer per batch instead of one string per
// message. A nil *idText makes each its own string.
type idText struct {
	buf  []byte
	n    int  // ids in the batch: the buffer is sized for them
	bare bool // give "" instead (PopRequest.BareTxn)
}

// of returns id's text. Strings point into buffers that are only ever
// appended to within their capacity, so they never change.
func (t *idText) of(id UUID) string {
	if t == nil {
		return id.String()
	}
	if t.bare {
		return ""
	}
	if cap(t.buf)-len(t.buf) < 36 {
		t.buf = make([]byte, 0, 36*max(t.n, 1))
	}
	start := len(t.buf)
	t.buf = id.Append(t.buf)
	return unsafe.String(&t.buf[start], 36)
}
