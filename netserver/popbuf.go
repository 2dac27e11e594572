package netserver

import (
	"sync"

	"github.com/regentmq/regent/engine"
)

// Both doors encode a pop's messages into their answer and drop them, so
// one buffer (engine.PopRequest.Buf) serves pop after pop instead of a fresh
// 20 KiB for each batch of 100.

// maxPooledPop is the largest batch served from popBufs.
const maxPooledPop = 1024

var popBufs = sync.Pool{New: func() any { b := make([]engine.Message, 0, 128); return &b }}

// PopBuf returns a pooled answer buffer for a pop of batch messages (its
// PopRequest.Buf), or nil for a batch too large to pool. It goes back with
// RecyclePopBuf once the answer is encoded; a pop that parks gives it back
// at once (the engine's later answer brings its own slice).
func PopBuf(batch int) *[]engine.Message {
	if batch <= 0 || batch > maxPooledPop {
		return nil
	}
	return popBufs.Get().(*[]engine.Message)
}

// RecyclePopBuf gives b back to the pool (nothing for nil), or msgs in its
// place when the engine answered into a slice of its own that is small
// enough. Either way it keeps no message (and no payload) alive.
func RecyclePopBuf(b *[]engine.Message, msgs []engine.Message) {
	if b == nil {
		return
	}
	if cap(msgs) > 0 && cap(msgs) <= maxPooledPop {
		*b = msgs[:0]
	}
	clear((*b)[:cap(*b)])
	*b = (*b)[:0]
	popBufs.Put(b)
}
