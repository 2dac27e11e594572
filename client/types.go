package client

import (
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/regentmq/regent/protocol"
)

// ID is a 16-byte id: message ids and lease ids (UUIDv7), partition ids.
type ID [16]byte

// IsZero reports whether id is unset.
func (id ID) IsZero() bool { return id == ID{} }

// String formats id as a UUID.
func (id ID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return string(b[:])
}

// ParseID reads a UUID (hyphens optional).
func ParseID(s string) (ID, error) {
	var id ID
	var h []byte
	for i := 0; i < len(s); i++ {
		if s[i] != '-' {
			h = append(h, s[i])
		}
	}
	if len(h) != 32 {
		return id, errors.New("regent client: not a UUID: " + s)
	}
	if _, err := hex.Decode(id[:], h); err != nil {
		return id, errors.New("regent client: not a UUID: " + s)
	}
	return id, nil
}

// Item is a message to push.
type Item struct {
	Queue         string
	Partition     string // "" means the Default partition
	TransactionID string // your id for the message; the broker deduplicates on it per partition
	TraceID       string
	Payload       []byte
}

// PushStatus is the outcome of one pushed item.
type PushStatus uint8

const (
	// PushQueued: stored and durable under the broker's sync policy.
	PushQueued PushStatus = PushStatus(protocol.PushQueued)
	// PushDuplicate: the transactionId exists in that partition; MessageID
	// names the message that has it.
	PushDuplicate PushStatus = PushStatus(protocol.PushDuplicate)
	// PushFailed: refused; Err says why.
	PushFailed PushStatus = PushStatus(protocol.PushFailed)
)

func (s PushStatus) String() string { return protocol.PushStatus(s).String() }

// PushResult answers one pushed item.
type PushResult struct {
	Status        PushStatus
	MessageID     ID
	PartitionID   ID
	Offset        uint64
	TransactionID string // as pushed ("" when none was given: it is then the message id)
	Err           error  // a *protocol.Error when Status is PushFailed
}

// PushResults answers a push: one result per item, in the items' order.
type PushResults []PushResult

// FirstErr returns the first item the broker did not store, as a
// *PushError that says which and why, or nil when every item was queued or
// a duplicate. A duplicate is not a failure: the broker holds a message
// with that transactionId in that partition (MessageID names it), which is
// how a push retried after ErrConnLost is answered. An item answered with
// a status this client does not know, or with an error beside queued or
// duplicate, counts as not stored.
func (rs PushResults) FirstErr() error {
	for i := range rs {
		r := &rs[i]
		if (r.Status != PushQueued && r.Status != PushDuplicate) || r.Err != nil {
			return &PushError{Index: i, Status: r.Status, TransactionID: r.TransactionID, Err: r.Err}
		}
	}
	return nil
}

// PushError is one pushed item that the broker did not store.
type PushError struct {
	Index         int // the item's position in the push
	Status        PushStatus
	TransactionID string // as pushed ("" when none was given)
	Err           error  // the broker's reason: a *protocol.Error; nil when it gave none
}

func (e *PushError) Error() string {
	s := "regent client: push item " + strconv.Itoa(e.Index)
	if e.TransactionID != "" {
		s += " (transactionId " + strconv.Quote(e.TransactionID) + ")"
	}
	switch e.Status {
	case PushFailed:
		s += " failed"
	case PushQueued, PushDuplicate: // with an error: a broker that breaks the protocol
		s += " " + e.Status.String() + " with an error"
	default:
		s += " answered with status " + strconv.Itoa(int(e.Status)) + ", unknown to this client"
	}
	if e.Err != nil {
		return s + ": " + e.Err.Error()
	}
	if e.Status == PushFailed {
		s += " without a reason"
	}
	return s
}

// Unwrap returns the broker's reason, so that errors.Is and errors.As
// find its *protocol.Error.
func (e *PushError) Unwrap() error { return e.Err }

// Message is a delivered message.
type Message struct {
	ID            ID
	TransactionID string
	TraceID       string
	Payload       []byte
	CreatedAt     time.Time
	Queue         string
	Partition     string
	PartitionID   ID
	Offset        uint64
	LeaseID       ID // zero for autoAck pops
	LeaseExpires  time.Time
	Group         string
	RetryCount    int // failed acks this message has had in this group
}

// AckStatus is one of the four answers to a delivered message.
type AckStatus uint8

const (
	// Completed: done; the cursor may move past it.
	Completed = AckStatus(protocol.AckCompleted)
	// Failed spends a retry: the lease is released and the message comes
	// back after the queue's retryDelay, or goes to the dead-letter queue
	// when its retries are spent.
	Failed = AckStatus(protocol.AckFailed)
	// Retry gives the message back at once, spending no retry.
	Retry = AckStatus(protocol.AckRetry)
	// DLQ files the message in the dead-letter queue now.
	DLQ = AckStatus(protocol.AckDLQ)
)

func (s AckStatus) String() string { return protocol.AckStatus(s).String() }

// AckResult answers one ack. Err is nil when the ack took effect (or
// repeats one that did); a refused ack usually means the lease ended and
// the message is coming back.
type AckResult struct {
	Err           error
	Offset        uint64
	LeaseReleased bool
	DeadLettered  bool
}

// AckOptions apply to every message of an Ack call.
type AckOptions struct {
	Group string // the consumer group; "" takes it from each message
	Error string // kept in the dead-letter entry of a failed or dlq ack
}

// Ack is one message's answer, for AckEach.
type Ack struct {
	Message Message
	Status  AckStatus
	Error   string
	// ByTransactionID names the message by Message.TransactionID (for a
	// message pushed without one: its id, in text) inside its lease
	// (Message.PartitionID, LeaseID and Group), not by its offset: for a
	// caller that has the ids a pop printed rather than the message. The
	// broker refuses it (not in flight) when no message of that lease has
	// that transactionId.
	ByTransactionID bool
	// ByMessageID names the message by Message.ID inside its lease, not by
	// its offset (a broker forwarding an ack that names its message so).
	// ByTransactionID wins when both are set.
	ByMessageID bool
}

// SubscriptionMode decides where a group that never read a queue starts
// (Queen's subscription modes all, new and from).
type SubscriptionMode uint8

const (
	// FromOldest starts at the oldest retained message (the default, the
	// zero mode).
	FromOldest = SubscriptionMode(protocol.SubAll)
	// FromNew starts after what exists when the group first appears.
	FromNew = SubscriptionMode(protocol.SubNew)
	// FromTime starts at the first message created at or after a time
	// (PopRequest.From; QueueBuilder.From sets both).
	FromTime = SubscriptionMode(protocol.SubFrom)
)

// OptionSet names fields of QueueOptions, for UpdateQueue.
type OptionSet uint32

// One bit per QueueOptions field.
const (
	SetLeaseTime                 = OptionSet(protocol.OptLeaseTime)
	SetRetryLimit                = OptionSet(protocol.OptRetryLimit)
	SetRetryDelay                = OptionSet(protocol.OptRetryDelay)
	SetDelayedProcessing         = OptionSet(protocol.OptDelayedProcessing)
	SetWindowBuffer              = OptionSet(protocol.OptWindowBuffer)
	SetMaxSize                   = OptionSet(protocol.OptMaxSize)
	SetTTL                       = OptionSet(protocol.OptTTL)
	SetRetentionEnabled          = OptionSet(protocol.OptRetentionEnabled)
	SetRetentionSeconds          = OptionSet(protocol.OptRetentionSeconds)
	SetCompletedRetentionSeconds = OptionSet(protocol.OptCompletedRetentionSeconds)
	SetMaxWaitTimeSeconds        = OptionSet(protocol.OptMaxWaitTimeSeconds)
	SetPriority                  = OptionSet(protocol.OptPriority)
	SetEncryptionEnabled         = OptionSet(protocol.OptEncryptionEnabled)
	SetDeadLetterQueue           = OptionSet(protocol.OptDeadLetterQueue)
	SetDLQAfterMaxRetries        = OptionSet(protocol.OptDLQAfterMaxRetries)
	SetMaxPartitions             = OptionSet(protocol.OptMaxPartitions)
	SetNamespace                 = OptionSet(protocol.OptNamespace)
	SetTask                      = OptionSet(protocol.OptTask)
)

// QueueOptions are a queue's settings. Configure replaces all of them:
// start from DefaultQueueOptions (UpdateQueue changes some and keeps the
// others).
type QueueOptions struct {
	LeaseTime                 time.Duration
	RetryLimit                int
	RetryDelay                time.Duration
	DelayedProcessing         time.Duration
	WindowBuffer              time.Duration
	MaxSize                   int64
	TTL                       time.Duration
	RetentionEnabled          bool
	RetentionSeconds          int64
	CompletedRetentionSeconds int64
	MaxWaitTimeSeconds        int64
	Priority                  int
	EncryptionEnabled         bool
	DeadLetterQueue           bool
	DLQAfterMaxRetries        bool
	MaxPartitions             int
	Namespace, Task           string
}

// DefaultQueueOptions are the broker's defaults: lease 300 s, 3 retries,
// retry delay 1 s, ttl 3600 s, everything else off.
func DefaultQueueOptions() QueueOptions {
	return QueueOptions{LeaseTime: 300 * time.Second, RetryLimit: 3, RetryDelay: time.Second, TTL: time.Hour}
}

func (o *QueueOptions) wire() protocol.QueueOptions {
	ms := func(d time.Duration) uint64 { return uint64(max(d, 0) / time.Millisecond) }
	return protocol.QueueOptions{
		Set: protocol.OptAll, LeaseTimeMs: ms(o.LeaseTime), RetryLimit: uint32(max(o.RetryLimit, 0)), RetryDelayMs: ms(o.RetryDelay),
		DelayedProcessingMs: ms(o.DelayedProcessing), WindowBufferMs: ms(o.WindowBuffer), MaxSize: uint64(max(o.MaxSize, 0)),
		TTLMs: ms(o.TTL), RetentionEnabled: o.RetentionEnabled, RetentionSeconds: uint64(max(o.RetentionSeconds, 0)),
		CompletedRetentionSeconds: uint64(max(o.CompletedRetentionSeconds, 0)), MaxWaitTimeSeconds: uint64(max(o.MaxWaitTimeSeconds, 0)),
		Priority: int32(o.Priority), EncryptionEnabled: o.EncryptionEnabled, DeadLetterQueue: o.DeadLetterQueue,
		DLQAfterMaxRetries: o.DLQAfterMaxRetries, MaxPartitions: uint32(max(o.MaxPartitions, 0)), Namespace: o.Namespace, Task: o.Task,
	}
}

func optionsFromWire(w *protocol.QueueOptions) QueueOptions {
	ms := func(v uint64) time.Duration { return time.Duration(v) * time.Millisecond }
	return QueueOptions{
		LeaseTime: ms(w.LeaseTimeMs), RetryLimit: int(w.RetryLimit), RetryDelay: ms(w.RetryDelayMs),
		DelayedProcessing: ms(w.DelayedProcessingMs), WindowBuffer: ms(w.WindowBufferMs), MaxSize: int64(w.MaxSize),
		TTL: ms(w.TTLMs), RetentionEnabled: w.RetentionEnabled, RetentionSeconds: int64(w.RetentionSeconds),
		CompletedRetentionSeconds: int64(w.CompletedRetentionSeconds), MaxWaitTimeSeconds: int64(w.MaxWaitTimeSeconds),
		Priority: int(w.Priority), EncryptionEnabled: w.EncryptionEnabled, DeadLetterQueue: w.DeadLetterQueue,
		DLQAfterMaxRetries: w.DLQAfterMaxRetries, MaxPartitions: int(w.MaxPartitions), Namespace: w.Namespace, Task: w.Task,
	}
}

// Stats are the broker's counters since it started.
type Stats struct {
	Queues       int    // queues that exist now
	Pushed       uint64 // messages stored
	Popped       uint64 // messages delivered
	Acked        uint64 // acks that completed or failed messages, and autoAck deliveries
	DeadLettered uint64 // messages filed in dead-letter queues
	CacheBytes   int64  // payload bytes of recent messages kept in memory now
	Connections  int    // binary-protocol connections open now
	// The journal's: fsync calls and the time spent in them, bytes and
	// entries written (zero from a broker without a journal).
	Fsyncs       uint64
	FsyncTime    time.Duration
	BytesWritten uint64
	Entries      uint64
	// Extra holds named figures beyond these, by name (none yet: for
	// figures later brokers add); nil when there are none.
	Extra map[string]int64
}

// PartitionInfo describes one partition of a queue and the consumer groups
// reading it (QueueInfo, QueueInfoPage).
type PartitionInfo struct {
	Name string
	ID   ID
	Low  uint64 // the oldest offset held
	Next uint64 // the offset the next message gets: Next-Low offsets are held, less those in Lost
	// Oldest and Newest are the creation times of the oldest and newest
	// messages held; zero when the partition holds none.
	Oldest, Newest time.Time
	Groups         []GroupCursor // the groups with a cursor on this partition, by name
	// Lost lists the offsets lost to journal damage: a salvaged start
	// skipped the entries that held them, and consumers pass over them.
	// Brokers that speak protocol 1.2 send it.
	Lost []OffsetRange
}

// OffsetRange is the offsets First to Last of a partition, both included.
type OffsetRange struct{ First, Last uint64 }

// GroupCursor is one consumer group's position on one partition.
type GroupCursor struct {
	Group  string
	Cursor uint64 // the first offset the group has not finished
	Lag    uint64 // offsets from the cursor to the end of the partition
	// Leased: a consumer of the group holds the partition's live lease,
	// LeaseID, until LeaseExpires (both zero when Leased is false).
	Leased       bool
	LeaseID      ID
	LeaseExpires time.Time
	// BlockedUntil: a failed message waits out its retry delay until then,
	// and the partition is not served to the group before; zero when none
	// waits.
	BlockedUntil time.Time
	Retrying     int // messages of the partition whose failed acks this group counts
}

// unixNano is the time of Unix nanoseconds n as the broker sends them,
// where 0 means none: the zero Time.
func unixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// QueueSummary describes a queue.
type QueueSummary struct {
	Name           string
	ID             ID
	Created        time.Time
	Options        QueueOptions
	PartitionCount int
	Messages       uint64 // messages held
	Groups         []string
	DeadLetters    int
}

func summaryFromWire(s *protocol.QueueSummary) QueueSummary {
	return QueueSummary{Name: s.Name, ID: ID(s.ID), Created: time.Unix(0, s.Created), Options: optionsFromWire(&s.Options),
		PartitionCount: int(s.PartitionCount), Messages: s.Messages, Groups: s.Groups, DeadLetters: int(s.DeadLetters)}
}

// QueueDetail describes a queue with its partitions and group cursors.
type QueueDetail struct {
	QueueSummary
	Partitions []PartitionInfo
}

// DLQEntry is a dead-lettered message.
type DLQEntry struct {
	ID         ID // the entry's own id: Redrive and Purge name it
	Message    Message
	Error      string
	RetryCount int
	FailedAt   time.Time
}

// DLQFilter selects dead-letter entries; zero fields match everything.
type DLQFilter struct {
	Queue, Group, Partition string
	From, To                time.Time
	Limit, Offset           int
}

func messageFromWire(m *protocol.Message, queue, group string) Message {
	out := Message{
		ID: ID(m.ID), TransactionID: m.TransactionID, TraceID: m.TraceID, Payload: m.Payload,
		CreatedAt: time.Unix(0, m.CreatedAt), Queue: queue, Partition: m.Partition, PartitionID: ID(m.PartitionID),
		Offset: m.Offset, LeaseID: ID(m.LeaseID), Group: group, RetryCount: int(m.RetryCount),
	}
	if m.LeaseExpires != 0 {
		out.LeaseExpires = time.Unix(0, m.LeaseExpires)
	}
	return out
}

func codeErr(c protocol.Code, msg string) error {
	if c == protocol.CodeOK {
		return nil
	}
	return protocol.NewError(c, msg)
}
