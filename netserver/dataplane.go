package netserver

import (
	"context"
	"time"

	"github.com/regentmq/regent/engine"
)

// DataPlane is what the data operations of both doors (push, pop, ack,
// transaction, lease extension: Queen's HTTP API v1 and the binary
// protocol's) ask of their broker. A broker that runs alone gives its
// engine (EnginePlane, one interface call per request). A cluster's broker
// gives the HTTP door one that serves every partition of the cluster: what
// its engine holds there, and the rest forwarded to the partition's owner,
// so that Queen's clients, which talk to one URL, may talk to any broker;
// its binary door keeps the engine (the Go client routes by owner itself).
// A broker of replicated shards gives both doors one over the engines of
// the shards it leads.
//
// The methods are the engine's of the same names, with the same contracts
// (done runs once, on the calling goroutine or another, and must not
// block; results are written to res in the items' order), plus the
// request's context, which a forwarded request ends with (the engine's own
// operations end by themselves and ignore it).
type DataPlane interface {
	PushAsync(ctx context.Context, items []engine.PushItem, res []engine.PushResult, done func(error))
	// PopAsync returns nil when done has run or will run without the pop
	// parking, else the waiter that withdraws it (never a nil pointer in
	// a non-nil interface). A pop is withdrawn by Cancel, not by a
	// context: a pop that took messages must give them back, which only
	// its implementation knows how to do. The pop may answer in req.Buf
	// only when it returns nil (as the engine's).
	PopAsync(req engine.PopRequest, done func(msgs []engine.Message, cut bool, err error)) PopWaiter
	AckAsync(ctx context.Context, items []engine.AckItem, res []engine.AckResult, done func(error))
	TransactionAsync(ctx context.Context, acks []engine.AckItem, pushes []engine.PushItem, done func(engine.TxnResult, error))
	// ExtendLeaseAsync answers through done: at once, or once the new
	// expiry is durable (a replicated shard's) or another broker said.
	ExtendLeaseAsync(ctx context.Context, id engine.UUID, d time.Duration, done func(time.Time, error))
	// LiveLease is the live lease of group on a partition, when the
	// broker can tell without asking another (a cluster's broker knows
	// only its own partitions' leases).
	LiveLease(partitionID engine.UUID, group string) (engine.UUID, bool)
}

// PopWaiter is a parked pop (engine.PopWaiter's contract). Cancel
// withdraws it and reports whether it was still parked: if so its done
// never runs and whatever it took goes back; if not, done has run or is
// about to.
type PopWaiter interface {
	Cancel() bool
}

// EnginePlane is the DataPlane of a broker that runs alone: its engine.
type EnginePlane struct{ E *engine.Engine }

// PushAsync is engine.Engine's.
func (p EnginePlane) PushAsync(_ context.Context, items []engine.PushItem, res []engine.PushResult, done func(error)) {
	p.E.PushAsync(items, res, done)
}

// PopAsync is engine.Engine's, its nil waiter a nil interface.
func (p EnginePlane) PopAsync(req engine.PopRequest, done func([]engine.Message, bool, error)) PopWaiter {
	if pw := p.E.PopAsync(req, done); pw != nil {
		return pw
	}
	return nil
}

// AckAsync is engine.Engine's.
func (p EnginePlane) AckAsync(_ context.Context, items []engine.AckItem, res []engine.AckResult, done func(error)) {
	p.E.AckAsync(items, res, done)
}

// TransactionAsync is engine.Engine's.
func (p EnginePlane) TransactionAsync(_ context.Context, acks []engine.AckItem, pushes []engine.PushItem, done func(engine.TxnResult, error)) {
	p.E.TransactionAsync(acks, pushes, done)
}

// ExtendLeaseAsync is engine.Engine's.
func (p EnginePlane) ExtendLeaseAsync(_ context.Context, id engine.UUID, d time.Duration, done func(time.Time, error)) {
	p.E.ExtendLeaseAsync(id, d, done)
}

// LiveLease is engine.Engine's.
func (p EnginePlane) LiveLease(partitionID engine.UUID, group string) (engine.UUID, bool) {
	return p.E.LiveLease(partitionID, group)
}
