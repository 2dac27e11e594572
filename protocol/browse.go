package protocol

// BrowseStart says where a Browse starts reading each partition.
type BrowseStart uint8

const (
	// BrowseFrom starts each partition at offset N.
	BrowseFrom BrowseStart = 0
	// BrowseLast starts each partition at its last N messages (N >= 1).
	BrowseLast BrowseStart = 1
)

func (s BrowseStart) String() string {
	switch s {
	case BrowseFrom:
		return "from"
	case BrowseLast:
		return "last"
	}
	return "unknown"
}

// Valid reports whether s is a defined start. Decoders accept any value;
// the receiver checks.
func (s BrowseStart) Valid() bool { return s <= BrowseLast }

// BrowseRequest reads a queue's messages without leasing them (1.3): it
// creates nothing and moves no cursor. It names one partition, or none for
// every partition in the order they were created, and where each starts.
//
//	str queue | str partition | u8 start | uv n | uv limit | uv maxPayload |
//	uuid resume | uv resumeOffset
//
// A reply cut short (by Limit or by the frame the client reads) says where
// to go on: send the same request again with Resume and ResumeOffset set to
// the reply's NextPartition and NextOffset. The partition Resume names is
// then read from ResumeOffset, and the partitions after it as Start says.
type BrowseRequest struct {
	Queue     string
	Partition string      // "" = every partition, in creation order
	Start     BrowseStart // BrowseFrom: from offset N; BrowseLast: the last N messages of each partition
	N         uint64
	// Limit caps the entries (messages and gaps) of one reply; 0 means the
	// server's default (100), and the server caps it (10,000).
	Limit uint32
	// MaxPayload cuts each payload to at most this many bytes (0: whole
	// payloads, as far as the frame allows).
	MaxPayload   uint32
	Resume       UUID // zero: from the start
	ResumeOffset uint64
	arena
}

// BrowseMessage is one message as a Browse lists it: no lease, no retry
// count (those belong to a consumer group).
//
//	uuid id | str transactionId | str traceId | i64 createdAt | str partition |
//	uuid partitionId | uv offset | uv size | bytes payload | str payloadError
//
// Payload may be a prefix of the message's payload (BrowseRequest.MaxPayload,
// or a message that alone does not fit the frame the client reads): Size is
// the whole payload's length. PayloadError says why a payload is missing (a
// sealed payload that no key of the server opens).
type BrowseMessage struct {
	ID            UUID
	TransactionID string
	TraceID       string
	CreatedAt     int64 // Unix nanoseconds
	Partition     string
	PartitionID   UUID
	Offset        uint64
	Size          uint32
	Payload       []byte
	PayloadError  string
}

const minBrowseMessage = 16 + 1 + 1 + 8 + 1 + 16 + 1 + 1 + 1 + 1

// MaxBrowseMessageFixed is the most bytes a BrowseMessage takes beyond its
// payload and its strings (transactionId, traceId, partition,
// payloadError).
const MaxBrowseMessageFixed = 16 + 5 + 5 + 8 + 5 + 16 + 10 + 5 + 5 + 5

// GapReason says why offsets of a partition are not listed.
type GapReason uint8

const (
	GapRetention  GapReason = 1 // removed by retention (below the oldest offset held)
	GapLost       GapReason = 2 // lost to journal damage (a salvaged start skipped them)
	GapUnreadable GapReason = 3 // their journal entry went bad since the start
	GapDeleted    GapReason = 4 // deleted one by one (tombstoned)
)

func (g GapReason) String() string {
	switch g {
	case GapRetention:
		return "retention"
	case GapLost:
		return "lost"
	case GapUnreadable:
		return "unreadable"
	case GapDeleted:
		return "deleted"
	}
	return "unknown"
}

// BrowseGap is a run of offsets of one partition that a Browse passed over
// without messages, and why.
//
//	uv before | uuid partitionId | str partition | uv first | uv last | u8 reason
//
// Before places it among the reply's messages: it comes before message
// number Before (Before = the count of messages: after the last).
type BrowseGap struct {
	Before      uint32
	PartitionID UUID
	Partition   string
	First, Last uint64 // inclusive
	Reason      GapReason
}

const minBrowseGap = 1 + 16 + 1 + 1 + 1 + 1

// MaxBrowseGapFixed is the most bytes a BrowseGap takes beyond its
// partition name.
const MaxBrowseGapFixed = 5 + 16 + 5 + 10 + 10 + 1

// BrowseReply answers a BrowseRequest with a page of messages, oldest first
// within each partition, and the gaps between them.
//
//	str queue | uv count | count × BrowseMessage | uv gapCount |
//	gapCount × BrowseGap | bool more | uuid nextPartition | uv nextOffset
//
// More says that entries follow (at the time of the reply): ask again with
// Resume = NextPartition and ResumeOffset = NextOffset. Without More, the
// next fields are zero.
type BrowseReply struct {
	Queue         string
	Messages      []BrowseMessage
	Gaps          []BrowseGap
	More          bool
	NextPartition UUID
	NextOffset    uint64
	arena
}

// BrowseReplyFixed is the most bytes a BrowseReply frame takes beyond its
// messages and gaps, with a queue name of queueLen bytes: frame header,
// name, counts and the continuation.
func BrowseReplyFixed(queueLen int) int {
	return HeaderSize + 5 + queueLen + 10 + 10 + 1 + 16 + 10
}

func (*BrowseRequest) Op() Op        { return OpBrowse }
func (*BrowseRequest) IsReply() bool { return false }
func (*BrowseReply) Op() Op          { return OpBrowse }
func (*BrowseReply) IsReply() bool   { return true }

func (r *BrowseRequest) AppendBody(dst []byte) []byte {
	dst = appendStr(dst, r.Queue)
	dst = appendStr(dst, r.Partition)
	dst = append(dst, byte(r.Start))
	dst = appendUv(dst, r.N)
	dst = appendUv(dst, uint64(r.Limit))
	dst = appendUv(dst, uint64(r.MaxPayload))
	dst = appendUUID(dst, r.Resume)
	return appendUv(dst, r.ResumeOffset)
}

func (r *BrowseRequest) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Queue = d.str()
	r.Partition = d.str()
	r.Start = BrowseStart(d.u8())
	r.N = d.uv()
	r.Limit = d.uv32()
	r.MaxPayload = d.uv32()
	r.Resume = d.uuid()
	r.ResumeOffset = d.uv()
	return d.finish("browse request")
}

func (r *BrowseReply) AppendBody(dst []byte) []byte {
	dst = appendStr(dst, r.Queue)
	dst = appendUv(dst, uint64(len(r.Messages)))
	for i := range r.Messages {
		m := &r.Messages[i]
		dst = appendUUID(dst, m.ID)
		dst = appendStr(dst, m.TransactionID)
		dst = appendStr(dst, m.TraceID)
		dst = appendI64(dst, m.CreatedAt)
		dst = appendStr(dst, m.Partition)
		dst = appendUUID(dst, m.PartitionID)
		dst = appendUv(dst, m.Offset)
		dst = appendUv(dst, uint64(m.Size))
		dst = appendBytes(dst, m.Payload)
		dst = appendStr(dst, m.PayloadError)
	}
	dst = appendUv(dst, uint64(len(r.Gaps)))
	for i := range r.Gaps {
		g := &r.Gaps[i]
		dst = appendUv(dst, uint64(g.Before))
		dst = appendUUID(dst, g.PartitionID)
		dst = appendStr(dst, g.Partition)
		dst = appendUv(dst, g.First)
		dst = appendUv(dst, g.Last)
		dst = append(dst, byte(g.Reason))
	}
	dst = appendBool(dst, r.More)
	dst = appendUUID(dst, r.NextPartition)
	return appendUv(dst, r.NextOffset)
}

func (r *BrowseReply) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Queue = d.str()
	r.Messages = resize(r.Messages, d.count(minBrowseMessage))
	for i := range r.Messages {
		m := &r.Messages[i]
		m.ID = d.uuid()
		m.TransactionID = d.str()
		m.TraceID = d.str()
		m.CreatedAt = d.i64()
		m.Partition = d.str()
		m.PartitionID = d.uuid()
		m.Offset = d.uv()
		m.Size = d.uv32()
		m.Payload = d.bytes()
		m.PayloadError = d.str()
	}
	r.Gaps = resize(r.Gaps, d.count(minBrowseGap))
	for i := range r.Gaps {
		g := &r.Gaps[i]
		g.Before = d.uv32()
		g.PartitionID = d.uuid()
		g.Partition = d.str()
		g.First = d.uv()
		g.Last = d.uv()
		g.Reason = GapReason(d.u8())
	}
	r.More = d.bool()
	r.NextPartition = d.uuid()
	r.NextOffset = d.uv()
	return d.finish("browse reply")
}

// AppendBrowseRequest appends a whole Browse request frame.
func AppendBrowseRequest(dst []byte, id uint64, r *BrowseRequest) []byte {
	return AppendFrame(dst, id, r)
}

// AppendBrowseReply appends a whole Browse reply frame.
func AppendBrowseReply(dst []byte, id uint64, r *BrowseReply) []byte {
	return AppendFrame(dst, id, r)
}
