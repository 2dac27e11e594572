package tcp

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/protocol"
)

// admin serves the operator requests. They may wait (a seek waits for its
// journal commit, a queue's description walks its partitions), so each runs
// on its own goroutine and answers through the reply buffer.
func (tc *tcpConn) admin(op protocol.Op, id uint64, body []byte) bool {
	req := protocol.NewRequest(op)
	if req == nil {
		tc.send(errReply{op, id, protocol.ErrUnknownOp})
		return false
	}
	if err := req.Decode(body); err != nil {
		tc.send(errReply{op, id, err})
		return false
	}
	// req is a fresh value: its arena is its own for as long as the
	// goroutine below needs it (and finish may poison it after).
	decoded, _ := req.(decodedBody)
	j := &adminJob{op: op, req: req}
	if !j.begin(tc, op, id, decoded) {
		return true
	}
	peer := adminPeer{minor: tc.minor, maxReply: tc.maxReply, sub: tc.producerSub()}
	go func() {
		j.reply, j.err = tc.s.adminOp(req, peer)
		j.finish(j)
	}()
	return true
}

// adminPeer is what an operator request's answer depends on of its client:
// the protocol minor version it said (what fields it reads) and the frame
// size it reads.
type adminPeer struct {
	minor    uint16
	maxReply int
	sub      string // the producer subject its pushes carry (auth on)
}

// adminJob is one operator request, served on a goroutine of its own.
type adminJob struct {
	job
	op    protocol.Op
	req   protocol.Body
	reply protocol.Body
	err   error
}

func (j *adminJob) appendTo(dst []byte) []byte {
	if j.err != nil {
		return errReply{j.op, j.id, j.err}.appendTo(dst)
	}
	return bodyReply{j.id, j.reply}.appendTo(dst)
}

func (s *Server) adminOp(req protocol.Body, peer adminPeer) (protocol.Body, error) {
	e := s.e
	if e == nil {
		return s.adminAcross(req, peer) // a broker of replicated shards (tcp_across.go)
	}
	switch r := req.(type) {
	case *protocol.ConfigureRequest:
		var res engine.ConfigureResult
		var err error
		if r.Options.Set&protocol.OptKeepUnset != 0 {
			res, err = e.UpdateQueue(context.Background(), r.Queue, func(o *engine.QueueOptions) { applyOptions(o, &r.Options) })
		} else {
			res, err = e.Configure(context.Background(), r.Queue, toEngineOptions(&r.Options))
		}
		if err == nil && s.cfg.Cluster != nil {
			err = s.cfg.Cluster.Configured(context.Background(), r.Queue, res.Options)
		}
		if err != nil {
			return nil, err
		}
		return &protocol.ConfigureReply{QueueID: protocol.UUID(res.QueueID), PartitionID: protocol.UUID(res.PartitionID),
			Created: res.Created, Options: fromEngineOptions(&res.Options)}, nil
	case *protocol.QueueInfoRequest:
		return s.queueInfo(r, peer)
	case *protocol.QueueListRequest:
		return s.queueList(r, peer)
	case *protocol.DeleteQueueRequest:
		var ok bool
		var err error
		if s.cfg.Cluster != nil {
			ok, err = s.cfg.Cluster.DeleteQueue(context.Background(), r.Queue)
		} else {
			ok, err = e.DeleteQueue(context.Background(), r.Queue)
		}
		if err != nil {
			return nil, err
		}
		return &protocol.DeleteQueueReply{Existed: ok}, nil
	case *protocol.SeekRequest:
		n, err := e.Seek(context.Background(), r.Queue, r.Group, r.Partition, engine.SeekTarget{ToEnd: r.ToEnd, Time: time.Unix(0, r.Time)})
		if err != nil {
			return nil, err
		}
		return &protocol.SeekReply{PartitionsMoved: uint64(n)}, nil
	case *protocol.DeleteGroupRequest:
		n, err := e.DeleteGroup(context.Background(), r.Queue, r.Group)
		if err != nil {
			return nil, err
		}
		return &protocol.DeleteGroupReply{QueuesAffected: uint64(n)}, nil
	case *protocol.DLQListRequest:
		entries, total, err := e.DLQ(toEngineDLQFilter(r, peer))
		if err != nil {
			return nil, err
		}
		return &protocol.DLQListReply{Total: uint64(total), Entries: fromEngineDLQ(entries)}, nil
	case *protocol.DLQRedriveRequest:
		f, ids := toEngineDLQSelect(&r.DLQSelect)
		red, err := e.RedriveDLQ(context.Background(), f, ids)
		if err != nil {
			return nil, err
		}
		out := &protocol.DLQRedriveReply{Items: make([]protocol.Redriven, len(red))}
		for i, x := range red {
			out.Items[i] = protocol.Redriven{Entry: protocol.UUID(x.Entry), MessageID: protocol.UUID(x.MessageID),
				PartitionID: protocol.UUID(x.PartitionID), Queue: x.Queue, Partition: x.Partition}
		}
		return out, nil
	case *protocol.DLQPurgeRequest:
		f, ids := toEngineDLQSelect(&r.DLQSelect)
		n, err := e.PurgeDLQ(context.Background(), f, ids)
		if err != nil {
			return nil, err
		}
		return &protocol.DLQPurgeReply{Purged: uint64(n)}, nil
	case *protocol.BrowseRequest:
		return s.browse(r, peer)
	case *protocol.QueryRegisterRequest:
		res, err := e.RegisterQuery(context.Background(), engine.QueryRegistration{Name: r.Name, SourceQueue: r.SourceQueue,
			SinkQueue: r.SinkQueue, ConfigHash: r.ConfigHash, Reset: r.Reset})
		if err != nil {
			return nil, err
		}
		return &protocol.QueryRegisterReply{QueryID: protocol.UUID(res.Query.ID), Fresh: res.Fresh, Reset: res.Reset}, nil
	case *protocol.CycleRequest:
		return s.cycle(r, peer)
	case *protocol.StateGetRequest:
		rows, err := e.State(engine.UUID(r.QueryID), engine.UUID(r.PartitionID),
			engine.StateFilter{Keys: r.Keys, Prefix: r.Prefix, HasRipe: r.HasRipe, RipeAtOrBefore: r.RipeAtOrBefore})
		if err != nil {
			return nil, err
		}
		out := &protocol.StateGetReply{Rows: make([]protocol.StateRow, len(rows))}
		size := 0
		for i, row := range rows {
			size += len(row.Key) + len(row.Value) + 32
			out.Rows[i] = protocol.StateRow{Key: row.Key, Value: row.Value, UpdatedAt: row.UpdatedAt.UnixNano()}
		}
		if size > peer.maxReply {
			return nil, fmt.Errorf("%w: the shard's %d rows (%d bytes) do not fit the %d-byte frame the client reads: filter by keys or prefix",
				engine.ErrTooLarge, len(rows), size, peer.maxReply)
		}
		return out, nil
	case *protocol.StatsRequest:
		st := e.Stats()
		out := &protocol.StatsReply{
			Queues: uint64(st.Queues), Pushed: st.Pushed, Popped: st.Popped, Acked: st.Acked,
			DeadLettered: st.DeadLettered, CacheBytes: st.CacheBytes, Connections: uint64(s.nconns.Load()),
		}
		if s.cfg.JournalStats != nil {
			j := s.cfg.JournalStats()
			out.Fsyncs, out.FsyncNanos, out.BytesWritten, out.Entries = j.Fsyncs, j.FsyncNanosTotal, j.BytesWritten, j.Entries
		}
		return out, nil
	}
	return nil, protocol.ErrUnknownOp
}

// queueListPage is the queues a QueueList page holds when the request says
// no limit (at most engine.MaxPartitionPage, the lists' maximum).
const queueListPage = 1000

// queueInfo answers a page of a queue's partitions: the request's (its
// limit 0: engine.DefaultPartitionPage), or for a 1.1 client (which cannot
// ask for more) the first engine.MaxPartitionPage; in both cases only what
// fits the frame the client reads. The summary counts every partition; More (for 1.2 clients)
// says that partitions follow.
func (s *Server) queueInfo(r *protocol.QueueInfoRequest, peer adminPeer) (protocol.Body, error) {
	qi, err := s.e.QueueSummary(r.Queue)
	if err != nil {
		return nil, err
	}
	req := engine.PageRequest{After: engine.UUID(r.After), Limit: int(r.Limit)}
	if peer.minor < 2 {
		req.Limit = engine.MaxPartitionPage // it cannot ask for the next page
	}
	pg, err := s.e.ViewPartitions(r.Queue, req)
	if err != nil {
		return nil, err
	}
	out := &protocol.QueueInfoReply{QueueSummary: fromEngineQueue(&qi), Partitions: make([]protocol.PartitionInfo, 0, len(pg.Partitions))}
	room := peer.maxReply - protocol.HeaderSize - protocol.QueueSummaryBytes(&out.QueueSummary) - 10 - 1
	for i := range pg.Partitions {
		p := fromEnginePartition(&pg.Partitions[i])
		if peer.minor < 2 {
			p.Lost = nil // the 1.2 tail
		}
		if room -= protocol.PartitionInfoBytes(&p); room < 0 && len(out.Partitions) > 0 {
			break
		}
		out.Partitions = append(out.Partitions, p)
	}
	out.More = (pg.More || len(out.Partitions) < len(pg.Partitions)) && peer.minor >= 2
	return out, nil
}

// queueList answers a page of the queues by name (each summed one
// partition at a time), within the frame the client reads.
func (s *Server) queueList(r *protocol.QueueListRequest, peer adminPeer) (protocol.Body, error) {
	limit := engine.PageLimit(int(r.Limit), queueListPage, engine.MaxPartitionPage)
	if peer.minor < 2 {
		limit = engine.MaxPartitionPage // it cannot ask for the next page
	}
	heads := s.e.QueueHeads()
	i, _ := slices.BinarySearchFunc(heads, r.After, func(v engine.QueueView, name string) int { return strings.Compare(v.Name, name) })
	if i < len(heads) && r.After != "" && heads[i].Name == r.After {
		i++
	}
	out := &protocol.QueueListReply{}
	room := peer.maxReply - protocol.HeaderSize - 10 - 1
	for ; i < len(heads) && len(out.Queues) < limit; i++ {
		qi, err := s.e.QueueSummary(heads[i].Name)
		if err != nil {
			continue // deleted meanwhile
		}
		q := fromEngineQueue(&qi)
		if room -= protocol.QueueSummaryBytes(&q); room < 0 && len(out.Queues) > 0 {
			break
		}
		out.Queues = append(out.Queues, q)
	}
	out.More = i < len(heads) && peer.minor >= 2
	return out, nil
}

// browse answers a page of messages read without a lease, within the frame
// the client reads: the engine fills the page up to the bytes the frame
// leaves beyond the reply's own fields, and cuts the payload of a first
// message that alone does not fit.
func (s *Server) browse(r *protocol.BrowseRequest, peer adminPeer) (protocol.Body, error) {
	pg, err := s.e.Browse(engine.BrowseRequest{Queue: r.Queue, Partition: r.Partition, Start: engine.BrowseStart(r.Start), N: r.N,
		Resume: engine.UUID(r.Resume), ResumeOffset: r.ResumeOffset, Limit: int(r.Limit), MaxPayload: int(r.MaxPayload),
		MaxBytes: peer.maxReply - protocol.BrowseReplyFixed(len(r.Queue))})
	if err != nil {
		return nil, err
	}
	out := &protocol.BrowseReply{Queue: r.Queue, Messages: make([]protocol.BrowseMessage, len(pg.Messages)),
		Gaps: make([]protocol.BrowseGap, len(pg.Gaps)), More: pg.More, NextPartition: protocol.UUID(pg.NextPartition), NextOffset: pg.NextOffset}
	for i := range pg.Messages {
		m := &pg.Messages[i]
		w := protocol.BrowseMessage{ID: protocol.UUID(m.ID), TransactionID: m.TransactionID, TraceID: m.TraceID, CreatedAt: m.CreatedAt,
			Partition: m.Partition, PartitionID: protocol.UUID(m.PartitionID), Offset: m.Offset, Size: uint32(m.Size), Payload: m.Payload}
		if m.PayloadErr != nil {
			w.PayloadError = m.PayloadErr.Error()
		}
		out.Messages[i] = w
	}
	for i, g := range pg.Gaps {
		out.Gaps[i] = protocol.BrowseGap{Before: uint32(g.Before), PartitionID: protocol.UUID(g.PartitionID), Partition: g.Partition,
			First: g.First, Last: g.Last, Reason: protocol.GapReason(g.Reason)}
	}
	return out, nil
}

// cycle commits a streams cycle (engine.Cycle).
func (s *Server) cycle(r *protocol.CycleRequest, peer adminPeer) (protocol.Body, error) {
	c := engine.StreamCycle{QueryID: engine.UUID(r.QueryID), PartitionID: engine.UUID(r.PartitionID), Group: r.Group,
		Pushes: toEnginePush(nil, r.Pushes)}
	for i := range c.Pushes {
		c.Pushes[i].ProducerSub = peer.sub
	}
	for i := range r.State {
		op := &r.State[i]
		if !op.Kind.Valid() {
			return nil, fmt.Errorf("%w: state op %d of kind %d (want 1 upsert or 2 delete)", engine.ErrInvalid, i, op.Kind)
		}
		c.State = append(c.State, engine.StateOp{Key: op.Key, Delete: op.Kind == protocol.StateDelete, Value: op.Value,
			WindowEnd: op.WindowEnd, HasWindowEnd: op.HasWindowEnd})
	}
	if r.HasAck {
		c.Ack = &engine.StreamAck{TransactionID: r.AckTransactionID, LeaseID: engine.UUID(r.AckLeaseID), DeadLetter: r.DeadLetter,
			Error: r.AckError, Count: int(min(r.AckCount, 1<<31)), ReleaseLease: r.ReleaseLease}
	}
	res, err := s.e.Cycle(context.Background(), c)
	if err != nil {
		return nil, err
	}
	out := &protocol.CycleReply{Queue: res.Queue, StateOpsApplied: uint64(res.StateOpsApplied), Pushes: fromEnginePushResults(nil, res.Pushes)}
	if a := res.Ack; a != nil {
		out.HasAck, out.AckCount, out.LeaseReleased, out.DeadLettered = true, uint64(a.Count), a.LeaseReleased, a.DeadLettered
	}
	return out, nil
}
