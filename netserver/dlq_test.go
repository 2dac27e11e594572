package netserver

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/regentmq/regent/engine"
)

// fakeDLQ is a source of n entries of queue q, failed at 0, 2, 4... plus
// first, each with a payload of size bytes, listed a page of at most page
// entries at a time.
func fakeDLQ(q string, n, first, size, page int) DLQSource {
	return func(_ context.Context, f engine.DLQFilter) ([]engine.DLQEntry, int, error) {
		var out []engine.DLQEntry
		for i := f.Offset; i < n && len(out) < min(f.Limit, page); i++ {
			e := engine.DLQEntry{FailedAt: int64(first + 2*i), Message: engine.Message{Queue: q, Payload: make([]byte, size),
				TransactionID: fmt.Sprintf("%s-%d", q, first+2*i)}}
			e.ID[0] = byte(first + 2*i)
			out = append(out, e)
		}
		return out, n, nil
	}
}

// MergeDLQ reads each source page by page, merges them by queue, time of
// failure and id, pages the result exactly, cuts a page where its bytes
// run out (never before its first entry), reaches a deep page of large
// entries, and passes a source's failure on.
func TestMergeDLQ(t *testing.T) {
	ctx := context.Background()
	srcs := []DLQSource{fakeDLQ("a", 5, 1, 10, 2), fakeDLQ("a", 5, 0, 10, 3), fakeDLQ("b", 2, 0, 10, 1)}
	ids := func(es []engine.DLQEntry) (out []string) {
		for _, e := range es {
			out = append(out, e.Message.TransactionID)
		}
		return out
	}
	got, total, err := MergeDLQ(ctx, srcs, engine.DLQFilter{Limit: 100})
	if err != nil || total != 12 || fmt.Sprint(ids(got)) != "[a-0 a-1 a-2 a-3 a-4 a-5 a-6 a-7 a-8 a-9 b-0 b-2]" {
		t.Fatalf("the whole list: %v of %d, %v", ids(got), total, err)
	}
	got, total, err = MergeDLQ(ctx, srcs, engine.DLQFilter{Offset: 4, Limit: 3})
	if err != nil || total != 12 || fmt.Sprint(ids(got)) != "[a-4 a-5 a-6]" {
		t.Fatalf("a page: %v of %d, %v", ids(got), total, err)
	}
	one := engine.DLQEntry{Message: engine.Message{Queue: "a", Payload: make([]byte, 10), TransactionID: "a-0"}}
	size := one.Size()
	got, _, err = MergeDLQ(ctx, srcs, engine.DLQFilter{Limit: 100, MaxBytes: 3*size + size/2})
	if err != nil || len(got) != 3 {
		t.Fatalf("a page cut by its bytes: %d entries (%v), want 3", len(got), err)
	}
	if got, _, err = MergeDLQ(ctx, srcs, engine.DLQFilter{Limit: 100, MaxBytes: 1}); err != nil || len(got) != 1 {
		t.Fatalf("a page smaller than its first entry: %d entries (%v), want that one", len(got), err)
	}
	// A deep page of large entries is read a page of each source at a
	// time, not all at once.
	big := []DLQSource{fakeDLQ("a", 500, 0, 1000, 10), fakeDLQ("a", 500, 1, 1000, 10)}
	got, total, err = MergeDLQ(ctx, big, engine.DLQFilter{Offset: 900, Limit: 10, MaxBytes: 5000})
	if err != nil || total != 1000 || fmt.Sprint(ids(got)) != "[a-900 a-901 a-902]" {
		t.Fatalf("a deep page of large entries: %v of %d, %v", ids(got), total, err)
	}
	boom := errors.New("broker b2 is down")
	failing := append(srcs, func(context.Context, engine.DLQFilter) ([]engine.DLQEntry, int, error) { return nil, 0, boom })
	if _, _, err := MergeDLQ(ctx, failing, engine.DLQFilter{Limit: 10}); !errors.Is(err, boom) {
		t.Fatalf("a source that fails: %v", err)
	}
}
