package client

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"time"

	"github.com/regentmq/regent/protocol"
)

// Streams: the broker keeps a stream processor's state and commits each of
// its processing cycles all or nothing (Queen's streams, over the binary
// protocol, 1.4). A processor registers a query once, then loops: pop a
// batch from the source queue (one consumer group per query), read the
// state shard of each partition it got (State), compute, and commit a
// Cycle per partition: the state changes, what goes to the sink, and the
// ack of the source messages it consumed. A cycle whose lease is no longer
// live changes nothing (ErrLeaseInvalid), so a stalled processor cannot
// double-count: its batch comes back to whoever holds the partition next.
// See ExampleClient_Cycle for a tumbling-window sum.

// ErrStreamsUnsupported: the broker speaks protocol 1.3 or older, which has
// no streams.
var ErrStreamsUnsupported = protocol.NewError(protocol.CodeUnknownOp, "the broker speaks protocol 1.3 or older, which has no streams: upgrade it")

// QueryRegistration registers a streams query (RegisterQuery).
type QueryRegistration struct {
	Name        string // the query's name, unique per broker
	SourceQueue string
	SinkQueue   string // "": none
	// ConfigHash identifies the processing the state was built by: a
	// registration with another hash is refused (protocol.CodeConflict)
	// unless Reset, which wipes the query's state.
	ConfigHash string
	Reset      bool
}

// RegisteredQuery answers RegisterQuery.
type RegisteredQuery struct {
	ID    ID   // the query's id, the same for life (resets included)
	Fresh bool // created now
	Reset bool // its hash changed and its state was wiped
}

// StateOp changes one key of a state shard: an upsert (the whole value
// replaced), or with Delete a removal.
type StateOp struct {
	Key    string
	Delete bool
	Value  []byte
	// WindowEnd, with HasWindowEnd, is what StateFilter.RipeAtOrBefore
	// compares (for a window's row: its end, in Unix milliseconds).
	WindowEnd    int64
	HasWindowEnd bool
}

// CycleAck acknowledges the source messages a cycle consumed,
// cumulatively: every message of the lease up to the one with
// TransactionID (included) is done. ReleaseLease gives the rest of the
// lease back at once, in order; without it the rest stays leased until
// the lease ends. DeadLetter files that message in the dead-letter queue
// instead (and gives the rest back).
type CycleAck struct {
	TransactionID string
	LeaseID       ID
	DeadLetter    bool
	Error         string // with DeadLetter
	Count         int    // what the answer reports (the messages this cycle consumed)
	ReleaseLease  bool
}

// Cycle is one processing cycle of a query on one source partition.
type Cycle struct {
	QueryID     ID
	PartitionID ID     // the source partition (Message.PartitionID): the state shard's key
	Group       string // the source consumer group ("": queue mode)
	State       []StateOp
	Pushes      []Item
	Ack         *CycleAck // nil: none (a cycle that only flushes state)
}

// CycleAckResult answers a cycle's ack.
type CycleAckResult struct {
	Count         int
	LeaseReleased bool
	DeadLettered  bool
}

// CycleResult answers a committed cycle.
type CycleResult struct {
	Queue           string // the source partition's queue
	StateOpsApplied int
	Pushes          PushResults
	Ack             *CycleAckResult
}

// StateFilter selects rows of a state shard; the conditions are ANDed.
type StateFilter struct {
	Keys           []string // none: every key
	Prefix         string
	RipeAtOrBefore int64 // with HasRipe: rows whose WindowEnd is at or before it
	HasRipe        bool
}

// StateRow is one row of a state shard.
type StateRow struct {
	Key       string
	Value     []byte
	UpdatedAt time.Time
}

// streams checks that the broker speaks 1.4.
func (c *Client) streams(ctx context.Context) error {
	cn, err := c.conn(ctx)
	if err != nil {
		return err
	}
	if cn.minor < 4 {
		return ErrStreamsUnsupported
	}
	return nil
}

// RegisterQuery registers a query, idempotently: the same name and config
// hash keep its id and state.
func (c *Client) RegisterQuery(ctx context.Context, q QueryRegistration) (RegisteredQuery, error) {
	if err := c.streams(ctx); err != nil {
		return RegisteredQuery{}, err
	}
	req := protocol.QueryRegisterRequest{Name: q.Name, SourceQueue: q.SourceQueue, SinkQueue: q.SinkQueue, ConfigHash: q.ConfigHash, Reset: q.Reset}
	var reply protocol.QueryRegisterReply
	if err := c.do(ctx, protocol.OpQueryRegister, func(dst []byte, id uint64) []byte { return protocol.AppendQueryRegisterRequest(dst, id, &req) }, &reply); err != nil {
		return RegisteredQuery{}, err
	}
	return RegisteredQuery{ID: ID(reply.QueryID), Fresh: reply.Fresh, Reset: reply.Reset}, nil
}

// Cycle commits a cycle all or nothing, once durable. A refused cycle
// changed nothing: errors.Is(err, ErrLeaseInvalid) when its lease ended
// (expired, or given back) — its messages come back to be processed again.
func (c *Client) Cycle(ctx context.Context, cy Cycle) (CycleResult, error) {
	if err := c.streams(ctx); err != nil {
		return CycleResult{}, err
	}
	req := protocol.CycleRequest{QueryID: protocol.UUID(cy.QueryID), PartitionID: protocol.UUID(cy.PartitionID), Group: cy.Group}
	for _, op := range cy.State {
		k := protocol.StateUpsert
		if op.Delete {
			k = protocol.StateDelete
		}
		req.State = append(req.State, protocol.StateOp{Kind: k, Key: op.Key, Value: op.Value, HasWindowEnd: op.HasWindowEnd, WindowEnd: op.WindowEnd})
	}
	for _, it := range cy.Pushes {
		req.Pushes = append(req.Pushes, protocol.PushItem{Queue: it.Queue, Partition: it.Partition, TransactionID: it.TransactionID, TraceID: it.TraceID, Payload: it.Payload})
	}
	if a := cy.Ack; a != nil {
		if a.Count < 0 {
			return CycleResult{}, errors.New("client: Cycle with a negative Ack.Count")
		}
		req.HasAck, req.AckTransactionID, req.AckLeaseID, req.DeadLetter = true, a.TransactionID, protocol.UUID(a.LeaseID), a.DeadLetter
		req.AckError, req.AckCount, req.ReleaseLease = a.Error, uint64(a.Count), a.ReleaseLease
	}
	var reply protocol.CycleReply
	if err := c.do(ctx, protocol.OpCycle, func(dst []byte, id uint64) []byte { return protocol.AppendCycleRequest(dst, id, &req) }, &reply); err != nil {
		return CycleResult{}, err
	}
	out := CycleResult{Queue: strings.Clone(reply.Queue), StateOpsApplied: int(reply.StateOpsApplied), Pushes: pushResults(reply.Pushes, cy.Pushes)}
	if reply.HasAck {
		out.Ack = &CycleAckResult{Count: int(reply.AckCount), LeaseReleased: reply.LeaseReleased, DeadLettered: reply.DeadLettered}
	}
	return out, nil
}

// State reads the rows of query's state shard for a source partition that
// f selects, by key. The rows are copies: the caller may keep them.
func (c *Client) State(ctx context.Context, query, partition ID, f StateFilter) ([]StateRow, error) {
	if err := c.streams(ctx); err != nil {
		return nil, err
	}
	req := protocol.StateGetRequest{QueryID: protocol.UUID(query), PartitionID: protocol.UUID(partition), Keys: f.Keys, Prefix: f.Prefix,
		HasRipe: f.HasRipe, RipeAtOrBefore: f.RipeAtOrBefore}
	var reply protocol.StateGetReply
	if err := c.do(ctx, protocol.OpStateGet, func(dst []byte, id uint64) []byte { return protocol.AppendStateGetRequest(dst, id, &req) }, &reply); err != nil {
		return nil, err
	}
	out := make([]StateRow, len(reply.Rows))
	for i, r := range reply.Rows {
		out[i] = StateRow{Key: strings.Clone(r.Key), Value: bytes.Clone(r.Value), UpdatedAt: time.Unix(0, r.UpdatedAt)}
	}
	return out, nil
}
