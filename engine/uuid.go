package engine

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"unsafe"
)

// UUID is a 16-byte identifier: message ids and lease ids are UUIDv7 (time
// ordered), partition ids are UUIDv8 built from the queue id and the
// partition's sequence number inside the queue, and a queue's own UUID is
// built the same way from a sequence number no partition gets (queueSeq).
type UUID [16]byte

// IsZero reports whether u is the zero UUID (no id given).
func (u UUID) IsZero() bool { return u == UUID{} }

// String formats u in the canonical 8-4-4-4-12 form.
func (u UUID) String() string {
	var b [36]byte
	return string(u.Append(b[:0]))
}

// Append appends the canonical form of u to dst.
func (u UUID) Append(dst []byte) []byte {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return append(dst, b[:]...)
}

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

// partitionID builds the stable id of partition number seq of the queue with
// the given 8-byte id: a UUIDv8 whose first half is the queue id and whose
// second half is the sequence number (62 bits).
func partitionID(queueID uint64, seq uint64) UUID {
	var u UUID
	binary.BigEndian.PutUint64(u[0:8], queueID)
	u[6] = 0x80 | u[6]&0x0f // version 8
	binary.BigEndian.PutUint64(u[8:16], seq)
	u[8] = 0x80 | u[8]&0x3f // variant
	return u
}

// queueSeq is the sequence number of a queue's own UUID (queueUUID): the
// highest a UUID's second half holds (62 bits: the rest carries the UUID
// variant), which no partition gets, so a queue's UUID is none of its
// partitions' ids (nor another queue's: the first half is the queue's).
const queueSeq = 1<<62 - 1

// maxPartitionSeq is the highest partition number a partition id holds.
const maxPartitionSeq = queueSeq - 1

// queueUUID is the UUID of the queue with the given 8-byte id, as doors show
// it (queueId): partitionID(queueID, queueSeq), xxxxxxxx-xxxx-8xxx-bfff-
// ffffffffffff. Derived from the id the journal and snapshots keep, it
// survives restarts; splitPartitionID refuses it, so it never names a
// partition.
func queueUUID(queueID uint64) UUID { return partitionID(queueID, queueSeq) }

// splitPartitionID is the inverse of partitionID: the queue id (with its
// version nibble) and the sequence number. A queue's UUID is not a
// partition's: ok is false.
func splitPartitionID(u UUID) (queueID uint64, seq uint64, ok bool) {
	if u[6]>>4 != 8 || u[8]>>6 != 2 {
		return 0, 0, false
	}
	queueID = binary.BigEndian.Uint64(u[0:8])
	seq = binary.BigEndian.Uint64(u[8:16]) & (1<<62 - 1)
	if seq > maxPartitionSeq {
		return 0, 0, false
	}
	return queueID, seq, true
}

// newQueueID returns a random queue id whose UUID form carries version 8.
func newQueueID() uint64 {
	for {
		id := rand.Uint64()
		id = id&^(0xf<<12) | 0x8<<12 // version nibble at byte 6's high half
		if id != 0 {
			return id
		}
	}
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
