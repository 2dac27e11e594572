package pagemerge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// ints is a source listing n numbers, from first, step apart; asked counts
// the entries it handed out and biggest its largest page.
type ints struct {
	n, first, step int
	asked, biggest int
}

func (s *ints) source() Source[int] {
	return func(_ context.Context, offset, limit int) ([]int, int, error) {
		var out []int
		for i := offset; i < s.n && len(out) < limit; i++ {
			out = append(out, s.first+i*s.step)
		}
		s.asked += len(out)
		s.biggest = max(s.biggest, len(out))
		return out, s.n, nil
	}
}

func less(a, b *int) bool { return *a < *b }

// Merge pages the merged listing exactly, sums the totals, asks no source
// for more than pageLimit at once, reads no deeper than the page asked
// for plus a page of each source (the Go client read offset+limit entries
// of every broker, and held them all), cuts a page by bytes (never before
// its first entry), and passes a source's failure on.
func TestMerge(t *testing.T) {
	ctx := context.Background()
	srcs := []*ints{{n: 400, first: 0, step: 3}, {n: 400, first: 1, step: 3}, {n: 400, first: 2, step: 3}}
	sources := func() []Source[int] {
		var out []Source[int]
		for _, s := range srcs {
			s.asked, s.biggest = 0, 0
			out = append(out, s.source())
		}
		return out
	}
	for _, c := range []struct{ offset, limit int }{{0, 5}, {7, 3}, {900, 10}, {1195, 10}, {1200, 10}} {
		got, total, err := Merge(ctx, sources(), c.offset, c.limit, 20, less, nil, 0)
		var want []int
		for i := c.offset; i < min(c.offset+c.limit, 1200); i++ {
			want = append(want, i)
		}
		if err != nil || total != 1200 || !slices.Equal(got, want) {
			t.Fatalf("offset %d, limit %d: %v of %d (%v), want %v", c.offset, c.limit, got, total, err, want)
		}
		asked := 0
		for _, s := range srcs {
			asked += s.asked
			if s.biggest > 20 {
				t.Fatalf("offset %d: a source was asked for %d entries at once, past the page limit 20", c.offset, s.biggest)
			}
		}
		if most := c.offset + c.limit + len(srcs)*20; asked > most {
			t.Fatalf("offset %d, limit %d: the sources handed out %d entries, more than %d", c.offset, c.limit, asked, most)
		}
	}
	size := func(*int) int { return 10 }
	if got, _, err := Merge(ctx, sources(), 0, 100, 20, less, size, 35); err != nil || fmt.Sprint(got) != "[0 1 2]" {
		t.Fatalf("a page of at most 35 bytes of 10-byte entries: %v, %v", got, err)
	}
	if got, _, err := Merge(ctx, sources(), 4, 100, 20, less, size, 1); err != nil || fmt.Sprint(got) != "[4]" {
		t.Fatalf("a page smaller than its first entry: %v, %v, want that entry", got, err)
	}
	boom := errors.New("broker b2 is down")
	failing := append(sources(), func(context.Context, int, int) ([]int, int, error) { return nil, 0, boom })
	if _, _, err := Merge(ctx, failing, 0, 10, 20, less, nil, 0); !errors.Is(err, boom) {
		t.Fatalf("a source that fails: %v", err)
	}
}
