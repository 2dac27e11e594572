package tcp

import (
	"io"
	"testing"

	"github.com/panjf2000/gnet/v2"
	"github.com/regentmq/regent/protocol"
)

// bufferedConn is a gnet.Conn whose input is in: InboundBuffered and Peek
// are all partialFrame calls.
type bufferedConn struct {
	gnet.Conn
	in []byte
}

func (c *bufferedConn) InboundBuffered() int { return len(c.in) }

func (c *bufferedConn) Peek(n int) ([]byte, error) {
	if n > len(c.in) {
		return nil, io.ErrShortBuffer
	}
	if n <= 0 {
		n = len(c.in)
	}
	return c.in[:n], nil
}

// TestPartialFrame: OnTraffic skips reading the input whole only while a
// large input starts with a frame still arriving; a complete frame, a small
// input, and a header the frame loop must refuse are read as before.
func TestPartialFrame(t *testing.T) {
	push := protocol.AppendPushRequest(nil, 7, &protocol.PushRequest{Items: []protocol.PushItem{
		{Queue: "q", Payload: make([]byte, 1<<20)},
	}})
	ping := protocol.AppendPingRequest(nil, 8)
	const maxFrame = 512 << 10 // the push is larger
	for _, tc := range []struct {
		name     string
		in       []byte
		maxFrame int
		want     bool
	}{
		{"empty", nil, 0, false},
		{"a header's first bytes", push[:5], 0, false},
		{"a small part of a large frame", push[:peekAllBytes], 0, false},
		{"most of a large frame", push[:len(push)-1], 0, true},
		{"a large frame's header and 100 KiB", push[:100<<10], 0, true},
		{"a whole large frame", push, 0, false},
		{"a whole large frame and a partial one", append(append([]byte(nil), push...), push[:len(push)/2]...), 0, false},
		{"small frames", append(append([]byte(nil), ping...), ping...), 0, false},
		{"a frame above the maximum", push[:200<<10], maxFrame, false},
		{"not a frame", make([]byte, 200<<10), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			max := tc.maxFrame
			if max == 0 {
				max = protocol.DefaultMaxFrame
			}
			if _, got := partialFrame(&bufferedConn{in: tc.in}, max); got != tc.want {
				t.Fatalf("partialFrame = %v, want %v", got, tc.want)
			}
		})
	}
}
