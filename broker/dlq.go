package broker

import (
	"context"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/cluster/meta"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/protocol"
)

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
	var srcs []netserver.DLQSource
	if f.c.rp != nil {
		for _, e := range f.c.rp.engines() {
			srcs = append(srcs, netserver.EngineDLQ(e))
		}
	} else {
		for _, id := range v.Map.Owners {
			if id != "" && !v.Alive(id) {
				return nil, 0, protocol.NewError(protocol.CodeUnavailable, "broker "+id+" is down: the dead letters of its partitions wait for it")
			}
		}
		if e := f.c.e.Load(); e != nil {
			srcs = append(srcs, netserver.EngineDLQ(e))
		}
	}
	for _, id := range f.peers(v) {
		srcs = append(srcs, f.brokerDLQ(v, id))
	}
	return netserver.MergeDLQ(ctx, srcs, flt)
}

// brokerDLQ lists broker id's dead letters over its link (its binary
// door lists its engine's, or those of the shards it leads), each page
// within callTimeout, as a forwarded push is (a broker that stopped
// without closing its connections holds the listing no longer).
func (f *forwarder) brokerDLQ(v *meta.View, id string) netserver.DLQSource {
	return func(ctx context.Context, flt engine.DLQFilter) ([]engine.DLQEntry, int, error) {
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
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
