package protocol

import "math"

// SubMode decides where a consumer group that has never read a queue
// starts. The numbers match the engine's.
type SubMode uint8

const (
	SubAll  SubMode = 0 // from the oldest retained message (the default)
	SubNew  SubMode = 1 // only messages pushed after the group first appeared
	SubFrom SubMode = 2 // from the first message created at or after PopRequest.From
)

func (m SubMode) String() string {
	switch m {
	case SubAll:
		return "all"
	case SubNew:
		return "new"
	case SubFrom:
		return "from"
	}
	return "unknown"
}

// Valid reports whether m is a defined mode. Decoders accept any value; the
// receiver checks.
func (m SubMode) Valid() bool { return m <= SubFrom }

// PopRequest asks for messages.
//
//	str queue | str partition | str group | u8 subscription | i64 from |
//	uv batch | uv partitions | bool wait | uv timeoutMs | bool autoAck
type PopRequest struct {
	Queue        string
	Partition    string  // "" means any partition of the queue
	Group        string  // "" means the queue-mode group
	Subscription SubMode // applies only when the group first reads the queue
	From         int64   // Unix nanoseconds, for SubFrom
	Batch        uint32  // cap on messages returned; 0 means 1
	Partitions   uint32  // cap on partitions leased; 0 means 1
	Wait         bool    // long poll until a message or the timeout
	TimeoutMs    uint32  // long-poll timeout in milliseconds; 0 means 30 s
	AutoAck      bool    // move the cursor at delivery: at most once, no lease
	// Namespace and Task, with Queue "", pop from any queue that carries
	// them, higher priority first.
	Namespace, Task string
	arena
}

// Message is one delivered message (in a PopReply, and inside a DLQEntry).
//
//	uuid id | str transactionId | str traceId | bytes payload | i64 createdAt |
//	str partition | uuid partitionId | uv offset | uuid leaseId |
//	i64 leaseExpires | uv retryCount
type Message struct {
	ID            UUID
	TransactionID string
	TraceID       string
	Payload       []byte
	CreatedAt     int64 // Unix nanoseconds
	Partition     string
	PartitionID   UUID
	Offset        uint64
	LeaseID       UUID  // zero for autoAck pops
	LeaseExpires  int64 // Unix nanoseconds; 0 without a lease
	RetryCount    uint32
}

const minMessage = 16 + 1 + 1 + 1 + 8 + 1 + 16 + 1 + 16 + 8 + 1

// PopReply answers a PopRequest. Queue and Group are sent once; an empty
// Messages is a normal answer (a long poll that timed out).
//
//	str queue | str group | uv count | count × Message | [bool cut]   (1.1)
type PopReply struct {
	Queue    string
	Group    string
	Messages []Message
	// Cut: the reply's byte budget (the frame size the client reads) left
	// out messages that were ready; pop again for them. Sent to 1.1 clients.
	Cut bool
	// compact (1.5): the reply's messages are CompactMessages. It is not
	// on the wire: the server sends them to a client that said 1.5 or later
	// in its Hello, and the client tells its decoder (SetCompact).
	compact bool
	arena
}

// SetCompact says whether the reply's messages are CompactMessages (1.5),
// for AppendBody and Decode.
func (r *PopReply) SetCompact(on bool) { r.compact = on }

func (*PopRequest) Op() Op        { return OpPop }
func (*PopRequest) IsReply() bool { return false }
func (*PopReply) Op() Op          { return OpPop }
func (*PopReply) IsReply() bool   { return true }

func (r *PopRequest) AppendBody(dst []byte) []byte {
	dst = appendStr(dst, r.Queue)
	dst = appendStr(dst, r.Partition)
	dst = appendStr(dst, r.Group)
	dst = append(dst, byte(r.Subscription))
	dst = appendI64(dst, r.From)
	dst = appendUv(dst, uint64(r.Batch))
	dst = appendUv(dst, uint64(r.Partitions))
	dst = appendBool(dst, r.Wait)
	dst = appendUv(dst, uint64(r.TimeoutMs))
	dst = appendBool(dst, r.AutoAck)
	dst = appendStr(dst, r.Namespace)
	return appendStr(dst, r.Task)
}

func (r *PopRequest) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Queue = d.str()
	r.Partition = d.str()
	r.Group = d.str()
	r.Subscription = SubMode(d.u8())
	r.From = d.i64()
	r.Batch = d.uv32()
	r.Partitions = d.uv32()
	r.Wait = d.bool()
	r.TimeoutMs = d.uv32()
	r.AutoAck = d.bool()
	r.Namespace = d.str()
	r.Task = d.str()
	return d.finish("pop request")
}

func appendMessage(dst []byte, m *Message) []byte {
	dst = appendUUID(dst, m.ID)
	dst = appendStr(dst, m.TransactionID)
	dst = appendStr(dst, m.TraceID)
	dst = appendBytes(dst, m.Payload)
	dst = appendI64(dst, m.CreatedAt)
	dst = appendStr(dst, m.Partition)
	dst = appendUUID(dst, m.PartitionID)
	dst = appendUv(dst, m.Offset)
	dst = appendUUID(dst, m.LeaseID)
	dst = appendI64(dst, m.LeaseExpires)
	return appendUv(dst, uint64(m.RetryCount))
}

func decodeMessage(d *dec, m *Message) {
	m.ID = d.uuid()
	m.TransactionID = d.str()
	m.TraceID = d.str()
	m.Payload = d.bytes()
	m.CreatedAt = d.i64()
	m.Partition = d.str()
	m.PartitionID = d.uuid()
	m.Offset = d.uv()
	m.LeaseID = d.uuid()
	m.LeaseExpires = d.i64()
	m.RetryCount = d.uv32()
}

// CompactMessage (1.5) is Message with what repeats left out: a
// transactionId that is the message's id, and the partition and the lease
// when they are the previous message's.
//
//	uuid id | uv txnTag | [txnTag-1 bytes transactionId] | str traceId | bytes payload |
//	i64 createdAt | uv partTag | [partTag-1 bytes partition | uuid partitionId] |
//	uv offset | uv retryTag | [uuid leaseId | i64 leaseExpires]
//
// txnTag 0: the transactionId is the id's text (the message was pushed
// without one; an encoder sends 0 for an empty TransactionID). partTag 0:
// the partition (name and id) of the message before it in the reply.
// retryTag is retryCount<<1, plus 1 when the lease (id and expiry) is the
// message before it's, which is then not sent. A 0 tag, or a retryTag with
// its low bit set, on the first message is malformed.
const minCompactMessage = 16 + 1 + 1 + 1 + 8 + 1 + 1 + 1

func appendCompactMessage(dst []byte, m, prev *Message) []byte {
	dst = appendUUID(dst, m.ID)
	if m.TransactionID == "" {
		dst = append(dst, 0)
	} else {
		dst = appendTagged(dst, m.TransactionID)
	}
	dst = appendStr(dst, m.TraceID)
	dst = appendBytes(dst, m.Payload)
	dst = appendI64(dst, m.CreatedAt)
	if prev != nil && m.PartitionID == prev.PartitionID && m.Partition == prev.Partition {
		dst = append(dst, 0)
	} else {
		dst = appendTagged(dst, m.Partition)
		dst = appendUUID(dst, m.PartitionID)
	}
	dst = appendUv(dst, m.Offset)
	if prev != nil && m.LeaseID == prev.LeaseID && m.LeaseExpires == prev.LeaseExpires {
		return appendUv(dst, uint64(m.RetryCount)<<1|1)
	}
	dst = appendUv(dst, uint64(m.RetryCount)<<1)
	dst = appendUUID(dst, m.LeaseID)
	return appendI64(dst, m.LeaseExpires)
}

// appendTagged appends a non-zero tag (len(s)+1) and s.
func appendTagged(dst []byte, s string) []byte {
	dst = appendUv(dst, uint64(len(s))+1)
	return append(dst, s...)
}

func decodeCompactMessage(d *dec, m, prev *Message) {
	m.ID = d.uuid()
	if t := d.uv(); t == 0 {
		m.TransactionID = d.a.idText(m.ID)
	} else {
		m.TransactionID = d.a.str(d.rawN(t - 1))
	}
	m.TraceID = d.str()
	m.Payload = d.bytes()
	m.CreatedAt = d.i64()
	if t := d.uv(); t != 0 {
		m.Partition = d.a.str(d.rawN(t - 1))
		m.PartitionID = d.uuid()
	} else if prev != nil {
		m.Partition, m.PartitionID = prev.Partition, prev.PartitionID
	} else {
		d.fail("the first message repeats a partition")
	}
	m.Offset = d.uv()
	t := d.uv()
	if t>>1 > math.MaxUint32 {
		d.fail("retry count beyond 32 bits")
	}
	m.RetryCount = uint32(t >> 1)
	if t&1 == 0 {
		m.LeaseID = d.uuid()
		m.LeaseExpires = d.i64()
	} else if prev != nil {
		m.LeaseID, m.LeaseExpires = prev.LeaseID, prev.LeaseExpires
	} else {
		d.fail("the first message repeats a lease")
	}
}

func (r *PopReply) AppendBody(dst []byte) []byte {
	dst = appendStr(dst, r.Queue)
	dst = appendStr(dst, r.Group)
	dst = appendUv(dst, uint64(len(r.Messages)))
	for i := range r.Messages {
		if r.compact {
			var prev *Message
			if i > 0 {
				prev = &r.Messages[i-1]
			}
			dst = appendCompactMessage(dst, &r.Messages[i], prev)
			continue
		}
		dst = appendMessage(dst, &r.Messages[i])
	}
	if r.Cut {
		dst = appendBool(dst, true)
	}
	return dst
}

func (r *PopReply) Decode(body []byte) error {
	if r.compact {
		return r.decodeCompact(body)
	}
	d := newDec(body, &r.arena)
	r.Queue = d.str()
	r.Group = d.str()
	r.Messages = resize(r.Messages, d.count(minMessage))
	for i := range r.Messages {
		decodeMessage(&d, &r.Messages[i])
	}
	r.Cut = false
	if len(d.b) > 0 && d.b[0] == 1 { // 1.1, sent only when true; anything else is trailing
		r.Cut = d.bool()
	}
	return d.finish("pop reply")
}

// decodeCompact is Decode of a reply of CompactMessages.
func (r *PopReply) decodeCompact(body []byte) error {
	d := dec{b: body, a: &r.arena}
	queue, group := d.raw(), d.raw()
	n := d.count(minCompactMessage)
	// Every string is bytes of the body, or an id's text (36 bytes) that a
	// message's transactionId repeats: the arena never grows.
	r.arena.reset(len(body) + 36*n)
	r.Queue, r.Group = r.arena.str(queue), r.arena.str(group)
	r.Messages = resize(r.Messages, n)
	for i := range r.Messages {
		var prev *Message
		if i > 0 {
			prev = &r.Messages[i-1]
		}
		decodeCompactMessage(&d, &r.Messages[i], prev)
	}
	r.Cut = false
	if len(d.b) > 0 && d.b[0] == 1 {
		r.Cut = d.bool()
	}
	return d.finish("pop reply")
}

// AppendPopRequest appends a whole Pop request frame.
func AppendPopRequest(dst []byte, id uint64, r *PopRequest) []byte { return AppendFrame(dst, id, r) }

// AppendPopReply appends a whole Pop reply frame.
func AppendPopReply(dst []byte, id uint64, r *PopReply) []byte { return AppendFrame(dst, id, r) }

// AppendPopReplyStart begins a PopReply frame of count messages without a
// PopReply value (a server encodes its messages straight into the frame):
// append each with AppendPopMessage, then call PatchLength(dst, start).
func AppendPopReplyStart(dst []byte, id uint64, queue, group string, count int) (out []byte, start int) {
	start = len(dst)
	dst = AppendHeader(dst, OpPop, FlagReply, id)
	dst = appendStr(dst, queue)
	dst = appendStr(dst, group)
	return appendUv(dst, uint64(count)), start
}

// AppendPopMessage appends one message of a frame begun with
// AppendPopReplyStart.
func AppendPopMessage(dst []byte, m *Message) []byte { return appendMessage(dst, m) }

// AppendPopMessageCompact appends one CompactMessage of a frame begun with
// AppendPopReplyStart; prev is the message appended before it (nil for the
// first).
func AppendPopMessageCompact(dst []byte, m, prev *Message) []byte {
	return appendCompactMessage(dst, m, prev)
}

// AppendPopReplyCut appends the Cut flag of a frame begun with
// AppendPopReplyStart, after its messages (only for 1.1 clients).
func AppendPopReplyCut(dst []byte) []byte { return appendBool(dst, true) }

// PopReplyHeaderBytes is the most bytes a PopReply frame takes beyond its
// messages, with a queue and a group name of those lengths: frame header,
// names, count and Cut flag.
func PopReplyHeaderBytes(queueLen, groupLen int) int {
	return HeaderSize + 5 + queueLen + 5 + groupLen + 10 + 1
}

// MaxMessageFixed is the most bytes a pop reply's Message takes beyond
// its payload, transactionId, traceId and partition name: ids, times,
// offset, counts and length prefixes.
const MaxMessageFixed = 16 + 5 + 5 + 5 + 8 + 5 + 16 + 10 + 16 + 8 + 5
