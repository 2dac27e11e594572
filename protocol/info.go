package protocol

// QueueSummary describes a queue without its partitions.
//
//	str name | uuid id | i64 created | QueueOptions | uv partitionCount |
//	uv messages | uv groupCount | groupCount × str | uv deadLetters
type QueueSummary struct {
	Name           string
	ID             UUID
	Created        int64 // Unix nanoseconds
	Options        QueueOptions
	PartitionCount uint64
	Messages       uint64 // messages held
	Groups         []string
	DeadLetters    uint64
}

const minQueueSummary = 1 + 16 + 8 + minQueueOptions + 1 + 1 + 1 + 1

// GroupCursor is a consumer group's position on one partition.
//
//	str group | uv cursor | uv lag | bool leased | uuid leaseId |
//	i64 leaseExpires | i64 blockedUntil | uv retrying
type GroupCursor struct {
	Group        string
	Cursor       uint64 // first offset not finished
	Lag          uint64 // messages from the cursor to the end
	Leased       bool
	LeaseID      UUID
	LeaseExpires int64 // Unix nanoseconds
	BlockedUntil int64 // Unix nanoseconds: a failed message waits out its retry delay
	Retrying     uint64
}

const minGroupCursor = 1 + 1 + 1 + 1 + 16 + 8 + 8 + 1

// PartitionInfo describes one partition.
//
//	str name | uuid id | uv low | uv next | i64 oldest | i64 newest |
//	i64 created | uv groupCount | groupCount × GroupCursor
type PartitionInfo struct {
	Name    string
	ID      UUID
	Low     uint64 // oldest offset held
	Next    uint64 // offset of the next message
	Oldest  int64  // createdAt of the oldest message held, Unix nanoseconds (0 if none)
	Newest  int64
	Created int64
	Groups  []GroupCursor
	// Lost lists the offsets lost to journal damage (a salvaged start
	// skipped the entries that held them; consumers pass over them). It
	// travels after the partitions (QueueInfoReply), to 1.2 clients.
	Lost []OffsetRange
}

// OffsetRange is the offsets First to Last (inclusive) of a partition.
type OffsetRange struct{ First, Last uint64 }

const minPartitionInfo = 1 + 16 + 1 + 1 + 8 + 8 + 8 + 1

func appendSummary(dst []byte, q *QueueSummary) []byte {
	dst = appendStr(dst, q.Name)
	dst = appendUUID(dst, q.ID)
	dst = appendI64(dst, q.Created)
	dst = appendOptions(dst, &q.Options)
	dst = appendUv(dst, q.PartitionCount)
	dst = appendUv(dst, q.Messages)
	dst = appendUv(dst, uint64(len(q.Groups)))
	for _, g := range q.Groups {
		dst = appendStr(dst, g)
	}
	return appendUv(dst, q.DeadLetters)
}

func decodeSummary(d *dec, q *QueueSummary) {
	q.Name = d.str()
	q.ID = d.uuid()
	q.Created = d.i64()
	decodeOptions(d, &q.Options)
	q.PartitionCount = d.uv()
	q.Messages = d.uv()
	q.Groups = resize(q.Groups, d.count(1))
	for i := range q.Groups {
		q.Groups[i] = d.str()
	}
	q.DeadLetters = d.uv()
}

func appendPartitionInfo(dst []byte, p *PartitionInfo) []byte {
	dst = appendStr(dst, p.Name)
	dst = appendUUID(dst, p.ID)
	dst = appendUv(dst, p.Low)
	dst = appendUv(dst, p.Next)
	dst = appendI64(dst, p.Oldest)
	dst = appendI64(dst, p.Newest)
	dst = appendI64(dst, p.Created)
	dst = appendUv(dst, uint64(len(p.Groups)))
	for i := range p.Groups {
		g := &p.Groups[i]
		dst = appendStr(dst, g.Group)
		dst = appendUv(dst, g.Cursor)
		dst = appendUv(dst, g.Lag)
		dst = appendBool(dst, g.Leased)
		dst = appendUUID(dst, g.LeaseID)
		dst = appendI64(dst, g.LeaseExpires)
		dst = appendI64(dst, g.BlockedUntil)
		dst = appendUv(dst, g.Retrying)
	}
	return dst
}

func decodePartitionInfo(d *dec, p *PartitionInfo) {
	p.Name = d.str()
	p.ID = d.uuid()
	p.Low = d.uv()
	p.Next = d.uv()
	p.Oldest = d.i64()
	p.Newest = d.i64()
	p.Created = d.i64()
	p.Lost = p.Lost[:0]
	p.Groups = resize(p.Groups, d.count(minGroupCursor))
	for i := range p.Groups {
		g := &p.Groups[i]
		g.Group = d.str()
		g.Cursor = d.uv()
		g.Lag = d.uv()
		g.Leased = d.bool()
		g.LeaseID = d.uuid()
		g.LeaseExpires = d.i64()
		g.BlockedUntil = d.i64()
		g.Retrying = d.uv()
	}
}

// QueueInfoRequest asks for one queue with a page of its partitions and
// their cursors: the partitions after After (a partition id; zero: from
// the first), in creation order, at most Limit of them (0: the server's
// default page).
//
//	str queue | [uuid after | uv limit]   (1.2)
//
// The page fields are sent when either is set, and only to a 1.2 server (a
// 1.1 server refuses them as trailing bytes). A request without them gets
// the first partitions that fit one reply.
type QueueInfoRequest struct {
	Queue string
	After UUID
	Limit uint32
	arena
}

// QueueInfoReply describes one queue: its summary (PartitionCount counts
// them all) and a page of its partitions.
//
//	QueueSummary | uv partitionCount | partitionCount × PartitionInfo |
//	[bool more | [uv lostCount | lostCount × Lost]]   (1.2)
//	Lost: uv partition (index in the page) | uv ranges | ranges × (uv first | uv last)
//
// The 1.2 tail is sent when there is more, or a partition of the page lost
// offsets (PartitionInfo.Lost), and only to a client that said 1.2.
type QueueInfoReply struct {
	QueueSummary
	Partitions []PartitionInfo
	// More: partitions follow the page; ask again with After set to the
	// last one's ID. Sent (only when true) to clients that said 1.2.
	More bool
	arena
}

func (*QueueInfoRequest) Op() Op        { return OpQueueInfo }
func (*QueueInfoRequest) IsReply() bool { return false }
func (*QueueInfoReply) Op() Op          { return OpQueueInfo }
func (*QueueInfoReply) IsReply() bool   { return true }

func (r *QueueInfoRequest) AppendBody(dst []byte) []byte {
	dst = appendStr(dst, r.Queue)
	if r.After != (UUID{}) || r.Limit != 0 {
		dst = appendUUID(dst, r.After)
		dst = appendUv(dst, uint64(r.Limit))
	}
	return dst
}

func (r *QueueInfoRequest) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Queue = d.str()
	r.After, r.Limit = UUID{}, 0
	if len(d.b) >= 16+1 { // 1.2; fewer bytes are trailing
		r.After = d.uuid()
		r.Limit = d.uv32()
	}
	return d.finish("queue info request")
}

func (r *QueueInfoReply) AppendBody(dst []byte) []byte {
	dst = appendSummary(dst, &r.QueueSummary)
	dst = appendUv(dst, uint64(len(r.Partitions)))
	lost := 0
	for i := range r.Partitions {
		dst = appendPartitionInfo(dst, &r.Partitions[i])
		if len(r.Partitions[i].Lost) > 0 {
			lost++
		}
	}
	if !r.More && lost == 0 {
		return dst
	}
	dst = appendBool(dst, r.More)
	if lost == 0 {
		return dst
	}
	dst = appendUv(dst, uint64(lost))
	for i := range r.Partitions {
		p := &r.Partitions[i]
		if len(p.Lost) == 0 {
			continue
		}
		dst = appendUv(dst, uint64(i))
		dst = appendUv(dst, uint64(len(p.Lost)))
		for _, lr := range p.Lost {
			dst = appendUv(dst, lr.First)
			dst = appendUv(dst, lr.Last)
		}
	}
	return dst
}

func (r *QueueInfoReply) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	decodeSummary(&d, &r.QueueSummary)
	r.Partitions = resize(r.Partitions, d.count(minPartitionInfo))
	for i := range r.Partitions {
		decodePartitionInfo(&d, &r.Partitions[i])
	}
	r.More = false
	if len(d.b) > 0 { // 1.2
		r.More = d.bool()
		switch {
		case len(d.b) == 0 && !r.More:
			d.fail("trailing bytes") // the tail is sent only when it says something
		case len(d.b) > 0:
			n := d.count(3)
			if n == 0 {
				d.fail("trailing bytes")
			}
			for ; n > 0; n-- {
				i := d.uv()
				if i >= uint64(len(r.Partitions)) {
					d.fail("lost offsets of a partition not in the reply")
					break
				}
				p := &r.Partitions[i]
				if len(p.Lost) > 0 {
					d.fail("lost offsets of a partition given twice")
					break
				}
				p.Lost = resize(p.Lost, d.count(2))
				for k := range p.Lost {
					p.Lost[k] = OffsetRange{First: d.uv(), Last: d.uv()}
				}
			}
		}
	}
	return d.finish("queue info reply")
}

// PartitionInfoBytes is the most bytes p takes in a QueueInfoReply (a
// server fills a reply up to the frame the client reads with it).
func PartitionInfoBytes(p *PartitionInfo) int {
	n := 5 + len(p.Name) + 16 + 10 + 10 + 8 + 8 + 8 + 5
	for i := range p.Groups {
		n += 5 + len(p.Groups[i].Group) + 10 + 10 + 1 + 16 + 8 + 8 + 10
	}
	if len(p.Lost) > 0 {
		n += 10 + 5 + 20*len(p.Lost) + 5 // its entry in the tail, and the tail's count
	}
	return n
}

// maxQueueOptions is the most bytes QueueOptions take beyond namespace
// and task.
const maxQueueOptions = 5 + 7*10 + 1 + 3*10 + 10 + 3 + 5

// QueueSummaryBytes is the most bytes q takes in a reply.
func QueueSummaryBytes(q *QueueSummary) int {
	n := 5 + len(q.Name) + 16 + 8 + maxQueueOptions + 5 + len(q.Options.Namespace) + 5 + len(q.Options.Task) + 10 + 10 + 5 + 10
	for _, g := range q.Groups {
		n += 5 + len(g)
	}
	return n
}

// AppendQueueInfoRequest appends a whole QueueInfo request frame.
func AppendQueueInfoRequest(dst []byte, id uint64, r *QueueInfoRequest) []byte {
	return AppendFrame(dst, id, r)
}

// AppendQueueInfoReply appends a whole QueueInfo reply frame.
func AppendQueueInfoReply(dst []byte, id uint64, r *QueueInfoReply) []byte {
	return AppendFrame(dst, id, r)
}

// QueueListRequest asks for the queues, by name: those after the name
// After ("": from the first), at most Limit of them (0: the server's
// default page).
//
//	[str after | uv limit]   (1.2; empty before)
//
// The page fields are sent when either is set, and only to a 1.2 server. A
// request without them gets the first queues that fit one reply.
type QueueListRequest struct {
	After string
	Limit uint32
	arena
}

// QueueListReply lists a page of the queues, by name.
//
//	uv count | count × QueueSummary | [bool more]   (1.2)
type QueueListReply struct {
	Queues []QueueSummary
	// More: queues follow the page; ask again with After set to the last
	// one's name. Sent (only when true) to clients that said 1.2.
	More bool
	arena
}

func (*QueueListRequest) Op() Op        { return OpQueueList }
func (*QueueListRequest) IsReply() bool { return false }
func (*QueueListReply) Op() Op          { return OpQueueList }
func (*QueueListReply) IsReply() bool   { return true }

func (r *QueueListRequest) AppendBody(dst []byte) []byte {
	if r.After != "" || r.Limit != 0 {
		dst = appendStr(dst, r.After)
		dst = appendUv(dst, uint64(r.Limit))
	}
	return dst
}

func (r *QueueListRequest) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.After, r.Limit = "", 0
	if len(d.b) >= 2 { // 1.2; a lone byte is trailing
		r.After = d.str()
		r.Limit = d.uv32()
	}
	return d.finish("queue list request")
}

func (r *QueueListReply) AppendBody(dst []byte) []byte {
	dst = appendUv(dst, uint64(len(r.Queues)))
	for i := range r.Queues {
		dst = appendSummary(dst, &r.Queues[i])
	}
	if r.More {
		dst = appendBool(dst, true)
	}
	return dst
}

func (r *QueueListReply) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Queues = resize(r.Queues, d.count(minQueueSummary))
	for i := range r.Queues {
		decodeSummary(&d, &r.Queues[i])
	}
	r.More = false
	if len(d.b) > 0 && d.b[0] == 1 { // 1.2, sent only when true; anything else is trailing
		r.More = d.bool()
	}
	return d.finish("queue list reply")
}

// AppendQueueListRequest appends a whole QueueList request frame without
// page fields (AppendFrame sends a QueueListRequest with them).
func AppendQueueListRequest(dst []byte, id uint64) []byte {
	return AppendFrame(dst, id, &QueueListRequest{})
}

// AppendQueueListReply appends a whole QueueList reply frame.
func AppendQueueListReply(dst []byte, id uint64, r *QueueListReply) []byte {
	return AppendFrame(dst, id, r)
}

// DLQListRequest lists dead-letter entries. Empty strings and zero times
// match everything; Limit 0 means the server's default.
//
//	str queue | str group | str partition | i64 from | i64 to | uv limit | uv offset
type DLQListRequest struct {
	Queue     string
	Group     string
	Partition string
	From, To  int64 // failedAt range, Unix nanoseconds, inclusive; 0 = open
	Limit     uint32
	Offset    uint32
	arena
}

// DLQEntry is one dead-letter entry: the message (payload included), where
// and why it failed.
//
//	uuid id | str queue | str group | Message | str error | uv retryCount | i64 failedAt
type DLQEntry struct {
	ID         UUID // the entry's own id: redrive and purge name it
	Queue      string
	Group      string
	Message    Message // LeaseID zero
	Error      string
	RetryCount uint32
	FailedAt   int64 // Unix nanoseconds
}

const minDLQEntry = 16 + 1 + 1 + minMessage + 1 + 1 + 8

// DLQListReply answers DLQList: a page of entries, oldest first, and how
// many match in all. A server puts in what fits the frame its client
// reads, so a page may be shorter than the Limit asked: ask on from Offset
// plus the entries returned while Total says more match.
//
//	uv total | uv count | count × DLQEntry
type DLQListReply struct {
	Total   uint64
	Entries []DLQEntry
	arena
}

func (*DLQListRequest) Op() Op        { return OpDLQList }
func (*DLQListRequest) IsReply() bool { return false }
func (*DLQListReply) Op() Op          { return OpDLQList }
func (*DLQListReply) IsReply() bool   { return true }

func (r *DLQListRequest) AppendBody(dst []byte) []byte {
	dst = appendStr(dst, r.Queue)
	dst = appendStr(dst, r.Group)
	dst = appendStr(dst, r.Partition)
	dst = appendI64(dst, r.From)
	dst = appendI64(dst, r.To)
	dst = appendUv(dst, uint64(r.Limit))
	return appendUv(dst, uint64(r.Offset))
}

func (r *DLQListRequest) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Queue = d.str()
	r.Group = d.str()
	r.Partition = d.str()
	r.From = d.i64()
	r.To = d.i64()
	r.Limit = d.uv32()
	r.Offset = d.uv32()
	return d.finish("dlq list request")
}

func (r *DLQListReply) AppendBody(dst []byte) []byte {
	dst = appendUv(dst, r.Total)
	dst = appendUv(dst, uint64(len(r.Entries)))
	for i := range r.Entries {
		e := &r.Entries[i]
		dst = appendUUID(dst, e.ID)
		dst = appendStr(dst, e.Queue)
		dst = appendStr(dst, e.Group)
		dst = appendMessage(dst, &e.Message)
		dst = appendStr(dst, e.Error)
		dst = appendUv(dst, uint64(e.RetryCount))
		dst = appendI64(dst, e.FailedAt)
	}
	return dst
}

func (r *DLQListReply) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Total = d.uv()
	r.Entries = resize(r.Entries, d.count(minDLQEntry))
	for i := range r.Entries {
		e := &r.Entries[i]
		e.ID = d.uuid()
		e.Queue = d.str()
		e.Group = d.str()
		decodeMessage(&d, &e.Message)
		e.Error = d.str()
		e.RetryCount = d.uv32()
		e.FailedAt = d.i64()
	}
	return d.finish("dlq list reply")
}

// AppendDLQListRequest appends a whole DLQList request frame.
func AppendDLQListRequest(dst []byte, id uint64, r *DLQListRequest) []byte {
	return AppendFrame(dst, id, r)
}

// AppendDLQListReply appends a whole DLQList reply frame.
func AppendDLQListReply(dst []byte, id uint64, r *DLQListReply) []byte {
	return AppendFrame(dst, id, r)
}

// StatsRequest asks for the server's counters. Its body is empty.
type StatsRequest struct{ empty }

// Counter is a named figure beyond the fixed ones of StatsReply.
type Counter struct {
	Name  string
	Value int64
}

// StatsReply carries the server's counters since start: the engine's, the
// transport's and the journal's, and named extras for figures added later.
//
//	uv queues | uv pushed | uv popped | uv acked | uv deadLettered |
//	sv cacheBytes | uv connections | uv fsyncs | uv fsyncNanos |
//	uv bytesWritten | uv entries | uv extraCount | extraCount × (str name | sv value)
type StatsReply struct {
	Queues       uint64
	Pushed       uint64
	Popped       uint64
	Acked        uint64
	DeadLettered uint64
	CacheBytes   int64
	Connections  uint64
	Fsyncs       uint64 // journal fsync calls
	FsyncNanos   uint64 // total time spent in fsync
	BytesWritten uint64 // journal bytes written
	Entries      uint64 // journal entries written
	Extra        []Counter
	arena
}

func (*StatsRequest) Op() Op        { return OpStats }
func (*StatsRequest) IsReply() bool { return false }
func (*StatsReply) Op() Op          { return OpStats }
func (*StatsReply) IsReply() bool   { return true }

func (r *StatsReply) AppendBody(dst []byte) []byte {
	dst = appendUv(dst, r.Queues)
	dst = appendUv(dst, r.Pushed)
	dst = appendUv(dst, r.Popped)
	dst = appendUv(dst, r.Acked)
	dst = appendUv(dst, r.DeadLettered)
	dst = appendSv(dst, r.CacheBytes)
	dst = appendUv(dst, r.Connections)
	dst = appendUv(dst, r.Fsyncs)
	dst = appendUv(dst, r.FsyncNanos)
	dst = appendUv(dst, r.BytesWritten)
	dst = appendUv(dst, r.Entries)
	dst = appendUv(dst, uint64(len(r.Extra)))
	for i := range r.Extra {
		dst = appendStr(dst, r.Extra[i].Name)
		dst = appendSv(dst, r.Extra[i].Value)
	}
	return dst
}

func (r *StatsReply) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Queues = d.uv()
	r.Pushed = d.uv()
	r.Popped = d.uv()
	r.Acked = d.uv()
	r.DeadLettered = d.uv()
	r.CacheBytes = d.sv()
	r.Connections = d.uv()
	r.Fsyncs = d.uv()
	r.FsyncNanos = d.uv()
	r.BytesWritten = d.uv()
	r.Entries = d.uv()
	r.Extra = resize(r.Extra, d.count(2))
	for i := range r.Extra {
		r.Extra[i].Name = d.str()
		r.Extra[i].Value = d.sv()
	}
	return d.finish("stats reply")
}

// AppendStatsRequest appends a whole Stats request frame.
func AppendStatsRequest(dst []byte, id uint64) []byte { return AppendFrame(dst, id, &StatsRequest{}) }

// AppendStatsReply appends a whole Stats reply frame.
func AppendStatsReply(dst []byte, id uint64, r *StatsReply) []byte { return AppendFrame(dst, id, r) }
