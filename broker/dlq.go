package broker

import (
	"bytes"
	"context"
	"strings"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/cluster/meta"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/protocol"
)

// dlqSource lists one engine's or one broker's dead letters.
type dlqSource func(ctx context.Context, f engine.DLQFilter) ([]engine.DLQEntry, int, error)

// DLQ lists the dead letters of the whole cluster, for the HTTP bridge
// that Queen's clients ask on any broker: this broker's own (its engine;
// replicated, the engines of the shards it leads) and every other live
// broker's over its link, merged as the Go client merges brokers' (queue,
// time of failure, id), then the page f asks for (Offset, Limit, and
// MaxBytes, which cuts a page short where its bytes run out). In a cluster
// of owners a broker that is down holds its shards' entries: the listing
// is then unavailable, not short. A replicated shard's entries are in its
// leader's engine, on a live broker (a shard between two leaders lists
// none until it has one).
func (f *forwarder) DLQ(ctx context.Context, flt engine.DLQFilter) ([]engine.DLQEntry, int, error) {
	v := f.c.view.Load()
	if v == nil {
		return nil, 0, protocol.NewError(protocol.CodeUnavailable, "the cluster's map is not known yet")
	}
	var srcs []dlqSource
	if f.c.rp != nil {
		for _, e := range f.c.rp.engines() {
			srcs = append(srcs, engineDLQ(e))
		}
	} else {
		for _, id := range v.Map.Owners {
			if id != "" && !v.Alive(id) {
				return nil, 0, protocol.NewError(protocol.CodeUnavailable, "broker "+id+" is down: the dead letters of its partitions wait for it")
			}
		}
		if e := f.c.e.Load(); e != nil {
			srcs = append(srcs, engineDLQ(e))
		}
	}
	for _, id := range f.peers(v) {
		srcs = append(srcs, f.brokerDLQ(v, id))
	}
	return mergeDLQ(ctx, srcs, flt)
}

func engineDLQ(e *engine.Engine) dlqSource {
	return func(_ context.Context, f engine.DLQFilter) ([]engine.DLQEntry, int, error) { return e.DLQ(f) }
}

// brokerDLQ lists broker id's dead letters over its link (its binary
// door lists its engine's, or those of the shards it leads).
func (f *forwarder) brokerDLQ(v *meta.View, id string) dlqSource {
	return func(ctx context.Context, flt engine.DLQFilter) ([]engine.DLQEntry, int, error) {
		cl, err := f.links.client(ctx, v, id)
		if err != nil {
			return nil, 0, err
		}
		got, total, err := cl.DLQ(ctx, client.DLQFilter{Queue: flt.Queue, Group: flt.Group, Partition: flt.Partition,
			From: flt.From, To: flt.To, Limit: flt.Limit, Offset: flt.Offset})
		if err != nil {
			return nil, 0, linkErr(id, err)
		}
		out := make([]engine.DLQEntry, len(got))
		for i := range got {
			d, m := &got[i], &got[i].Message
			out[i] = engine.DLQEntry{ID: engine.UUID(d.ID), Error: d.Error, RetryCount: d.RetryCount, FailedAt: d.FailedAt.UnixNano(),
				Message: engine.Message{ID: engine.UUID(m.ID), TransactionID: m.TransactionID, TraceID: m.TraceID,
					Payload: m.Payload, CreatedAt: m.CreatedAt.UnixNano(), Queue: m.Queue, Partition: m.Partition,
					PartitionID: engine.UUID(m.PartitionID), Offset: m.Offset, Group: m.Group, RetryCount: m.RetryCount}}
		}
		return out, total, nil
	}
}

// mergeDLQ merges the sources' lists, each in the order of the key
// (queue, time of failure, id: an engine lists its queues by name, each
// oldest first), reading each a page at a time, and returns the page flt
// asks for: the entries from Offset on, up to Limit, cut where MaxBytes
// runs out (the first entry always: a page is a run, and the next begins
// where it ends), with the number of entries the sources match in all. It
// holds one page of each source at a time, however deep the page asked for.
func mergeDLQ(ctx context.Context, srcs []dlqSource, flt engine.DLQFilter) ([]engine.DLQEntry, int, error) {
	offset, limit := max(flt.Offset, 0), engine.PageLimit(flt.Limit, engine.DefaultDLQPage, engine.MaxDLQPage)
	type cursor struct {
		src       dlqSource
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
