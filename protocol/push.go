package protocol

// PushItem is one message offered by a Push (and by a Transaction).
//
//	str queue | str partition | str transactionId | str traceId | bytes payload
type PushItem struct {
	Queue         string
	Partition     string // "" means the Default partition
	TransactionID string // the producer's id; "" means the message id
	TraceID       string
	Payload       []byte
}

const minPushItem = 5

// PushRequest stores messages.
//
//	uv count | count × PushItem
type PushRequest struct {
	Items []PushItem
	arena
}

// PushStatus is the outcome of one PushItem. The numbers match the engine's.
type PushStatus uint8

const (
	PushQueued    PushStatus = 1 // stored, and durable under the server's sync policy
	PushDuplicate PushStatus = 2 // the transactionId exists already; MessageID names that message
	PushFailed    PushStatus = 3 // refused; Code and Error say why
)

func (s PushStatus) String() string {
	switch s {
	case PushQueued:
		return "queued"
	case PushDuplicate:
		return "duplicate"
	case PushFailed:
		return "failed"
	}
	return "unknown"
}

// Valid reports whether s is a defined status. Decoders accept any value;
// the receiver checks.
func (s PushStatus) Valid() bool { return s >= PushQueued && s <= PushFailed }

// PushResult answers one PushItem, in order.
//
//	u8 status | uuid messageId | uuid partitionId | uv offset |
//	str transactionId | u16 code | str error
type PushResult struct {
	Status        PushStatus
	MessageID     UUID
	PartitionID   UUID
	Offset        uint64
	TransactionID string
	Code          Code // CodeOK unless Status is PushFailed
	Error         string
}

const minPushResult = 1 + 16 + 16 + 1 + 1 + 2 + 1

// PushReply answers a PushRequest: one result per item, in order.
//
//	uv count | count × PushResult
type PushReply struct {
	Items []PushResult
	arena
}

func (*PushRequest) Op() Op        { return OpPush }
func (*PushRequest) IsReply() bool { return false }
func (*PushReply) Op() Op          { return OpPush }
func (*PushReply) IsReply() bool   { return true }

func appendPushItems(dst []byte, items []PushItem) []byte {
	dst = appendUv(dst, uint64(len(items)))
	for i := range items {
		it := &items[i]
		dst = AppendPushItem(dst, it.Queue, it.Partition, it.TransactionID, it.TraceID, it.Payload)
	}
	return dst
}

// AppendPushItem appends one item of a frame begun with
// AppendPushRequestStart (a client encodes its own item type straight into
// the frame, without a PushRequest value).
func AppendPushItem(dst []byte, queue, partition, transactionID, traceID string, payload []byte) []byte {
	dst = appendStr(dst, queue)
	dst = appendStr(dst, partition)
	dst = appendStr(dst, transactionID)
	dst = appendStr(dst, traceID)
	return appendBytes(dst, payload)
}

func decodePushItems(d *dec, items []PushItem) []PushItem {
	items = resize(items, d.count(minPushItem))
	for i := range items {
		it := &items[i]
		it.Queue = d.str()
		it.Partition = d.str()
		it.TransactionID = d.str()
		it.TraceID = d.str()
		it.Payload = d.bytes()
	}
	return items
}

func appendPushResults(dst []byte, res []PushResult) []byte {
	dst = appendUv(dst, uint64(len(res)))
	for i := range res {
		r := &res[i]
		dst = append(dst, byte(r.Status))
		dst = appendUUID(dst, r.MessageID)
		dst = appendUUID(dst, r.PartitionID)
		dst = appendUv(dst, r.Offset)
		dst = appendStr(dst, r.TransactionID)
		dst = appendU16(dst, uint16(r.Code))
		dst = appendStr(dst, r.Error)
	}
	return dst
}

func decodePushResults(d *dec, res []PushResult) []PushResult {
	res = resize(res, d.count(minPushResult))
	for i := range res {
		r := &res[i]
		r.Status = PushStatus(d.u8())
		r.MessageID = d.uuid()
		r.PartitionID = d.uuid()
		r.Offset = d.uv()
		r.TransactionID = d.str()
		r.Code = Code(d.u16())
		r.Error = d.str()
	}
	return res
}

func (r *PushRequest) AppendBody(dst []byte) []byte { return appendPushItems(dst, r.Items) }

func (r *PushRequest) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Items = decodePushItems(&d, r.Items)
	return d.finish("push request")
}

func (r *PushReply) AppendBody(dst []byte) []byte { return appendPushResults(dst, r.Items) }

func (r *PushReply) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Items = decodePushResults(&d, r.Items)
	return d.finish("push reply")
}

// AppendPushRequest appends a whole Push request frame.
func AppendPushRequest(dst []byte, id uint64, r *PushRequest) []byte { return AppendFrame(dst, id, r) }

// AppendPushRequestStart begins a Push request frame of count items: append
// each with AppendPushItem, then call PatchLength(dst, start).
func AppendPushRequestStart(dst []byte, id uint64, count int) (out []byte, start int) {
	return appendCountedStart(dst, OpPush, id, count)
}

// AppendPushReply appends a whole Push reply frame.
func AppendPushReply(dst []byte, id uint64, r *PushReply) []byte { return AppendFrame(dst, id, r) }
