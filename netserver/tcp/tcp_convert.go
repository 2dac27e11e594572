package tcp

import (
	"time"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/protocol"
)

// Conversions between the binary protocol's types and the engine's. Strings
// are passed through, not copied: a decoded request's strings live as long
// as the request, and the engine copies what it keeps.

func toEnginePush(dst []engine.PushItem, src []protocol.PushItem) []engine.PushItem {
	dst = dst[:0]
	for i := range src {
		s := &src[i]
		dst = append(dst, engine.PushItem{Queue: s.Queue, Partition: s.Partition, TransactionID: s.TransactionID, TraceID: s.TraceID, Payload: s.Payload})
	}
	return dst
}

func fromEnginePushResults(dst []protocol.PushResult, src []engine.PushResult) []protocol.PushResult {
	dst = dst[:0]
	for i := range src {
		s := &src[i]
		r := protocol.PushResult{
			Status:        protocol.PushStatus(s.Status),
			MessageID:     protocol.UUID(s.MessageID),
			PartitionID:   protocol.UUID(s.PartitionID),
			Offset:        s.Offset,
			TransactionID: s.TransactionID,
		}
		if s.Err != nil {
			r.Code, r.Error = netserver.CodeOf(s.Err), netserver.MessageOf(s.Err)
		}
		dst = append(dst, r)
	}
	return dst
}

func toEngineAcks(dst []engine.AckItem, src []protocol.AckItem) []engine.AckItem {
	dst = dst[:0]
	for i := range src {
		s := &src[i]
		dst = append(dst, engine.AckItem{
			PartitionID:   engine.UUID(s.PartitionID),
			HasOffset:     s.HasOffset,
			Offset:        s.Offset,
			MessageID:     engine.UUID(s.MessageID),
			TransactionID: s.TransactionID,
			LeaseID:       engine.UUID(s.LeaseID),
			Group:         s.Group,
			Status:        engine.AckStatus(s.Status),
			Error:         s.Error,
		})
	}
	return dst
}

func fromEngineAckResults(dst []protocol.AckResult, src []engine.AckResult) []protocol.AckResult {
	dst = dst[:0]
	for i := range src {
		s := &src[i]
		r := protocol.AckResult{Offset: s.Offset, LeaseReleased: s.LeaseReleased, DeadLettered: s.DeadLettered}
		if s.Err != nil {
			r.Code, r.Error = netserver.CodeOf(s.Err), netserver.MessageOf(s.Err)
		}
		dst = append(dst, r)
	}
	return dst
}

func toEnginePop(r *protocol.PopRequest) engine.PopRequest {
	req := engine.PopRequest{
		Queue:        r.Queue,
		Partition:    r.Partition,
		Group:        r.Group,
		Batch:        int(min(r.Batch, 1<<30)),
		Partitions:   int(min(r.Partitions, 1<<30)),
		Wait:         r.Wait,
		Timeout:      time.Duration(r.TimeoutMs) * time.Millisecond,
		AutoAck:      r.AutoAck,
		Subscription: engine.SubMode(r.Subscription),
		Namespace:    r.Namespace,
		Task:         r.Task,
	}
	if r.Subscription == protocol.SubFrom {
		req.From = time.Unix(0, r.From)
	}
	return req
}

func fromEngineMessage(m *engine.Message) protocol.Message {
	return protocol.Message{
		ID:            protocol.UUID(m.ID),
		TransactionID: m.TransactionID,
		TraceID:       m.TraceID,
		Payload:       m.Payload,
		CreatedAt:     m.CreatedAt,
		Partition:     m.Partition,
		PartitionID:   protocol.UUID(m.PartitionID),
		Offset:        m.Offset,
		LeaseID:       protocol.UUID(m.LeaseID),
		LeaseExpires:  m.LeaseExpires,
		RetryCount:    uint32(m.RetryCount),
	}
}

// toEngineOptions applies the options a Configure sets over the defaults.
func toEngineOptions(o *protocol.QueueOptions) engine.QueueOptions {
	e := engine.DefaultQueueOptions()
	applyOptions(&e, o)
	return e
}

// applyOptions sets the options whose bit o.Set has, and leaves the others.
func applyOptions(e *engine.QueueOptions, o *protocol.QueueOptions) {
	ms := func(v uint64) time.Duration {
		return time.Duration(min(v, uint64(1<<62)/uint64(time.Millisecond))) * time.Millisecond
	}
	set := o.Set
	if set&protocol.OptLeaseTime != 0 {
		e.LeaseTime = ms(o.LeaseTimeMs)
	}
	if set&protocol.OptRetryLimit != 0 {
		e.RetryLimit = int(o.RetryLimit)
	}
	if set&protocol.OptRetryDelay != 0 {
		e.RetryDelay = ms(o.RetryDelayMs)
	}
	if set&protocol.OptDelayedProcessing != 0 {
		e.DelayedProcessing = ms(o.DelayedProcessingMs)
	}
	if set&protocol.OptWindowBuffer != 0 {
		e.WindowBuffer = ms(o.WindowBufferMs)
	}
	if set&protocol.OptMaxSize != 0 {
		e.MaxSize = int64(min(o.MaxSize, 1<<62))
	}
	if set&protocol.OptTTL != 0 {
		e.TTL = ms(o.TTLMs)
	}
	if set&protocol.OptRetentionEnabled != 0 {
		e.RetentionEnabled = o.RetentionEnabled
	}
	if set&protocol.OptRetentionSeconds != 0 {
		e.RetentionSeconds = int64(min(o.RetentionSeconds, 1<<62))
	}
	if set&protocol.OptCompletedRetentionSeconds != 0 {
		e.CompletedRetentionSeconds = int64(min(o.CompletedRetentionSeconds, 1<<62))
	}
	if set&protocol.OptMaxWaitTimeSeconds != 0 {
		e.MaxWaitTimeSeconds = int64(min(o.MaxWaitTimeSeconds, 1<<62))
	}
	if set&protocol.OptPriority != 0 {
		e.Priority = int(o.Priority)
	}
	if set&protocol.OptEncryptionEnabled != 0 {
		e.EncryptionEnabled = o.EncryptionEnabled
	}
	if set&protocol.OptDeadLetterQueue != 0 {
		e.DeadLetterQueue = o.DeadLetterQueue
	}
	if set&protocol.OptDLQAfterMaxRetries != 0 {
		e.DLQAfterMaxRetries = o.DLQAfterMaxRetries
	}
	if set&protocol.OptMaxPartitions != 0 {
		e.MaxPartitions = int(o.MaxPartitions)
	}
	if set&protocol.OptNamespace != 0 {
		e.Namespace = o.Namespace
	}
	if set&protocol.OptTask != 0 {
		e.Task = o.Task
	}
}

func fromEngineOptions(e *engine.QueueOptions) protocol.QueueOptions {
	return protocol.QueueOptions{
		Set:                       protocol.OptAll,
		LeaseTimeMs:               uint64(e.LeaseTime / time.Millisecond),
		RetryLimit:                uint32(e.RetryLimit),
		RetryDelayMs:              uint64(e.RetryDelay / time.Millisecond),
		DelayedProcessingMs:       uint64(e.DelayedProcessing / time.Millisecond),
		WindowBufferMs:            uint64(e.WindowBuffer / time.Millisecond),
		MaxSize:                   uint64(e.MaxSize),
		TTLMs:                     uint64(e.TTL / time.Millisecond),
		RetentionEnabled:          e.RetentionEnabled,
		RetentionSeconds:          uint64(e.RetentionSeconds),
		CompletedRetentionSeconds: uint64(e.CompletedRetentionSeconds),
		MaxWaitTimeSeconds:        uint64(e.MaxWaitTimeSeconds),
		Priority:                  int32(e.Priority),
		EncryptionEnabled:         e.EncryptionEnabled,
		DeadLetterQueue:           e.DeadLetterQueue,
		DLQAfterMaxRetries:        e.DLQAfterMaxRetries,
		MaxPartitions:             uint32(e.MaxPartitions),
		Namespace:                 e.Namespace,
		Task:                      e.Task,
	}
}

func fromEngineQueue(q *engine.QueueInfo) protocol.QueueSummary {
	return protocol.QueueSummary{
		Name:           q.Name,
		ID:             protocol.UUID(q.ID),
		Created:        q.Created,
		Options:        fromEngineOptions(&q.Options),
		PartitionCount: uint64(q.Partitions),
		Messages:       q.Messages,
		Groups:         q.Groups,
		DeadLetters:    uint64(q.DeadLetters),
	}
}

// toEngineDLQFilter is a dead-letter listing's filter: a page holds what
// fits the client's frame (the total tells it that more follow).
func toEngineDLQFilter(r *protocol.DLQListRequest, peer adminPeer) engine.DLQFilter {
	f := engine.DLQFilter{Queue: r.Queue, Group: r.Group, Partition: r.Partition, Limit: int(r.Limit), Offset: int(r.Offset),
		MaxBytes: peer.maxReply - protocol.HeaderSize - 20}
	if r.From != 0 {
		f.From = time.Unix(0, r.From)
	}
	if r.To != 0 {
		f.To = time.Unix(0, r.To)
	}
	return f
}

// fromEnginePartition is a partition's view in the protocol's terms (lag:
// messages from the cursor to the end).
func fromEnginePartition(s *engine.PartitionView) protocol.PartitionInfo {
	p := protocol.PartitionInfo{Name: s.Name, ID: protocol.UUID(s.ID), Low: s.Low, Next: s.Next, Oldest: s.Oldest, Newest: s.Newest}
	if len(s.Groups) > 0 {
		p.Groups = make([]protocol.GroupCursor, len(s.Groups))
	}
	if len(s.Lost) > 0 {
		p.Lost = make([]protocol.OffsetRange, len(s.Lost))
		for i, r := range s.Lost {
			p.Lost[i] = protocol.OffsetRange{First: r.First, Last: r.Last}
		}
	}
	for k, g := range s.Groups {
		p.Groups[k] = protocol.GroupCursor{
			Group: g.Group, Cursor: g.Cursor, Lag: s.Next - min(g.Cursor, s.Next), Leased: g.Leased, LeaseID: protocol.UUID(g.LeaseID),
			LeaseExpires: g.LeaseExpires, BlockedUntil: g.BlockedUntil, Retrying: uint64(g.Retrying),
		}
	}
	return p
}

func fromEngineDLQ(src []engine.DLQEntry) []protocol.DLQEntry {
	out := make([]protocol.DLQEntry, len(src))
	for i := range src {
		s := &src[i]
		out[i] = protocol.DLQEntry{
			ID:    protocol.UUID(s.ID),
			Queue: s.Message.Queue, Group: s.Message.Group, Message: fromEngineMessage(&s.Message),
			Error: s.Error, RetryCount: uint32(s.RetryCount), FailedAt: s.FailedAt,
		}
	}
	return out
}

func toEngineDLQSelect(s *protocol.DLQSelect) (engine.DLQFilter, []engine.UUID) {
	f := engine.DLQFilter{Queue: s.Queue, Group: s.Group, Partition: s.Partition}
	if s.From != 0 {
		f.From = time.Unix(0, s.From)
	}
	if s.To != 0 {
		f.To = time.Unix(0, s.To)
	}
	ids := make([]engine.UUID, len(s.IDs))
	for i, id := range s.IDs {
		ids[i] = engine.UUID(id)
	}
	return f, ids
}
