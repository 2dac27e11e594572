package netserver

import (
	"bytes"
	"context"
	"strings"

	"github.com/regentmq/regent/engine"
)

// A DLQSource lists the dead letters of one engine, or of one broker of a
// cluster, as engine.Engine.DLQ does: the page f asks for, and how many
// entries match in all.
type DLQSource func(ctx context.Context, f engine.DLQFilter) ([]engine.DLQEntry, int, error)

// EngineDLQ is e's listing as a DLQSource.
func EngineDLQ(e *engine.Engine) DLQSource {
	return func(_ context.Context, f engine.DLQFilter) ([]engine.DLQEntry, int, error) { return e.DLQ(f) }
}

// MergeDLQ merges the sources' lists, each in the order of the key
// (queue, time of failure, id: an engine lists its queues by name, each
// oldest first), reading each a page at a time, and returns the page flt
// asks for: the entries from Offset on, up to Limit, cut where MaxBytes
// runs out (the first entry always: a page is a run, and the next begins
// where it ends), with the number of entries the sources match in all. It
// holds one page of each source at a time, however deep the page asked for.
func MergeDLQ(ctx context.Context, srcs []DLQSource, flt engine.DLQFilter) ([]engine.DLQEntry, int, error) {
	offset, limit := max(flt.Offset, 0), engine.PageLimit(flt.Limit, engine.DefaultDLQPage, engine.MaxDLQPage)
	type cursor struct {
		src       DLQSource
		buf       []engine.DLQEntry
		next      int // the offset of the source's next page
		total     int
		exhausted bool
	}
	cs := make([]*cursor, len(srcs))
	// fill reads c's next page once its buffer is used up.
	fill := func(c *cursor) error {
		if len(c.buf) > 0 || c.exhausted {
			return nil
		}
		g := flt
		g.Offset, g.Limit = c.next, min(offset+limit, engine.MaxDLQPage)
		page, t, err := c.src(ctx, g)
		if err != nil {
			return err
		}
		c.buf, c.total, c.next = page, t, c.next+len(page)
		c.exhausted = len(page) == 0 || c.next >= t
		return nil
	}
	total := 0
	for i, src := range srcs {
		cs[i] = &cursor{src: src}
		if err := fill(cs[i]); err != nil {
			return nil, 0, err
		}
		total += cs[i].total
	}
	less := func(a, b *engine.DLQEntry) bool {
		if c := strings.Compare(a.Message.Queue, b.Message.Queue); c != 0 {
			return c < 0
		}
		if a.FailedAt != b.FailedAt {
			return a.FailedAt < b.FailedAt
		}
		return bytes.Compare(a.ID[:], b.ID[:]) < 0
	}
	var page []engine.DLQEntry
	skipped, size := 0, 0
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
		e := head.buf[0]
		head.buf = head.buf[1:]
		if skipped < offset {
			skipped++
			continue
		}
		n := e.Size()
		if flt.MaxBytes > 0 && len(page) > 0 && size+n > flt.MaxBytes {
			break
		}
		page, size = append(page, e), size+n
	}
	return page, total, nil
}
