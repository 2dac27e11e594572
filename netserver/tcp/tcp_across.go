package tcp

import (
	"context"

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

// dlqAcross lists the dead letters of every engine as one list, merged
// by queue, time of failure and id (netserver.MergeDLQ, a page of each
// engine at a time), then the page asked for, cut to what fits the
// client's frame.
func (s *Server) dlqAcross(r *protocol.DLQListRequest, peer adminPeer) (protocol.Body, error) {
	var srcs []netserver.DLQSource
	for _, e := range s.engines() {
		srcs = append(srcs, netserver.EngineDLQ(e))
	}
	page, total, err := netserver.MergeDLQ(context.Background(), srcs, toEngineDLQFilter(r, peer))
	if err != nil {
		return nil, err
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
