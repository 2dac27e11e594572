package client

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/regentmq/regent/protocol"
)

// PeekRequest selects messages to look at without leasing them: a peek
// creates nothing, takes no lease and moves no cursor, so every consumer
// still gets the messages it shows.
type PeekRequest struct {
	Queue     string
	Partition string // "" = every partition, in the order they were created
	// From is the first offset read of each partition; with Last > 0, each
	// partition's last Last offsets are read instead (a deleted message
	// among them comes as a gap).
	From uint64
	Last int
	// Limit caps the entries (messages and gaps) of one page: 0 means the
	// broker's default (100); the broker caps it at MaxPeekPage. A page
	// also holds only what fits one reply, so it may be shorter.
	Limit int
	// MaxPayload cuts each payload to at most this many bytes (0: whole,
	// as far as one reply allows).
	MaxPayload int
	// After is where a page starts: zero for the first page, the previous
	// page's Next to go on.
	After PeekCursor
}

// MaxPeekPage is the most entries a broker puts in one peek page.
const MaxPeekPage = 10_000

// PeekCursor is where a peek goes on: a partition, and the offset in it.
type PeekCursor struct {
	Partition ID
	Offset    uint64
}

// IsZero reports whether c is the zero cursor (the first page).
func (c PeekCursor) IsZero() bool { return c == PeekCursor{} }

// PeekMessage is a message as a peek shows it (no lease, no group).
type PeekMessage struct {
	ID            ID
	TransactionID string
	TraceID       string
	CreatedAt     time.Time
	Queue         string
	Partition     string
	PartitionID   ID
	Offset        uint64
	// Payload may be cut (PeekRequest.MaxPayload, or a message that
	// alone does not fit one reply): Size is the whole payload's length.
	Payload []byte
	Size    int
	// PayloadError says why Payload is missing: a sealed payload that no
	// key of the broker opens.
	PayloadError string
}

// Cut reports whether Payload is shorter than the message's payload.
func (m *PeekMessage) Cut() bool { return m.PayloadError == "" && len(m.Payload) < m.Size }

// GapReason says why a peek passed over offsets.
type GapReason uint8

const (
	GapRetention  GapReason = 1 // removed by retention
	GapLost       GapReason = 2 // lost to journal damage (a salvaged start skipped them)
	GapUnreadable GapReason = 3 // their stored data went bad since the broker started
	GapDeleted    GapReason = 4 // deleted one by one
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
	return "gap(" + strconv.Itoa(int(g)) + ")"
}

// PeekGap is a run of offsets, First to Last, of a partition that a peek
// passed over without messages. It comes before Messages[Before] of its
// page (after the last when Before is their count).
type PeekGap struct {
	Before      int
	Partition   string
	PartitionID ID
	First, Last uint64
	Reason      GapReason
}

// PeekPage is one page of a peek.
type PeekPage struct {
	Messages []PeekMessage // each partition's oldest first
	Gaps     []PeekGap
	// More: entries follow; ask again with PeekRequest.After = Next.
	More bool
	Next PeekCursor
}

// ErrPeekUnsupported: the broker speaks a protocol older than 1.3, which
// has no peek. It matches protocol.ErrUnknownOp.
var ErrPeekUnsupported = protocol.NewError(protocol.CodeUnknownOp, "the broker speaks protocol 1.2 or older, which has no peek (browse): upgrade it")

// Peek reads one page of a queue's messages without leasing them. A queue
// or partition that does not exist is an error (code queue_not_found,
// partition_not_found); a start beyond the end is an empty page.
func (c *Client) Peek(ctx context.Context, r PeekRequest) (PeekPage, error) {
	if r.Last < 0 || r.Limit < 0 || r.MaxPayload < 0 {
		return PeekPage{}, errors.New("client: Peek with a negative Last, Limit or MaxPayload")
	}
	req := protocol.BrowseRequest{Queue: r.Queue, Partition: r.Partition, N: r.From, Limit: uint32(min(r.Limit, MaxPeekPage)),
		MaxPayload: uint32(min(r.MaxPayload, 1<<31)), Resume: protocol.UUID(r.After.Partition), ResumeOffset: r.After.Offset}
	if r.Last > 0 {
		req.Start, req.N = protocol.BrowseLast, uint64(r.Last)
	}
	cn, err := c.conn(ctx)
	if err != nil {
		return PeekPage{}, err
	}
	if cn.minor < 3 {
		// A 1.2 broker answers an opcode it does not know by closing the
		// connection: not sent.
		return PeekPage{}, ErrPeekUnsupported
	}
	var reply protocol.BrowseReply
	if err := c.do(ctx, protocol.OpBrowse, func(dst []byte, id uint64) []byte { return protocol.AppendBrowseRequest(dst, id, &req) }, &reply); err != nil {
		return PeekPage{}, err
	}
	// The strings and payloads stay in the reply's arena, which no other
	// call reuses.
	out := PeekPage{Messages: make([]PeekMessage, len(reply.Messages)), Gaps: make([]PeekGap, len(reply.Gaps)), More: reply.More}
	if reply.More {
		out.Next = PeekCursor{Partition: ID(reply.NextPartition), Offset: reply.NextOffset}
	}
	for i := range reply.Messages {
		m := &reply.Messages[i]
		out.Messages[i] = PeekMessage{ID: ID(m.ID), TransactionID: m.TransactionID, TraceID: m.TraceID, CreatedAt: unixNano(m.CreatedAt),
			Queue: reply.Queue, Partition: m.Partition, PartitionID: ID(m.PartitionID), Offset: m.Offset, Payload: m.Payload,
			Size: int(m.Size), PayloadError: m.PayloadError}
	}
	for i, g := range reply.Gaps {
		out.Gaps[i] = PeekGap{Before: int(g.Before), Partition: g.Partition, PartitionID: ID(g.PartitionID), First: g.First, Last: g.Last,
			Reason: GapReason(g.Reason)}
	}
	return out, nil
}
