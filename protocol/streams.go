package protocol

// Streams (1.4): the server side of stateful stream processing, as Queen's
// /streams/v1 routes (a query's registration, a cycle committed all or
// nothing, a state shard read). Sent only to a server that said 1.4 or
// later in its Hello reply.

// QueryRegisterRequest registers a streams query, idempotently: the same
// config hash keeps its state; another one is refused (CodeConflict)
// unless Reset, which wipes its state and keeps its id.
//
//	str name | str sourceQueue | str sinkQueue | str configHash | bool reset
type QueryRegisterRequest struct {
	Name        string
	SourceQueue string
	SinkQueue   string // "": none
	ConfigHash  string
	Reset       bool
	arena
}

// QueryRegisterReply answers a QueryRegisterRequest.
//
//	uuid queryId | bool fresh | bool reset
type QueryRegisterReply struct {
	QueryID UUID
	Fresh   bool // created by this request
	Reset   bool // its hash changed and its state was wiped
	arena
}

// StateOpKind is what a StateOp does.
type StateOpKind uint8

const (
	StateUpsert StateOpKind = 1 // the key's value is replaced (or created)
	StateDelete StateOpKind = 2 // the key is removed (a key that does not exist counts too)
)

// Valid reports whether k is a defined kind. Decoders accept any value; the
// receiver checks.
func (k StateOpKind) Valid() bool { return k == StateUpsert || k == StateDelete }

// StateOp changes one key of a state shard.
//
//	u8 kind | str key | bytes value | bool hasWindowEnd | sv windowEnd
//
// WindowEnd (when HasWindowEnd) is what StateGetRequest.RipeAtOrBefore
// compares; value and windowEnd are ignored for a delete.
type StateOp struct {
	Kind         StateOpKind
	Key          string
	Value        []byte
	HasWindowEnd bool
	WindowEnd    int64
}

const minStateOp = 1 + 1 + 1 + 1 + 1

// CycleRequest commits a cycle of a query on one source partition, all or
// nothing: the state ops in order, the pushes, and the ack, which completes
// the lease's messages up to the one with AckTransactionID (cumulatively),
// then gives the rest of the lease back at once (ReleaseLease) or leaves it
// leased until it ends; DeadLetter files that message in the dead-letter
// queue instead (the rest of the lease is given back).
//
//	uuid queryId | uuid partitionId | str group | uv nops | nops × StateOp |
//	uv npush | npush × PushItem | bool hasAck | str ackTransactionId |
//	uuid ackLeaseId | bool deadLetter | str ackError | uv ackCount | bool releaseLease
type CycleRequest struct {
	QueryID          UUID
	PartitionID      UUID
	Group            string // "": queue mode
	State            []StateOp
	Pushes           []PushItem
	HasAck           bool
	AckTransactionID string
	AckLeaseID       UUID
	DeadLetter       bool
	AckError         string
	AckCount         uint64
	ReleaseLease     bool
	arena
}

// CycleReply answers a CycleRequest that was committed (a refused one is an
// error reply: lease_invalid, message_not_found, query_not_found,
// too_large, or a push's refusal; nothing of it was applied).
//
//	str queue | uv stateOpsApplied | uv npush | npush × PushResult |
//	bool hasAck | uv ackCount | bool leaseReleased | bool deadLettered
type CycleReply struct {
	Queue           string // the source partition's queue ("" when unknown)
	StateOpsApplied uint64
	Pushes          []PushResult
	HasAck          bool
	AckCount        uint64
	LeaseReleased   bool
	DeadLettered    bool
	arena
}

// StateGetRequest reads the rows of a query's shard for one source
// partition that its filters select (ANDed): the keys given (none: every
// key), a key prefix, and a windowEnd at or before RipeAtOrBefore.
//
//	uuid queryId | uuid partitionId | uv nkeys | nkeys × str | str prefix |
//	bool hasRipe | sv ripeAtOrBefore
type StateGetRequest struct {
	QueryID        UUID
	PartitionID    UUID
	Keys           []string
	Prefix         string
	HasRipe        bool
	RipeAtOrBefore int64
	arena
}

// StateRow is one row of a state shard.
//
//	str key | bytes value | i64 updatedAt
type StateRow struct {
	Key       string
	Value     []byte
	UpdatedAt int64 // Unix nanoseconds
}

const minStateRow = 1 + 1 + 8

// StateGetReply answers a StateGetRequest: the rows, by key.
//
//	uv n | n × StateRow
type StateGetReply struct {
	Rows []StateRow
	arena
}

func (*QueryRegisterRequest) Op() Op        { return OpQueryRegister }
func (*QueryRegisterRequest) IsReply() bool { return false }
func (*QueryRegisterReply) Op() Op          { return OpQueryRegister }
func (*QueryRegisterReply) IsReply() bool   { return true }
func (*CycleRequest) Op() Op                { return OpCycle }
func (*CycleRequest) IsReply() bool         { return false }
func (*CycleReply) Op() Op                  { return OpCycle }
func (*CycleReply) IsReply() bool           { return true }
func (*StateGetRequest) Op() Op             { return OpStateGet }
func (*StateGetRequest) IsReply() bool      { return false }
func (*StateGetReply) Op() Op               { return OpStateGet }
func (*StateGetReply) IsReply() bool        { return true }

func (r *QueryRegisterRequest) AppendBody(dst []byte) []byte {
	dst = appendStr(dst, r.Name)
	dst = appendStr(dst, r.SourceQueue)
	dst = appendStr(dst, r.SinkQueue)
	dst = appendStr(dst, r.ConfigHash)
	return appendBool(dst, r.Reset)
}

func (r *QueryRegisterRequest) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Name = d.str()
	r.SourceQueue = d.str()
	r.SinkQueue = d.str()
	r.ConfigHash = d.str()
	r.Reset = d.bool()
	return d.finish("query register request")
}

func (r *QueryRegisterReply) AppendBody(dst []byte) []byte {
	dst = appendUUID(dst, r.QueryID)
	dst = appendBool(dst, r.Fresh)
	return appendBool(dst, r.Reset)
}

func (r *QueryRegisterReply) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.QueryID = d.uuid()
	r.Fresh = d.bool()
	r.Reset = d.bool()
	return d.finish("query register reply")
}

func (r *CycleRequest) AppendBody(dst []byte) []byte {
	dst = appendUUID(dst, r.QueryID)
	dst = appendUUID(dst, r.PartitionID)
	dst = appendStr(dst, r.Group)
	dst = appendUv(dst, uint64(len(r.State)))
	for i := range r.State {
		op := &r.State[i]
		dst = append(dst, byte(op.Kind))
		dst = appendStr(dst, op.Key)
		dst = appendBytes(dst, op.Value)
		dst = appendBool(dst, op.HasWindowEnd)
		dst = appendSv(dst, op.WindowEnd)
	}
	dst = appendPushItems(dst, r.Pushes)
	dst = appendBool(dst, r.HasAck)
	dst = appendStr(dst, r.AckTransactionID)
	dst = appendUUID(dst, r.AckLeaseID)
	dst = appendBool(dst, r.DeadLetter)
	dst = appendStr(dst, r.AckError)
	dst = appendUv(dst, r.AckCount)
	return appendBool(dst, r.ReleaseLease)
}

func (r *CycleRequest) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.QueryID = d.uuid()
	r.PartitionID = d.uuid()
	r.Group = d.str()
	r.State = resize(r.State, d.count(minStateOp))
	for i := range r.State {
		op := &r.State[i]
		op.Kind = StateOpKind(d.u8())
		op.Key = d.str()
		op.Value = d.bytes()
		op.HasWindowEnd = d.bool()
		op.WindowEnd = d.sv()
	}
	r.Pushes = decodePushItems(&d, r.Pushes)
	r.HasAck = d.bool()
	r.AckTransactionID = d.str()
	r.AckLeaseID = d.uuid()
	r.DeadLetter = d.bool()
	r.AckError = d.str()
	r.AckCount = d.uv()
	r.ReleaseLease = d.bool()
	return d.finish("cycle request")
}

func (r *CycleReply) AppendBody(dst []byte) []byte {
	dst = appendStr(dst, r.Queue)
	dst = appendUv(dst, r.StateOpsApplied)
	dst = appendPushResults(dst, r.Pushes)
	dst = appendBool(dst, r.HasAck)
	dst = appendUv(dst, r.AckCount)
	dst = appendBool(dst, r.LeaseReleased)
	return appendBool(dst, r.DeadLettered)
}

func (r *CycleReply) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Queue = d.str()
	r.StateOpsApplied = d.uv()
	r.Pushes = decodePushResults(&d, r.Pushes)
	r.HasAck = d.bool()
	r.AckCount = d.uv()
	r.LeaseReleased = d.bool()
	r.DeadLettered = d.bool()
	return d.finish("cycle reply")
}

func (r *StateGetRequest) AppendBody(dst []byte) []byte {
	dst = appendUUID(dst, r.QueryID)
	dst = appendUUID(dst, r.PartitionID)
	dst = appendUv(dst, uint64(len(r.Keys)))
	for _, k := range r.Keys {
		dst = appendStr(dst, k)
	}
	dst = appendStr(dst, r.Prefix)
	dst = appendBool(dst, r.HasRipe)
	return appendSv(dst, r.RipeAtOrBefore)
}

func (r *StateGetRequest) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.QueryID = d.uuid()
	r.PartitionID = d.uuid()
	r.Keys = resize(r.Keys, d.count(1))
	for i := range r.Keys {
		r.Keys[i] = d.str()
	}
	r.Prefix = d.str()
	r.HasRipe = d.bool()
	r.RipeAtOrBefore = d.sv()
	return d.finish("state get request")
}

func (r *StateGetReply) AppendBody(dst []byte) []byte {
	dst = appendUv(dst, uint64(len(r.Rows)))
	for i := range r.Rows {
		row := &r.Rows[i]
		dst = appendStr(dst, row.Key)
		dst = appendBytes(dst, row.Value)
		dst = appendI64(dst, row.UpdatedAt)
	}
	return dst
}

func (r *StateGetReply) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Rows = resize(r.Rows, d.count(minStateRow))
	for i := range r.Rows {
		row := &r.Rows[i]
		row.Key = d.str()
		row.Value = d.bytes()
		row.UpdatedAt = d.i64()
	}
	return d.finish("state get reply")
}

// AppendQueryRegisterRequest appends a whole QueryRegister request frame.
func AppendQueryRegisterRequest(dst []byte, id uint64, r *QueryRegisterRequest) []byte {
	return AppendFrame(dst, id, r)
}

// AppendQueryRegisterReply appends a whole QueryRegister reply frame.
func AppendQueryRegisterReply(dst []byte, id uint64, r *QueryRegisterReply) []byte {
	return AppendFrame(dst, id, r)
}

// AppendCycleRequest appends a whole Cycle request frame.
func AppendCycleRequest(dst []byte, id uint64, r *CycleRequest) []byte {
	return AppendFrame(dst, id, r)
}

// AppendCycleReply appends a whole Cycle reply frame.
func AppendCycleReply(dst []byte, id uint64, r *CycleReply) []byte { return AppendFrame(dst, id, r) }

// AppendStateGetRequest appends a whole StateGet request frame.
func AppendStateGetRequest(dst []byte, id uint64, r *StateGetRequest) []byte {
	return AppendFrame(dst, id, r)
}

// AppendStateGetReply appends a whole StateGet reply frame.
func AppendStateGetReply(dst []byte, id uint64, r *StateGetReply) []byte {
	return AppendFrame(dst, id, r)
}
