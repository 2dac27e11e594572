package protocol

// DLQSelect names dead-letter entries: those matching the filter, restricted
// to IDs when IDs is not empty.
//
//	str queue | str group | str partition | i64 from | i64 to | uv count | count × uuid id
type DLQSelect struct {
	Queue     string
	Group     string
	Partition string
	From, To  int64 // failedAt range, Unix nanoseconds, inclusive; 0 = open
	IDs       []UUID
}

func appendDLQSelect(dst []byte, s *DLQSelect) []byte {
	dst = appendStr(dst, s.Queue)
	dst = appendStr(dst, s.Group)
	dst = appendStr(dst, s.Partition)
	dst = appendI64(dst, s.From)
	dst = appendI64(dst, s.To)
	dst = appendUv(dst, uint64(len(s.IDs)))
	for _, id := range s.IDs {
		dst = appendUUID(dst, id)
	}
	return dst
}

func decodeDLQSelect(d *dec, s *DLQSelect) {
	s.Queue = d.str()
	s.Group = d.str()
	s.Partition = d.str()
	s.From = d.i64()
	s.To = d.i64()
	s.IDs = resize(s.IDs, d.count(16))
	for i := range s.IDs {
		s.IDs[i] = d.uuid()
	}
}

// DLQRedriveRequest puts dead-letter entries back at the end of their
// partitions as new messages.
type DLQRedriveRequest struct {
	DLQSelect
	arena
}

// Redriven is one entry put back: its id, the new message and where it is.
//
//	uuid entry | uuid message | uuid partitionId | str queue | str partition
type Redriven struct {
	Entry       UUID
	MessageID   UUID
	PartitionID UUID
	Queue       string
	Partition   string
}

const minRedriven = 16 + 16 + 16 + 1 + 1

// DLQRedriveReply lists the entries put back.
//
//	uv count | count × Redriven
type DLQRedriveReply struct {
	Items []Redriven
	arena
}

// DLQPurgeRequest drops dead-letter entries.
type DLQPurgeRequest struct {
	DLQSelect
	arena
}

// DLQPurgeReply says how many entries went.
//
//	uv purged
type DLQPurgeReply struct {
	Purged uint64
}

func (*DLQRedriveRequest) Op() Op        { return OpDLQRedrive }
func (*DLQRedriveRequest) IsReply() bool { return false }
func (*DLQRedriveReply) Op() Op          { return OpDLQRedrive }
func (*DLQRedriveReply) IsReply() bool   { return true }
func (*DLQPurgeRequest) Op() Op          { return OpDLQPurge }
func (*DLQPurgeRequest) IsReply() bool   { return false }
func (*DLQPurgeReply) Op() Op            { return OpDLQPurge }
func (*DLQPurgeReply) IsReply() bool     { return true }

// Detach is a no-op: the reply holds no strings.
func (*DLQPurgeReply) Detach() {}

func (r *DLQRedriveRequest) AppendBody(dst []byte) []byte { return appendDLQSelect(dst, &r.DLQSelect) }

func (r *DLQRedriveRequest) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	decodeDLQSelect(&d, &r.DLQSelect)
	return d.finish("dlq redrive request")
}

func (r *DLQRedriveReply) AppendBody(dst []byte) []byte {
	dst = appendUv(dst, uint64(len(r.Items)))
	for i := range r.Items {
		it := &r.Items[i]
		dst = appendUUID(dst, it.Entry)
		dst = appendUUID(dst, it.MessageID)
		dst = appendUUID(dst, it.PartitionID)
		dst = appendStr(dst, it.Queue)
		dst = appendStr(dst, it.Partition)
	}
	return dst
}

func (r *DLQRedriveReply) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Items = resize(r.Items, d.count(minRedriven))
	for i := range r.Items {
		it := &r.Items[i]
		it.Entry = d.uuid()
		it.MessageID = d.uuid()
		it.PartitionID = d.uuid()
		it.Queue = d.str()
		it.Partition = d.str()
	}
	return d.finish("dlq redrive reply")
}

func (r *DLQPurgeRequest) AppendBody(dst []byte) []byte { return appendDLQSelect(dst, &r.DLQSelect) }

func (r *DLQPurgeRequest) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	decodeDLQSelect(&d, &r.DLQSelect)
	return d.finish("dlq purge request")
}

func (r *DLQPurgeReply) AppendBody(dst []byte) []byte { return appendUv(dst, r.Purged) }

func (r *DLQPurgeReply) Decode(body []byte) error {
	d := dec{b: body}
	r.Purged = d.uv()
	return d.finish("dlq purge reply")
}

// AppendDLQRedriveRequest appends a whole DLQRedrive request frame.
func AppendDLQRedriveRequest(dst []byte, id uint64, r *DLQRedriveRequest) []byte {
	return AppendFrame(dst, id, r)
}

// AppendDLQRedriveReply appends a whole DLQRedrive reply frame.
func AppendDLQRedriveReply(dst []byte, id uint64, r *DLQRedriveReply) []byte {
	return AppendFrame(dst, id, r)
}

// AppendDLQPurgeRequest appends a whole DLQPurge request frame.
func AppendDLQPurgeRequest(dst []byte, id uint64, r *DLQPurgeRequest) []byte {
	return AppendFrame(dst, id, r)
}

// AppendDLQPurgeReply appends a whole DLQPurge reply frame.
func AppendDLQPurgeReply(dst []byte, id uint64, r *DLQPurgeReply) []byte {
	return AppendFrame(dst, id, r)
}
