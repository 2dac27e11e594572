package bench

import (
	"encoding/json"
	"testing"
	"time"
)

func TestPayloadStamp(t *testing.T) {
	for _, size := range []int{1, 31, 32, 33, 128, 4096} {
		p := newPayload(size)
		if len(p) != size {
			t.Fatalf("size %d: got %d bytes", size, len(p))
		}
		now := time.Unix(1733150000, 123456789)
		stamp(p, now)
		got, ok := stampOf(p)
		if size < stampMin {
			if ok {
				t.Fatalf("size %d: stamp read from an unstamped payload", size)
			}
			continue
		}
		if !ok || !got.Equal(now) {
			t.Fatalf("size %d: stamp %v %v, want %v", size, got, ok, now)
		}
		if !json.Valid(p) {
			t.Fatalf("size %d: not JSON: %s", size, p)
		}
	}
}
