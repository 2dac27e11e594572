package tcp

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/protocol"
)

// A broker of a replicated cluster has no one engine (New's e is nil): one
// per shard it leads (Config.Engines), whose data operations go through
// Config.Plane. Of the operator's requests it serves what a cluster's
// client and its checks need, over those engines: a queue's configuration
// (to etcd, which every broker applies to its engines) and the dead-letter
// listing (each engine's entries, merged as the client merges brokers').
// The others answer errNoEngine.

// dlqAcrossFrames bounds what dlqAcross holds while it merges: that many
// of the client's largest replies.
const dlqAcrossFrames = 4

// errNoEngine answers the operator's requests a broker of replicated shards
// does not serve yet.
var errNoEngine = protocol.NewError(protocol.CodeUnavailable, "this operator request is not served by a broker of a replicated cluster yet")

// adminAcross serves an operator's request over Config.Engines.
func (s *Server) adminAcross(req protocol.Body, peer adminPeer) (protocol.Body, error) {
	switch r := req.(type) {
	case *protocol.ConfigureRequest:
		if s.cfg.Cluster == nil {
			return nil, errNoEngine
		}
		if r.Options.Set&protocol.OptKeepUnset != 0 {
			return nil, protocol.NewError(protocol.CodeInvalid, "a broker of a replicated cluster takes a queue's whole configuration: an update of some options is not served yet")
		}
		o := toEngineOptions(&r.Options)
		if err := netserver.ConfigureAcross(context.Background(), s.cfg.Cluster, r.Queue, o); err != nil {
			return nil, err
		}
		return &protocol.ConfigureReply{Options: fromEngineOptions(&o)}, nil
	case *protocol.DLQListRequest:
		return s.dlqAcross(r, peer)
	}
	return nil, errNoEngine
}

// dlqAcross lists the dead letters of every engine as one list: each
// engine's from its first, merged by queue, time of failure and id, then
// the page asked for, cut to what fits the client's frame.
func (s *Server) dlqAcross(r *protocol.DLQListRequest, peer adminPeer) (protocol.Body, error) {
	offset, limit := int(r.Offset), engine.PageLimit(int(r.Limit), engine.DefaultDLQPage, engine.MaxDLQPage)
	want := offset + limit
	maxBytes := peer.maxReply - protocol.HeaderSize - 20
	// The merge holds the first offset+limit entries of every engine,
	// payloads included: a deep page of large messages could hold the
	// whole dead-letter queue. Past a few replies' worth it is refused.
	budget := dlqAcrossFrames * maxBytes
	held := 0
	var all []engine.DLQEntry
	total := 0
	for _, e := range s.engines() {
		f := engine.DLQFilter{Queue: r.Queue, Group: r.Group, Partition: r.Partition, Limit: min(want, engine.MaxDLQPage), MaxBytes: maxBytes}
		if r.From != 0 {
			f.From = time.Unix(0, r.From)
		}
		if r.To != 0 {
			f.To = time.Unix(0, r.To)
		}
		n := 0
		for {
			page, t, err := e.DLQ(f)
			if err != nil {
				return nil, err
			}
			for i := range page {
				held += page[i].Size()
			}
			if held > budget {
				return nil, fmt.Errorf("%w: this dead-letter page (offset %d) needs more than %d bytes of entries from the shards' engines: ask with a smaller offset or a narrower filter",
					engine.ErrTooLarge, offset, budget)
			}
			all, n = append(all, page...), n+len(page)
			if len(page) == 0 || n >= want || n >= t {
				total += t
				break
			}
			f.Offset = n
		}
	}
	slices.SortStableFunc(all, func(a, b engine.DLQEntry) int {
		if c := strings.Compare(a.Message.Queue, b.Message.Queue); c != 0 {
			return c
		}
		if a.FailedAt != b.FailedAt {
			if a.FailedAt < b.FailedAt {
				return -1
			}
			return 1
		}
		return bytes.Compare(a.ID[:], b.ID[:])
	})
	var page []engine.DLQEntry
	if offset < len(all) {
		page = all[offset:min(want, len(all))]
	}
	size := 0
	for i := range page {
		if n := page[i].Size(); i > 0 && size+n > maxBytes {
			page = page[:i] // a page is a run: the client asks again from here
			break
		} else {
			size += n
		}
	}
	return &protocol.DLQListReply{Total: uint64(total), Entries: fromEngineDLQ(page)}, nil
}

// engines are the engines of a broker without one (Config.Engines).
func (s *Server) engines() []*engine.Engine {
	if s.cfg.Engines == nil {
		return nil
	}
	return s.cfg.Engines()
}
