package netserver

import (
	"testing"

	"github.com/regentmq/regent/engine"
)

// TestPopBuf: batches past the pool's bound get no buffer; a recycled
// buffer, or the engine's own slice taken in its place, holds no message.
func TestPopBuf(t *testing.T) {
	for _, n := range []int{0, -1, maxPooledPop + 1} {
		if b := PopBuf(n); b != nil {
			t.Fatalf("PopBuf(%d) = a buffer, want nil", n)
		}
	}
	RecyclePopBuf(nil, nil) // a pop that got none
	b := PopBuf(100)
	if b == nil || len(*b) != 0 {
		t.Fatalf("PopBuf(100) = %v", b)
	}
	own := make([]engine.Message, 3, 10)
	for i := range own {
		own[i].Payload = []byte("kept?")
	}
	RecyclePopBuf(b, own)
	if len(*b) != 0 || cap(*b) != 10 {
		t.Fatalf("recycled buffer: len %d cap %d, want the engine's slice emptied", len(*b), cap(*b))
	}
	for i, m := range (*b)[:cap(*b)] {
		if m.Payload != nil {
			t.Fatalf("message %d of a recycled buffer still holds its payload", i)
		}
	}
}
