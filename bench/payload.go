package bench

import "time"

// Payloads carry their intended send time, so that a consumer measures the
// end-to-end latency of a message from when it should have been pushed:
//
//	{"t":0001733150000123456789,"p":"xxxx...xxxx"}
//	      └ 19 digits, Unix ns ┘       └ padding up to the message size
//
// They are JSON objects, so the same bytes go through Queen's HTTP API
// (which wants JSON payloads) and the binary protocol. Below 32 bytes a
// payload is padding only and carries no time.
const (
	stampPrefix = `{"t":`
	stampMid    = `,"p":"`
	stampDigits = 19
	stampMin    = len(stampPrefix) + stampDigits + len(stampMid) + 2
)

// newPayload makes a payload of size bytes stamped with t.
func newPayload(size int) []byte {
	p := make([]byte, size)
	for i := range p {
		p[i] = 'x'
	}
	if size >= stampMin {
		copy(p, stampPrefix)
		copy(p[len(stampPrefix)+stampDigits:], stampMid)
		copy(p[size-2:], `"}`)
	}
	return p
}

// stamp writes t into a payload made by newPayload.
func stamp(p []byte, t time.Time) {
	if len(p) < stampMin {
		return
	}
	v := t.UnixNano()
	d := p[len(stampPrefix) : len(stampPrefix)+stampDigits]
	for i := stampDigits - 1; i >= 0; i-- {
		d[i] = byte('0' + v%10)
		v /= 10
	}
}

// stampOf reads the time of a stamped payload (ok false if it has none).
func stampOf(p []byte) (time.Time, bool) {
	if len(p) < stampMin || string(p[:len(stampPrefix)]) != stampPrefix {
		return time.Time{}, false
	}
	var v int64
	for _, c := range p[len(stampPrefix) : len(stampPrefix)+stampDigits] {
		if c < '0' || c > '9' {
			return time.Time{}, false
		}
		v = v*10 + int64(c-'0')
	}
	return time.Unix(0, v), true
}
