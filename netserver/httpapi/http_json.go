package httpapi

import (
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver/internal/testhooks"
)

// Hand-written JSON output for the HTTP bridge. The hot routes (push, pop,
// ack) append their answers into pooled buffers with these helpers instead
// of building maps for encoding/json: no reflection, no per-message
// allocation, and payloads are copied once, as the raw JSON text they were
// pushed as. The colder routes build small structs and use encoding/json.

// maxPooledBuf is the largest buffer returned to the pool; bigger ones (a
// pop of huge payloads) are left to the garbage collector.
const maxPooledBuf = 1 << 20

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// getBuf returns an empty buffer from the pool.
func getBuf() *[]byte {
	b := bufPool.Get().(*[]byte)
	*b = (*b)[:0]
	return b
}

// putBuf returns a buffer to the pool. Under testhooks.PoisonDecodeBuffers (a test
// switch) it first overwrites the whole buffer with 0xA5: request bodies
// are decoded in place (jsonReader's strings alias them), so a string the
// engine kept from one without a copy then reads as garbage.
func putBuf(b *[]byte) {
	if b == nil {
		return
	}
	if testhooks.PoisonDecodeBuffers.Load() {
		all := (*b)[:cap(*b)]
		for i := range all {
			all[i] = 0xA5
		}
	}
	if cap(*b) > maxPooledBuf {
		return
	}
	bufPool.Put(b)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does, so the output is always valid JSON.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight plain ASCII bytes at a time (plainWord: no '"', '\\' or
		// control character; highs: no byte of a multi-byte sequence).
		for i+8 <= len(s) {
			w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
				uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
			if plainWord(w)|w&highs != 0 {
				break
			}
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendStringOrNull appends s as a JSON string, or null when s is "".
func appendStringOrNull(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return appendString(dst, s)
}

// appendUUID appends u as a quoted canonical UUID.
func appendUUID(dst []byte, u engine.UUID) []byte {
	dst = append(dst, '"')
	dst = u.Append(dst)
	return append(dst, '"')
}

// appendUUIDOrNull appends u quoted, or null for the zero UUID.
func appendUUIDOrNull(dst []byte, u engine.UUID) []byte {
	if u.IsZero() {
		return append(dst, "null"...)
	}
	return appendUUID(dst, u)
}

// timeLayout is Queen's timestamp format: RFC 3339 in UTC with microseconds.
const timeLayout = "2006-01-02T15:04:05.000000Z"

// appendTime appends a quoted timestamp (Unix nanoseconds) in Queen's
// format, or null for 0.
func appendTime(dst []byte, nanos int64) []byte {
	if nanos == 0 {
		return append(dst, "null"...)
	}
	t := time.Unix(0, nanos).UTC()
	y, mo, d := t.Date()
	if y < 0 || y > 9999 {
		dst = append(dst, '"')
		dst = t.AppendFormat(dst, timeLayout)
		return append(dst, '"')
	}
	h, mi, sec := t.Clock()
	us := t.Nanosecond() / 1000
	var b [28]byte // "2006-01-02T15:04:05.000000Z"
	b[0] = '"'
	put := func(i, v, n int) {
		for k := i + n - 1; k >= i; k-- {
			b[k] = byte('0' + v%10)
			v /= 10
		}
	}
	put(1, y, 4)
	b[5] = '-'
	put(6, int(mo), 2)
	b[8] = '-'
	put(9, d, 2)
	b[11] = 'T'
	put(12, h, 2)
	b[14] = ':'
	put(15, mi, 2)
	b[17] = ':'
	put(18, sec, 2)
	b[20] = '.'
	put(21, us, 6)
	dst = append(dst, b[:27]...)
	return append(dst, 'Z', '"')
}

// timeMemo appends timestamps as appendTime does, formatting the date and
// the time of day once per second in a row: the messages of one pop were
// mostly pushed within the same second.
type timeMemo struct {
	sec    int64    // the Unix second prefix holds, when set
	set    bool     // prefix holds sec
	prefix [20]byte // `"2006-01-02T15:04:05`
}

// appendTime is appendTime(dst, nanos).
func (m *timeMemo) appendTime(dst []byte, nanos int64) []byte {
	if nanos <= 0 { // null, or before 1970: not worth a memo
		return appendTime(dst, nanos)
	}
	sec, frac := nanos/1e9, nanos%1e9
	if !m.set || sec != m.sec {
		var buf [40]byte
		full := appendTime(buf[:0], sec*1e9)
		if len(full) != 29 { // not "2006-01-02T15:04:05.000000Z" (never, for years 1970 to 2262)
			return appendTime(dst, nanos)
		}
		copy(m.prefix[:], full)
		m.sec, m.set = sec, true
	}
	dst = append(dst, m.prefix[:]...)
	us := frac / 1000
	b := [9]byte{'.', 0, 0, 0, 0, 0, 0, 'Z', '"'}
	for k := 6; k >= 1; k-- {
		b[k] = byte('0' + us%10)
		us /= 10
	}
	return append(dst, b[:]...)
}

// fmtTime formats a timestamp in Queen's format ("" for 0).
func fmtTime(nanos int64) string {
	if nanos == 0 {
		return ""
	}
	return time.Unix(0, nanos).UTC().Format(timeLayout)
}

// timePtr is fmtTime for encoding/json structs: nil (null) for 0.
func timePtr(nanos int64) *string {
	if nanos == 0 {
		return nil
	}
	s := fmtTime(nanos)
	return &s
}

func appendInt(dst []byte, v int64) []byte { return strconv.AppendInt(dst, v, 10) }

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

// appendPayload appends a stored payload as a JSON value. Payloads pushed
// over HTTP are JSON text and go out byte for byte; a payload that is not
// valid JSON (pushed over the binary protocol) goes out as a JSON string of
// its bytes, so the answer stays valid JSON.
func appendPayload(dst []byte, p []byte) []byte {
	if len(p) > 0 && validJSON(p) {
		return append(dst, p...)
	}
	return appendString(dst, unsafeString(p))
}

// timeOf converts Unix nanoseconds to a time.Time.
func timeOf(nanos int64) time.Time { return time.Unix(0, nanos) }
