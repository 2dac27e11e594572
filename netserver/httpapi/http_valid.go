package httpapi

// validJSON reports whether b is exactly one JSON value, as jsonReader's
// skip and end read it (white space around it; a value inside more than
// maxDepth arrays and objects is refused). Every payload of every pop
// answer goes through it (appendPayload), so it is one loop over the
// bytes with the open arrays and objects in a bit stack, rather than
// jsonReader's recursive descent with an error per failure.
func validJSON(b []byte) bool {
	var inObj [maxDepth/64 + 1]uint64 // bit d: the container d deep is an object
	d := 0                            // containers open around the next value
	i := 0
	for {
		// A value, d containers deep.
		if d > maxDepth {
			return false
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return false
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			end := byte(']')
			if c == '{' {
				end = '}'
			}
			if i = skipSpace(b, i+1); i < len(b) && b[i] == end {
				i++
				break // empty
			}
			if c == '{' {
				inObj[d/64] |= 1 << (d % 64)
				if i = skipKey(b, i); i < 0 {
					return false
				}
			} else {
				inObj[d/64] &^= 1 << (d % 64)
			}
			d++
			continue
		case c == '"':
			if i = skipString(b, i); i < 0 {
				return false
			}
		case c == 't':
			if i = skipLit(b, i, "true"); i < 0 {
				return false
			}
		case c == 'f':
			if i = skipLit(b, i, "false"); i < 0 {
				return false
			}
		case c == 'n':
			if i = skipLit(b, i, "null"); i < 0 {
				return false
			}
		case c == '-' || (c >= '0' && c <= '9'):
			if i = skipNumber(b, i); i < 0 {
				return false
			}
		default:
			return false
		}
		// After a value: close what ends here, then a comma and the next
		// member, or the end of the document.
		for {
			i = skipSpace(b, i)
			if d == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			obj := inObj[(d-1)/64]>>((d-1)%64)&1 == 1
			switch c := b[i]; {
			case c == ',':
				i++
				if obj {
					if i = skipKey(b, skipSpace(b, i)); i < 0 {
						return false
					}
				}
			case obj && c == '}', !obj && c == ']':
				i++
				d--
				continue
			default:
				return false
			}
			break
		}
	}
}

// skipSpace returns the index of the first byte of b from i that is not
// JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipKey reads `"key" :` at i and returns the index after the colon, or -1.
func skipKey(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = skipString(b, i); i < 0 {
		return -1
	}
	if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
		return -1
	}
	return i + 1
}

// skipString reads the string that opens at i (jsonReader.skipStr's rules)
// and returns the index after it, or -1.
func skipString(b []byte, i int) int {
	i++
	for {
		if i = plainRun(b, i); i >= len(b) {
			return -1
		}
		switch b[i] {
		case '"':
			return i + 1
		case '\\':
			if i+1 >= len(b) {
				return -1
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return -1
				}
				i += 6
			default:
				return -1
			}
		default:
			return -1 // a control character
		}
	}
}

// skipLit reads the literal lit at i and returns the index after it, or -1.
func skipLit(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// skipNumber reads the number at i (jsonReader.num's rules) and returns the
// index after it, or -1.
func skipNumber(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	start := i
	if n := digits(); n == 0 || (n > 1 && b[start] == '0') {
		return -1
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return -1
		}
	}
	return i
}

// isHex reports whether c is a hex digit (either case).
func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
