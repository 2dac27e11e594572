package httpapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// The string scanners (jsonReader.str and skipStr, appendString) look at
// eight bytes at a time. These tests hold them to the byte-at-a-time
// versions they replaced (copied below as refStr, refSkipStr and
// refAppendString): same result, same position, same error at the same
// offset, for every input.

// refStr is jsonReader.str as it was, byte at a time.
func refStr(r *jsonReader) []byte {
	if r.peek() != '"' {
		r.fail("expected a string")
		return nil
	}
	r.i++
	start := r.i
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			s := r.b[start:r.i]
			r.i++
			return s
		case c == '\\':
			return r.strEscaped(start)
		case c < 0x20:
			r.fail("control character in string")
			return nil
		}
		r.i++
	}
	r.fail("unterminated string")
	return nil
}

// refSkipStr is jsonReader.skipStr as it was.
func refSkipStr(r *jsonReader) {
	r.i++
	for r.i < len(r.b) {
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
		case c < 0x20:
			r.fail("control character in string")
			return
		}
		r.i++
	}
	r.fail("unterminated string")
}

// refAppendString is appendString as it was.
func refAppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
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

func errString(e *jsonError) string {
	if e == nil {
		return ""
	}
	return e.Error()
}

// checkScanners compares the scanners with the references on body, read
// as a string value (a '"' is put in front).
func checkScanners(t *testing.T, body []byte) {
	t.Helper()
	in := append([]byte{'"'}, body...)
	a, b := jsonReader{b: in}, jsonReader{b: in}
	got, want := a.str(), refStr(&b)
	if !bytes.Equal(got, want) || a.i != b.i || errString(a.err) != errString(b.err) {
		t.Fatalf("str(%q) = %q at %d err %q; was %q at %d err %q", in, got, a.i, errString(a.err), want, b.i, errString(b.err))
	}
	a, b = jsonReader{b: in}, jsonReader{b: in}
	a.skipStr()
	refSkipStr(&b)
	if a.i != b.i || errString(a.err) != errString(b.err) {
		t.Fatalf("skipStr(%q) ends at %d err %q; was %d err %q", in, a.i, errString(a.err), b.i, errString(b.err))
	}
	if got, want := appendString([]byte("x"), string(body)), refAppendString([]byte("x"), string(body)); !bytes.Equal(got, want) {
		t.Fatalf("appendString(%q) = %s; was %s", body, got, want)
	}
	var back string
	if err := json.Unmarshal(appendString(nil, string(body)), &back); err != nil || back != string([]rune(string(body))) {
		t.Fatalf("appendString(%q) reads back as %q (%v)", body, back, err)
	}
}

// Every byte value at every position of strings up to three words long,
// on plain text and on text with multi-byte characters: the word at a time
// loop must stop exactly at the first byte that matters, wherever it is.
func TestStringScannersEveryByteEveryPlace(t *testing.T) {
	bases := []string{
		strings.Repeat("abcdefgh", 3),
		strings.Repeat("é日\U0001F600x", 3)[:24],
		strings.Repeat("\x7f\x80\xff ", 6),
	}
	for _, base := range bases {
		for n := 0; n <= len(base); n++ {
			for pos := 0; pos < n; pos++ {
				for c := 0; c < 256; c++ {
					s := []byte(base[:n])
					s[pos] = byte(c)
					checkScanners(t, s)
					checkScanners(t, append(s, '"'))
					checkScanners(t, append(s, `"tail`...))
				}
			}
			checkScanners(t, []byte(base[:n]))
			checkScanners(t, []byte(base[:n]+`"`))
		}
	}
}

func TestStringScannersOddInputs(t *testing.T) {
	for _, s := range []string{
		``, `"`, `\`, `\"`, `\\"`, `\u`, `\u12`, `\u00e9"`, `\ud83d\ude00"`, `\ud800x"`, `\x"`,
		"\x00\"", "abcdefg\x1f\"", "abcdefgh\x1f\"", "abcdefghi\\n\"", "bad\xffutf8\"", "\u2028\u2029\"",
		strings.Repeat("x", 1<<20) + `"`, strings.Repeat("x", 1<<20), strings.Repeat("\\n", 1<<19) + `"`,
		strings.Repeat("é", 1<<19) + "\x01\"",
	} {
		checkScanners(t, []byte(s))
	}
}

// FuzzStringScanners holds the word at a time scanners to the byte at a
// time ones on any input.
func FuzzStringScanners(f *testing.F) {
	for _, s := range []string{``, `abc"`, `abcdefghijk\"x"`, "abcdefgh\x01", "é\xffabcdefgh\"", `\u00e9"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(checkScanners)
}
