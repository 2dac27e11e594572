package protocol

// AckStatus is one of the four answers to a delivered message. The numbers
// match the engine's.
type AckStatus uint8

const (
	AckCompleted AckStatus = 1 // done; the cursor may move past it
	AckFailed    AckStatus = 2 // spends a retry; comes back after retryDelay, or goes to the DLQ
	AckRetry     AckStatus = 3 // comes back at once; spends no retry
	AckDLQ       AckStatus = 4 // filed in the dead-letter queue now
)

func (s AckStatus) String() string {
	switch s {
	case AckCompleted:
		return "completed"
	case AckFailed:
		return "failed"
	case AckRetry:
		return "retry"
	case AckDLQ:
		return "dlq"
	}
	return "unknown"
}

// Valid reports whether s is a defined status. Decoders accept any value;
// the receiver checks.
func (s AckStatus) Valid() bool { return s >= AckCompleted && s <= AckDLQ }

// AckItem acknowledges one delivered message, named by its partition id and
// either its Offset (when HasOffset) or its MessageID or TransactionID.
//
//	uuid partitionId | bool hasOffset | uv offset | uuid messageId |
//	str transactionId | uuid leaseId | str group | u8 status | str error
type AckItem struct {
	PartitionID   UUID
	HasOffset     bool
	Offset        uint64 // sent (as 0 when unused) even without HasOffset
	MessageID     UUID
	TransactionID string
	LeaseID       UUID   // zero: no lease named
	Group         string // "" means the queue-mode group
	Status        AckStatus
	Error         string // kept with a dead-letter entry
}

const minAckItem = 16 + 1 + 1 + 16 + 1 + 16 + 1 + 1 + 1

// AckResult answers one AckItem, in order. Code is CodeOK when the ack took
// effect (or repeats one that already did); a refused ack is a normal
// answer with its code and reason.
//
//	u16 code | str error | uv offset | bool leaseReleased | bool deadLettered
type AckResult struct {
	Code          Code
	Error         string
	Offset        uint64
	LeaseReleased bool // the ack released (or ended) the lease
	DeadLettered  bool // the message is now in the dead-letter queue
}

const minAckResult = 2 + 1 + 1 + 1 + 1

// AckRequest acknowledges messages, applied in order.
//
//	uv count | count × AckItem
type AckRequest struct {
	Items []AckItem
	arena
}

// AckReply answers an AckRequest: one result per item, in order.
//
//	uv count | count × AckResult
type AckReply struct {
	Items []AckResult
	arena
}

func (*AckRequest) Op() Op        { return OpAck }
func (*AckRequest) IsReply() bool { return false }
func (*AckReply) Op() Op          { return OpAck }
func (*AckReply) IsReply() bool   { return true }

func appendAckItems(dst []byte, items []AckItem) []byte {
	dst = appendUv(dst, uint64(len(items)))
	for i := range items {
		dst = AppendAckItem(dst, &items[i])
	}
	return dst
}

// AppendAckItem appends one item of a frame begun with AppendAckRequestStart.
func AppendAckItem(dst []byte, it *AckItem) []byte {
	dst = appendUUID(dst, it.PartitionID)
	dst = appendBool(dst, it.HasOffset)
	dst = appendUv(dst, it.Offset)
	dst = appendUUID(dst, it.MessageID)
	dst = appendStr(dst, it.TransactionID)
	dst = appendUUID(dst, it.LeaseID)
	dst = appendStr(dst, it.Group)
	dst = append(dst, byte(it.Status))
	return appendStr(dst, it.Error)
}

func decodeAckItems(d *dec, items []AckItem) []AckItem {
	items = resize(items, d.count(minAckItem))
	for i := range items {
		it := &items[i]
		it.PartitionID = d.uuid()
		it.HasOffset = d.bool()
		it.Offset = d.uv()
		it.MessageID = d.uuid()
		it.TransactionID = d.str()
		it.LeaseID = d.uuid()
		it.Group = d.str()
		it.Status = AckStatus(d.u8())
		it.Error = d.str()
	}
	return items
}

func appendAckResults(dst []byte, res []AckResult) []byte {
	dst = appendUv(dst, uint64(len(res)))
	for i := range res {
		r := &res[i]
		dst = appendU16(dst, uint16(r.Code))
		dst = appendStr(dst, r.Error)
		dst = appendUv(dst, r.Offset)
		dst = appendBool(dst, r.LeaseReleased)
		dst = appendBool(dst, r.DeadLettered)
	}
	return dst
}

func decodeAckResults(d *dec, res []AckResult) []AckResult {
	res = resize(res, d.count(minAckResult))
	for i := range res {
		r := &res[i]
		r.Code = Code(d.u16())
		r.Error = d.str()
		r.Offset = d.uv()
		r.LeaseReleased = d.bool()
		r.DeadLettered = d.bool()
	}
	return res
}

func (r *AckRequest) AppendBody(dst []byte) []byte { return appendAckItems(dst, r.Items) }

func (r *AckRequest) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Items = decodeAckItems(&d, r.Items)
	return d.finish("ack request")
}

func (r *AckReply) AppendBody(dst []byte) []byte { return appendAckResults(dst, r.Items) }

func (r *AckReply) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Items = decodeAckResults(&d, r.Items)
	return d.finish("ack reply")
}

// AppendAckRequest appends a whole Ack request frame.
func AppendAckRequest(dst []byte, id uint64, r *AckRequest) []byte { return AppendFrame(dst, id, r) }

// AppendAckRequestStart begins an Ack request frame of count items (a
// client encodes them one by one, without an AckRequest value): append each
// with AppendAckItem, then call PatchLength(dst, start).
func AppendAckRequestStart(dst []byte, id uint64, count int) (out []byte, start int) {
	return appendCountedStart(dst, OpAck, id, count)
}

// AppendAckReply appends a whole Ack reply frame.
func AppendAckReply(dst []byte, id uint64, r *AckReply) []byte { return AppendFrame(dst, id, r) }

// LeaseExtendRequest pushes a lease's expiry to at least now + DurationMs.
//
//	uuid leaseId | uv durationMs
type LeaseExtendRequest struct {
	LeaseID    UUID
	DurationMs uint64
}

// LeaseExtendReply answers LeaseExtend with the lease's new expiry.
//
//	i64 expires
type LeaseExtendReply struct {
	Expires int64 // Unix nanoseconds
}

func (*LeaseExtendRequest) Op() Op        { return OpLeaseExtend }
func (*LeaseExtendRequest) IsReply() bool { return false }
func (*LeaseExtendReply) Op() Op          { return OpLeaseExtend }
func (*LeaseExtendReply) IsReply() bool   { return true }

// Detach does nothing: the value holds no strings.
func (*LeaseExtendRequest) Detach() {}

// Detach does nothing: the value holds no strings.
func (*LeaseExtendReply) Detach() {}

func (r *LeaseExtendRequest) AppendBody(dst []byte) []byte {
	return appendUv(appendUUID(dst, r.LeaseID), r.DurationMs)
}

func (r *LeaseExtendRequest) Decode(body []byte) error {
	d := dec{b: body}
	r.LeaseID = d.uuid()
	r.DurationMs = d.uv()
	return d.finish("lease extend request")
}

func (r *LeaseExtendReply) AppendBody(dst []byte) []byte { return appendI64(dst, r.Expires) }

func (r *LeaseExtendReply) Decode(body []byte) error {
	d := dec{b: body}
	r.Expires = d.i64()
	return d.finish("lease extend reply")
}

// AppendLeaseExtendRequest appends a whole LeaseExtend request frame.
func AppendLeaseExtendRequest(dst []byte, id uint64, r *LeaseExtendRequest) []byte {
	return AppendFrame(dst, id, r)
}

// AppendLeaseExtendReply appends a whole LeaseExtend reply frame.
func AppendLeaseExtendReply(dst []byte, id uint64, r *LeaseExtendReply) []byte {
	return AppendFrame(dst, id, r)
}
