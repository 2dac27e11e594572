package netserver

import (
	"bytes"
	"context"
	"strings"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/internal/pagemerge"
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
	ps := make([]pagemerge.Source[engine.DLQEntry], len(srcs))
	for i, src := range srcs {
		ps[i] = func(ctx context.Context, from, n int) ([]engine.DLQEntry, int, error) {
			g := flt
			g.Offset, g.Limit = from, n
			return src(ctx, g)
		}
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
	size := func(e *engine.DLQEntry) int { return e.Size() }
	return pagemerge.Merge(ctx, ps, offset, limit, min(offset+limit, engine.MaxDLQPage), less, size, flt.MaxBytes)
}
