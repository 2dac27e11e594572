package httpapi

import (
	"encoding/binary"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// jsonReader scans one JSON document held in memory, for the hot request
// bodies (push, ack, transaction). It validates as it goes and never
// copies: a value it returns raw (a payload) is a slice of the input, and a
// string without escapes is one too. Only strings with escape sequences are
// decoded into new memory. The first error sticks: every method after it
// returns zero values, and err says what and where.
//
// The usual loop over an object:
//
//	first := true
//	for r.more('}', &first) {
//		switch string(r.key()) { ... default: r.skip() }
//	}
type jsonReader struct {
	b   []byte
	i   int
	err *jsonError
}

// jsonError is a syntax or type error in a request body; its text is what
// the client reads after "Invalid JSON: ".
type jsonError struct {
	msg string
	off int
}

func (e *jsonError) Error() string { return e.msg + " at offset " + strconv.Itoa(e.off) }

// maxDepth bounds nesting, so that a hostile body cannot exhaust the stack.
const maxDepth = 512

func (r *jsonReader) fail(msg string) {
	if r.err == nil {
		r.err = &jsonError{msg: msg, off: r.i}
	}
	r.i = len(r.b)
}

func (r *jsonReader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte without consuming it (0 at the end).
func (r *jsonReader) peek() byte {
	r.ws()
	if r.i < len(r.b) {
		return r.b[r.i]
	}
	return 0
}

// open consumes c ('{' or '['), failing with msg if the next value is not one.
func (r *jsonReader) open(c byte, msg string) bool {
	if r.peek() != c {
		r.fail(msg)
		return false
	}
	r.i++
	return true
}

// more reports whether the object or array being read (closed by end) has
// another member, consuming the comma before it; first tracks the caller's
// position and starts true.
func (r *jsonReader) more(end byte, first *bool) bool {
	if r.err != nil {
		return false
	}
	c := r.peek()
	if c == end {
		r.i++
		return false
	}
	if !*first {
		if c != ',' {
			r.fail("expected ',' or '" + string(end) + "'")
			return false
		}
		r.i++
	}
	*first = false
	return true
}

// arrayNext reports whether an array comes next. At the end of the input
// it fails (a syntax error, not a missing field).
func (r *jsonReader) arrayNext() bool {
	switch r.peek() {
	case '[':
		return true
	case 0:
		r.fail("unexpected end of input")
	}
	return false
}

// key reads an object key and the colon after it.
func (r *jsonReader) key() []byte {
	if r.peek() != '"' {
		r.fail("expected an object key")
		return nil
	}
	k := r.str()
	if r.peek() != ':' {
		r.fail("expected ':'")
		return nil
	}
	r.i++
	return k
}

// isNull consumes a null and reports whether it was one.
func (r *jsonReader) isNull() bool {
	if r.peek() == 'n' {
		r.lit("null")
		return true
	}
	return false
}

func (r *jsonReader) lit(s string) {
	if len(r.b)-r.i < len(s) || string(r.b[r.i:r.i+len(s)]) != s {
		r.fail("invalid literal")
		return
	}
	r.i += len(s)
}

// str reads a string value. The result aliases the input unless the string
// holds escape sequences.
func (r *jsonReader) str() []byte {
	if r.peek() != '"' {
		r.fail("expected a string")
		return nil
	}
	r.i++
	start := r.i
	if r.i = plainRun(r.b, r.i); r.i < len(r.b) {
		switch r.b[r.i] {
		case '"':
			s := r.b[start:r.i]
			r.i++
			return s
		case '\\':
			return r.strEscaped(start)
		}
		r.fail("control character in string")
		return nil
	}
	r.fail("unterminated string")
	return nil
}

// Eight bytes at a time, as one little-endian word: ones has 1 in each
// byte, highs each byte's top bit.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// plainWord is not 0 when one of the eight bytes of w is '"', '\\' or a
// control character (below 0x20), the bytes a JSON string's scanner must
// look at. (x-ones)&^x&highs is not 0 exactly when a byte of x is 0, and
// (w-0x20*ones)&^w&highs exactly when a byte of w is below 0x20: without
// such a byte nothing borrows across bytes, so no word is flagged wrongly.
func plainWord(w uint64) uint64 {
	q := w ^ (ones * '"')
	s := w ^ (ones * '\\')
	return ((q-ones)&^q | (s-ones)&^s | (w-ones*0x20)&^w) & highs
}

// plainRun returns the index of the first byte of b from i that is '"',
// '\\' or below 0x20, or len(b).
func plainRun(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if plainWord(binary.LittleEndian.Uint64(b[i:])) != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c < 0x20 || c == '"' || c == '\\' {
			break
		}
	}
	return i
}

// strEscaped decodes a string with escapes into new memory; r.i is at the
// first backslash.
func (r *jsonReader) strEscaped(start int) []byte {
	out := make([]byte, 0, r.i-start+16)
	out = append(out, r.b[start:r.i]...)
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			r.i++
			return out
		case c < 0x20:
			r.fail("control character in string")
			return nil
		case c != '\\':
			out = append(out, c)
			r.i++
			continue
		}
		if r.i+1 >= len(r.b) {
			break
		}
		e := r.b[r.i+1]
		r.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			ru, ok := r.hex4()
			if !ok {
				return nil
			}
			if ru >= 0xd800 && ru < 0xdc00 { // a surrogate pair's first half
				if r.i+1 < len(r.b) && r.b[r.i] == '\\' && r.b[r.i+1] == 'u' {
					r.i += 2
					lo, ok := r.hex4()
					if !ok {
						return nil
					}
					if lo >= 0xdc00 && lo < 0xe000 {
						ru = 0x10000 + (ru-0xd800)<<10 + (lo - 0xdc00)
					} else {
						out = utf8.AppendRune(out, utf8.RuneError)
						ru = lo
					}
				} else {
					ru = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, ru)
		default:
			r.fail("invalid escape in string")
			return nil
		}
	}
	r.fail("unterminated string")
	return nil
}

func (r *jsonReader) hex4() (rune, bool) {
	if len(r.b)-r.i < 4 {
		r.fail("invalid \\u escape")
		return 0, false
	}
	var v rune
	for _, c := range r.b[r.i : r.i+4] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | rune(c-'A'+10)
		default:
			r.fail("invalid \\u escape")
			return 0, false
		}
	}
	r.i += 4
	return v, true
}

// optStr reads a string or null ("" for null); a value of another type
// fails with msg.
func (r *jsonReader) optStr(msg string) []byte {
	switch r.peek() {
	case 'n':
		r.lit("null")
		return nil
	case '"':
		return r.str()
	}
	r.fail(msg)
	return nil
}

// num reads a number and returns its text.
func (r *jsonReader) num() []byte {
	r.ws()
	start := r.i
	if r.i < len(r.b) && r.b[r.i] == '-' {
		r.i++
	}
	digits := func() int {
		n := 0
		for r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
			r.i++
			n++
		}
		return n
	}
	intStart := r.i
	if n := digits(); n == 0 || (n > 1 && r.b[intStart] == '0') {
		r.fail("invalid number")
		return nil
	}
	if r.i < len(r.b) && r.b[r.i] == '.' {
		r.i++
		if digits() == 0 {
			r.fail("invalid number")
			return nil
		}
	}
	if r.i < len(r.b) && (r.b[r.i] == 'e' || r.b[r.i] == 'E') {
		r.i++
		if r.i < len(r.b) && (r.b[r.i] == '+' || r.b[r.i] == '-') {
			r.i++
		}
		if digits() == 0 {
			r.fail("invalid number")
			return nil
		}
	}
	return r.b[start:r.i]
}

// float reads a number (or a numeric string, as some clients send) as a
// float64; msg is the error for anything else.
func (r *jsonReader) float(msg string) float64 {
	var t []byte
	switch c := r.peek(); {
	case c == '"':
		t = r.str()
	case c == '-' || (c >= '0' && c <= '9'):
		t = r.num()
	default:
		r.fail(msg)
		return 0
	}
	v, err := strconv.ParseFloat(unsafeString(t), 64)
	if err != nil {
		r.fail(msg)
		return 0
	}
	return v
}

// boolean reads true or false (or the strings "true"/"false"); msg is the
// error for anything else.
func (r *jsonReader) boolean(msg string) bool {
	switch r.peek() {
	case 't':
		r.lit("true")
		return true
	case 'f':
		r.lit("false")
		return false
	case '"':
		switch string(r.str()) {
		case "true", "1":
			return true
		case "false", "0", "":
			return false
		}
	}
	r.fail(msg)
	return false
}

// raw reads any value and returns its text, exactly as sent.
func (r *jsonReader) raw() []byte {
	r.ws()
	start := r.i
	r.skipDepth(0)
	return r.b[start:r.i]
}

// skip reads and discards any value.
func (r *jsonReader) skip() { r.skipDepth(0) }

func (r *jsonReader) skipDepth(depth int) {
	if depth > maxDepth {
		r.fail("nesting too deep")
		return
	}
	switch c := r.peek(); {
	case c == '{':
		r.i++
		first := true
		for r.more('}', &first) {
			r.key()
			r.skipDepth(depth + 1)
		}
	case c == '[':
		r.i++
		first := true
		for r.more(']', &first) {
			r.skipDepth(depth + 1)
		}
	case c == '"':
		r.skipStr()
	case c == 't':
		r.lit("true")
	case c == 'f':
		r.lit("false")
	case c == 'n':
		r.lit("null")
	case c == '-' || (c >= '0' && c <= '9'):
		r.num()
	case c == 0:
		r.fail("unexpected end of input")
	default:
		r.fail("unexpected character '" + string(rune(c)) + "'")
	}
}

// skipStr validates a string without decoding it.
func (r *jsonReader) skipStr() {
	r.i++
	for {
		if r.i = plainRun(r.b, r.i); r.i >= len(r.b) {
			break
		}
		c := r.b[r.i]
		switch {
		case c == '"':
			r.i++
			return
		case c == '\\':
			if r.i+1 >= len(r.b) {
				r.fail("unterminated string")
				return
			}
			switch r.b[r.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				r.i += 2
			case 'u':
				r.i += 2
				if _, ok := r.hex4(); !ok {
					return
				}
			default:
				r.fail("invalid escape in string")
				return
			}
			continue
		}
		r.fail("control character in string")
		return
	}
	r.fail("unterminated string")
}

// end checks that nothing but white space follows the document.
func (r *jsonReader) end() {
	if r.ws(); r.err == nil && r.i < len(r.b) {
		r.fail("unexpected data after the JSON value")
	}
}

// unsafeString views b as a string without copying. The caller keeps b
// unchanged for as long as the string is used.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
