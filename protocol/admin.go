package protocol

// OptionMask says which fields of a QueueOptions a Configure sets.
type OptionMask uint32

// One bit per QueueOptions field, in wire order.
const (
	OptLeaseTime OptionMask = 1 << iota
	OptRetryLimit
	OptRetryDelay
	OptDelayedProcessing
	OptWindowBuffer
	OptMaxSize
	OptTTL
	OptRetentionEnabled
	OptRetentionSeconds
	OptCompletedRetentionSeconds
	OptMaxWaitTimeSeconds
	OptPriority
	OptEncryptionEnabled
	OptDeadLetterQueue
	OptDLQAfterMaxRetries
	OptMaxPartitions
	OptNamespace
	OptTask

	// OptAll has every option's bit.
	OptAll = OptTask<<1 - 1

	// OptKeepUnset (1.4), in a Configure, keeps the options whose bit is
	// clear at the queue's current values (a new queue: the defaults)
	// instead of setting them back to the defaults: an update of the
	// options given, read and written in one step on the server. Sent
	// only to a server that said 1.4 or later in its Hello reply (an older
	// one refuses the request as malformed).
	OptKeepUnset OptionMask = 1 << 31
)

// QueueOptions are a queue's settings, one explicit field per engine option.
// Configure replaces all of a queue's options: a field whose bit is clear in
// Set goes back to the server's default (its value is sent but ignored),
// or, with OptKeepUnset in Set, keeps the queue's current value. Replies
// that echo options set every option's bit (OptAll).
//
//	uv set | uv leaseTimeMs | uv retryLimit | uv retryDelayMs |
//	uv delayedProcessingMs | uv windowBufferMs | uv maxSize | uv ttlMs |
//	bool retentionEnabled | uv retentionSeconds |
//	uv completedRetentionSeconds | uv maxWaitTimeSeconds | sv priority |
//	bool encryptionEnabled | bool deadLetterQueue | bool dlqAfterMaxRetries |
//	uv maxPartitions | str namespace | str task
type QueueOptions struct {
	Set                       OptionMask
	LeaseTimeMs               uint64 // lease lifetime; default 300 s
	RetryLimit                uint32 // failed acks a message survives before the DLQ; default 3
	RetryDelayMs              uint64 // wait before a failed message comes back; default 1 s
	DelayedProcessingMs       uint64 // visibility delay after push
	WindowBufferMs            uint64 // serve a partition once its newest message is this old
	MaxSize                   uint64 // messages the queue may hold; 0 = unlimited
	TTLMs                     uint64 // Queen's ttl, kept and echoed; default 3600 s
	RetentionEnabled          bool
	RetentionSeconds          uint64
	CompletedRetentionSeconds uint64
	MaxWaitTimeSeconds        uint64
	Priority                  int32
	EncryptionEnabled         bool
	DeadLetterQueue           bool
	DLQAfterMaxRetries        bool
	MaxPartitions             uint32 // 0 = unlimited
	Namespace                 string
	Task                      string
}

const minQueueOptions = 1 + 7 + 1 + 3 + 1 + 3 + 1 + 2

func appendOptions(dst []byte, o *QueueOptions) []byte {
	dst = appendUv(dst, uint64(o.Set))
	dst = appendUv(dst, o.LeaseTimeMs)
	dst = appendUv(dst, uint64(o.RetryLimit))
	dst = appendUv(dst, o.RetryDelayMs)
	dst = appendUv(dst, o.DelayedProcessingMs)
	dst = appendUv(dst, o.WindowBufferMs)
	dst = appendUv(dst, o.MaxSize)
	dst = appendUv(dst, o.TTLMs)
	dst = appendBool(dst, o.RetentionEnabled)
	dst = appendUv(dst, o.RetentionSeconds)
	dst = appendUv(dst, o.CompletedRetentionSeconds)
	dst = appendUv(dst, o.MaxWaitTimeSeconds)
	dst = appendSv(dst, int64(o.Priority))
	dst = appendBool(dst, o.EncryptionEnabled)
	dst = appendBool(dst, o.DeadLetterQueue)
	dst = appendBool(dst, o.DLQAfterMaxRetries)
	dst = appendUv(dst, uint64(o.MaxPartitions))
	dst = appendStr(dst, o.Namespace)
	return appendStr(dst, o.Task)
}

func decodeOptions(d *dec, o *QueueOptions) {
	set := d.uv32()
	if OptionMask(set)&^(OptAll|OptKeepUnset) != 0 {
		d.fail("undefined option bits")
	}
	o.Set = OptionMask(set)
	o.LeaseTimeMs = d.uv()
	o.RetryLimit = d.uv32()
	o.RetryDelayMs = d.uv()
	o.DelayedProcessingMs = d.uv()
	o.WindowBufferMs = d.uv()
	o.MaxSize = d.uv()
	o.TTLMs = d.uv()
	o.RetentionEnabled = d.bool()
	o.RetentionSeconds = d.uv()
	o.CompletedRetentionSeconds = d.uv()
	o.MaxWaitTimeSeconds = d.uv()
	o.Priority = d.sv32()
	o.EncryptionEnabled = d.bool()
	o.DeadLetterQueue = d.bool()
	o.DLQAfterMaxRetries = d.bool()
	o.MaxPartitions = d.uv32()
	o.Namespace = d.str()
	o.Task = d.str()
}

// ConfigureRequest creates a queue or replaces all of its options.
//
//	str queue | QueueOptions
type ConfigureRequest struct {
	Queue   string
	Options QueueOptions
	arena
}

// ConfigureReply answers Configure.
//
//	uuid queueId | uuid partitionId | bool created | QueueOptions
type ConfigureReply struct {
	QueueID     UUID
	PartitionID UUID // the queue's Default partition
	Created     bool // the queue did not exist before
	Options     QueueOptions
	arena
}

func (*ConfigureRequest) Op() Op        { return OpConfigure }
func (*ConfigureRequest) IsReply() bool { return false }
func (*ConfigureReply) Op() Op          { return OpConfigure }
func (*ConfigureReply) IsReply() bool   { return true }

func (r *ConfigureRequest) AppendBody(dst []byte) []byte {
	return appendOptions(appendStr(dst, r.Queue), &r.Options)
}

func (r *ConfigureRequest) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Queue = d.str()
	decodeOptions(&d, &r.Options)
	return d.finish("configure request")
}

func (r *ConfigureReply) AppendBody(dst []byte) []byte {
	dst = appendUUID(dst, r.QueueID)
	dst = appendUUID(dst, r.PartitionID)
	dst = appendBool(dst, r.Created)
	return appendOptions(dst, &r.Options)
}

func (r *ConfigureReply) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.QueueID = d.uuid()
	r.PartitionID = d.uuid()
	r.Created = d.bool()
	decodeOptions(&d, &r.Options)
	return d.finish("configure reply")
}

// AppendConfigureRequest appends a whole Configure request frame.
func AppendConfigureRequest(dst []byte, id uint64, r *ConfigureRequest) []byte {
	return AppendFrame(dst, id, r)
}

// AppendConfigureReply appends a whole Configure reply frame.
func AppendConfigureReply(dst []byte, id uint64, r *ConfigureReply) []byte {
	return AppendFrame(dst, id, r)
}

// DeleteQueueRequest removes a queue with everything in it.
//
//	str queue
type DeleteQueueRequest struct {
	Queue string
	arena
}

// DeleteQueueReply answers DeleteQueue.
//
//	bool existed
type DeleteQueueReply struct {
	Existed bool
}

func (*DeleteQueueRequest) Op() Op        { return OpDeleteQueue }
func (*DeleteQueueRequest) IsReply() bool { return false }
func (*DeleteQueueReply) Op() Op          { return OpDeleteQueue }
func (*DeleteQueueReply) IsReply() bool   { return true }

// Detach does nothing: the value holds no strings.
func (*DeleteQueueReply) Detach() {}

func (r *DeleteQueueRequest) AppendBody(dst []byte) []byte { return appendStr(dst, r.Queue) }

func (r *DeleteQueueRequest) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Queue = d.str()
	return d.finish("delete queue request")
}

func (r *DeleteQueueReply) AppendBody(dst []byte) []byte { return appendBool(dst, r.Existed) }

func (r *DeleteQueueReply) Decode(body []byte) error {
	d := dec{b: body}
	r.Existed = d.bool()
	return d.finish("delete queue reply")
}

// AppendDeleteQueueRequest appends a whole DeleteQueue request frame.
func AppendDeleteQueueRequest(dst []byte, id uint64, r *DeleteQueueRequest) []byte {
	return AppendFrame(dst, id, r)
}

// AppendDeleteQueueReply appends a whole DeleteQueue reply frame.
func AppendDeleteQueueReply(dst []byte, id uint64, r *DeleteQueueReply) []byte {
	return AppendFrame(dst, id, r)
}

// SeekRequest moves a consumer group's cursor on every partition of a queue
// (or on one): to the end, or to the first message created after Time.
//
//	str queue | str group | str partition | bool toEnd | i64 time
type SeekRequest struct {
	Queue     string
	Group     string // "" means the queue-mode group
	Partition string // "" means every partition
	ToEnd     bool
	Time      int64 // Unix nanoseconds, when not ToEnd
	arena
}

// SeekReply answers Seek.
//
//	uv partitionsMoved
type SeekReply struct {
	PartitionsMoved uint64
}

func (*SeekRequest) Op() Op        { return OpSeek }
func (*SeekRequest) IsReply() bool { return false }
func (*SeekReply) Op() Op          { return OpSeek }
func (*SeekReply) IsReply() bool   { return true }

// Detach does nothing: the value holds no strings.
func (*SeekReply) Detach() {}

func (r *SeekRequest) AppendBody(dst []byte) []byte {
	dst = appendStr(dst, r.Queue)
	dst = appendStr(dst, r.Group)
	dst = appendStr(dst, r.Partition)
	dst = appendBool(dst, r.ToEnd)
	return appendI64(dst, r.Time)
}

func (r *SeekRequest) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Queue = d.str()
	r.Group = d.str()
	r.Partition = d.str()
	r.ToEnd = d.bool()
	r.Time = d.i64()
	return d.finish("seek request")
}

func (r *SeekReply) AppendBody(dst []byte) []byte { return appendUv(dst, r.PartitionsMoved) }

func (r *SeekReply) Decode(body []byte) error {
	d := dec{b: body}
	r.PartitionsMoved = d.uv()
	return d.finish("seek reply")
}

// AppendSeekRequest appends a whole Seek request frame.
func AppendSeekRequest(dst []byte, id uint64, r *SeekRequest) []byte { return AppendFrame(dst, id, r) }

// AppendSeekReply appends a whole Seek reply frame.
func AppendSeekReply(dst []byte, id uint64, r *SeekReply) []byte { return AppendFrame(dst, id, r) }

// DeleteGroupRequest removes a consumer group from a queue, or from every
// queue when Queue is "".
//
//	str queue | str group
type DeleteGroupRequest struct {
	Queue string
	Group string
	arena
}

// DeleteGroupReply answers DeleteGroup.
//
//	uv queuesAffected
type DeleteGroupReply struct {
	QueuesAffected uint64
}

func (*DeleteGroupRequest) Op() Op        { return OpDeleteGroup }
func (*DeleteGroupRequest) IsReply() bool { return false }
func (*DeleteGroupReply) Op() Op          { return OpDeleteGroup }
func (*DeleteGroupReply) IsReply() bool   { return true }

// Detach does nothing: the value holds no strings.
func (*DeleteGroupReply) Detach() {}

func (r *DeleteGroupRequest) AppendBody(dst []byte) []byte {
	return appendStr(appendStr(dst, r.Queue), r.Group)
}

func (r *DeleteGroupRequest) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Queue = d.str()
	r.Group = d.str()
	return d.finish("delete group request")
}

func (r *DeleteGroupReply) AppendBody(dst []byte) []byte { return appendUv(dst, r.QueuesAffected) }

func (r *DeleteGroupReply) Decode(body []byte) error {
	d := dec{b: body}
	r.QueuesAffected = d.uv()
	return d.finish("delete group reply")
}

// AppendDeleteGroupRequest appends a whole DeleteGroup request frame.
func AppendDeleteGroupRequest(dst []byte, id uint64, r *DeleteGroupRequest) []byte {
	return AppendFrame(dst, id, r)
}

// AppendDeleteGroupReply appends a whole DeleteGroup reply frame.
func AppendDeleteGroupReply(dst []byte, id uint64, r *DeleteGroupReply) []byte {
	return AppendFrame(dst, id, r)
}
