package httpapi

import "github.com/regentmq/regent/engine"

// Every acknowledgment names a partitionId and a leaseId: they are read
// through a table here rather than encoding/hex (engine.ParseUUID), with
// the engine's answer for anything but the canonical form, and a batch's
// repeated texts are read once.

// uuidHexAt is where each byte's two hex digits start in the canonical
// 8-4-4-4-12 form.
var uuidHexAt = [16]int{0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34}

// unhex is each hex digit's value (either case); 0xff for other bytes.
var unhex = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := byte(0); i < 10; i++ {
		t['0'+i] = i
	}
	for i := byte(0); i < 6; i++ {
		t['a'+i], t['A'+i] = 10+i, 10+i
	}
	return t
}()

// parseUUID is engine.ParseUUID: the same UUID or the same error for any
// text. The canonical 36-character form (as pops answer it, in either
// case) is read here; anything else is left to the engine.
func parseUUID(s string) (engine.UUID, error) {
	if len(s) == 36 && s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-' {
		var u engine.UUID
		var bad byte
		for k, i := range uuidHexAt {
			hi, lo := unhex[s[i]], unhex[s[i+1]]
			bad |= hi | lo
			u[k] = hi<<4 | lo
		}
		if bad&0xf0 == 0 {
			return u, nil
		}
	}
	return engine.ParseUUID(s)
}

// uuidMemo remembers the last UUID text a call read and its UUID: the
// acknowledgments of a batch mostly repeat their partitionId and leaseId.
type uuidMemo struct {
	text []byte // aliases the request body: reset with the call
	id   engine.UUID
}

// parse is parseUUID(b), once per distinct text in a row.
func (m *uuidMemo) parse(b []byte) (engine.UUID, error) {
	if len(b) == 36 && string(b) == string(m.text) {
		return m.id, nil
	}
	u, err := parseUUID(unsafeString(b))
	if err == nil {
		m.text, m.id = b, u
	}
	return u, err
}
