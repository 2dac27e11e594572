// Package pagemerge merges listings that several sources hold apart, each
// in the same order, into one listing, and returns one page of it while
// holding one page of each source at a time: the dead-letter listing of a
// cluster, whose brokers each list their own (netserver.MergeDLQ on a
// broker, the Go client's cluster router).
package pagemerge

import "context"

// Source reads a page of one source's listing: at most limit entries from
// offset on, and how many entries the listing holds in all.
type Source[T any] func(ctx context.Context, offset, limit int) ([]T, int, error)

// Merge reads each source a page of at most pageLimit entries at a time,
// merges them in the order less says (each source must list in it), and
// returns the page of the merged listing from offset on, up to limit
// entries and, when maxBytes is more than 0, up to maxBytes by size (the
// first entry always: a page is a run, and the next one starts where it
// ends), with the sum of the sources' totals. A source's failure is
// Merge's.
func Merge[T any](ctx context.Context, srcs []Source[T], offset, limit, pageLimit int,
	less func(a, b *T) bool, size func(*T) int, maxBytes int) ([]T, int, error) {
	type cursor struct {
		src       Source[T]
		buf       []T
		next      int // the offset of the source's next page
		total     int
		exhausted bool
	}
	// fill reads c's next page once its buffer is used up.
	fill := func(c *cursor) error {
		if len(c.buf) > 0 || c.exhausted {
			return nil
		}
		page, t, err := c.src(ctx, c.next, pageLimit)
		if err != nil {
			return err
		}
		c.buf, c.total, c.next = page, t, c.next+len(page)
		c.exhausted = len(page) == 0 || c.next >= t
		return nil
	}
	cs := make([]*cursor, len(srcs))
	total := 0
	for i, src := range srcs {
		cs[i] = &cursor{src: src}
		if err := fill(cs[i]); err != nil {
			return nil, 0, err
		}
		total += cs[i].total
	}
	var page []T
	skipped, held := 0, 0
	for len(page) < limit {
		var head *cursor
		for _, c := range cs {
			if err := fill(c); err != nil {
				return nil, 0, err
			}
			if len(c.buf) > 0 && (head == nil || less(&c.buf[0], &head.buf[0])) {
				head = c
			}
		}
		if head == nil {
			break
		}
		e := &head.buf[0]
		head.buf = head.buf[1:]
		if skipped < offset {
			skipped++
			continue
		}
		if maxBytes > 0 {
			n := size(e)
			if len(page) > 0 && held+n > maxBytes {
				break
			}
			held += n
		}
		page = append(page, *e)
	}
	return page, total, nil
}
