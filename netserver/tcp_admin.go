package netserver

import (
	"context"
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
	decoded, _ := req.(interface{ Poison() })
	j := &adminJob{op: op, req: req}
	if !j.begin(tc, op, id, decoded) {
		return true
	}
	go func() {
		j.reply, j.err = tc.s.adminOp(req)
		j.finish(j)
	}()
	return true
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

func (s *TCPServer) adminOp(req protocol.Body) (protocol.Body, error) {
	e := s.e
	switch r := req.(type) {
	case *protocol.ConfigureRequest:
		res, err := e.Configure(context.Background(), r.Queue, toEngineOptions(&r.Options))
		if err != nil {
			return nil, err
		}
		return &protocol.ConfigureReply{QueueID: protocol.UUID(res.QueueID), PartitionID: protocol.UUID(res.PartitionID),
			Created: res.Created, Options: fromEngineOptions(&res.Options)}, nil
	case *protocol.QueueInfoRequest:
		qi, err := e.Queue(r.Queue)
		if err != nil {
			return nil, err
		}
		return &protocol.QueueInfoReply{QueueSummary: fromEngineQueue(&qi), Partitions: fromEnginePartitions(qi.PartitionList)}, nil
	case *protocol.QueueListRequest:
		qs := e.Queues()
		out := &protocol.QueueListReply{Queues: make([]protocol.QueueSummary, len(qs))}
		for i := range qs {
			out.Queues[i] = fromEngineQueue(&qs[i])
		}
		return out, nil
	case *protocol.DeleteQueueRequest:
		ok, err := e.DeleteQueue(context.Background(), r.Queue)
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
		f := engine.DLQFilter{Queue: r.Queue, Group: r.Group, Partition: r.Partition, Limit: int(r.Limit), Offset: int(r.Offset)}
		if r.From != 0 {
			f.From = time.Unix(0, r.From)
		}
		if r.To != 0 {
			f.To = time.Unix(0, r.To)
		}
		entries, total, err := e.DLQ(f)
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
