package protocol

// TransactionRequest applies acks and pushes all or nothing, in one durable
// step.
//
//	uv ackCount | ackCount × AckItem | uv pushCount | pushCount × PushItem
type TransactionRequest struct {
	Acks   []AckItem
	Pushes []PushItem
	arena
}

// TransactionReply answers a TransactionRequest. Code is CodeOK when
// everything was applied; otherwise (CodeTxnAborted, or the code of what
// refused the whole call) nothing was applied, Error says which operation
// was refused, and the per-item results say why for each.
//
//	u16 code | str error | uv ackCount | ackCount × AckResult |
//	uv pushCount | pushCount × PushResult
type TransactionReply struct {
	Code   Code
	Error  string
	Acks   []AckResult
	Pushes []PushResult
	arena
}

func (*TransactionRequest) Op() Op        { return OpTransaction }
func (*TransactionRequest) IsReply() bool { return false }
func (*TransactionReply) Op() Op          { return OpTransaction }
func (*TransactionReply) IsReply() bool   { return true }

func (r *TransactionRequest) AppendBody(dst []byte) []byte {
	return appendPushItems(appendAckItems(dst, r.Acks), r.Pushes)
}

func (r *TransactionRequest) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Acks = decodeAckItems(&d, r.Acks)
	r.Pushes = decodePushItems(&d, r.Pushes)
	return d.finish("transaction request")
}

func (r *TransactionReply) AppendBody(dst []byte) []byte {
	dst = appendU16(dst, uint16(r.Code))
	dst = appendStr(dst, r.Error)
	return appendPushResults(appendAckResults(dst, r.Acks), r.Pushes)
}

func (r *TransactionReply) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Code = Code(d.u16())
	r.Error = d.str()
	r.Acks = decodeAckResults(&d, r.Acks)
	r.Pushes = decodePushResults(&d, r.Pushes)
	return d.finish("transaction reply")
}

// AppendTransactionRequest appends a whole Transaction request frame.
func AppendTransactionRequest(dst []byte, id uint64, r *TransactionRequest) []byte {
	return AppendFrame(dst, id, r)
}

// AppendTransactionReply appends a whole Transaction reply frame.
func AppendTransactionReply(dst []byte, id uint64, r *TransactionReply) []byte {
	return AppendFrame(dst, id, r)
}
