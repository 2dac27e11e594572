package tcp_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/regentmq/regent/protocol"
)

// TestTCPLargeFrameInPieces: a 1 MiB push that arrives in 4 KiB writes,
// with a ping right behind it in the same stream (the server sees the push
// partial over many reads, then complete with part of the ping), are
// both answered, and the message pops out intact.
func TestTCPLargeFrameInPieces(t *testing.T) {
	f := newTCP(t)
	ctx := ctx5(t)
	payload := make([]byte, 1<<20-1<<10)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	stream := protocol.AppendPushRequest(nil, 30, &protocol.PushRequest{Items: []protocol.PushItem{
		{Queue: "large", Payload: payload},
	}})
	stream = protocol.AppendPingRequest(stream, 31)
	nc := rawConn(t, f, true)
	go func() {
		for off := 0; off < len(stream); off += 4 << 10 {
			nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := nc.Write(stream[off:min(off+4<<10, len(stream))]); err != nil {
				return
			}
		}
	}()
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	rd := protocol.NewReader(nc, 0)
	pushed, pinged := false, false
	for !pushed || !pinged { // the ping may be answered first: the push waits for its fsync
		fr, err := rd.Next()
		if err != nil || fr.IsError() {
			t.Fatalf("reply: %+v %v", fr.Header, err)
		}
		switch fr.ID {
		case 30:
			var pr protocol.PushReply
			if pr.Decode(fr.Body) != nil || len(pr.Items) != 1 || pr.Items[0].Status != protocol.PushQueued {
				t.Fatalf("push reply: %+v", pr.Items)
			}
			pushed = true
		case 31:
			pinged = true
		default:
			t.Fatalf("reply to request %d", fr.ID)
		}
	}
	msgs, err := f.c.Queue("large").Pop(ctx)
	if err != nil || len(msgs) != 1 || !bytes.Equal(msgs[0].Payload, payload) {
		t.Fatalf("pop: %d messages, %v", len(msgs), err)
	}
}
