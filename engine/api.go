package engine

import (
	"fmt"
	"strings"
	"time"
)

// PushItem is one message offered to Push.
type PushItem struct {
	Queue         string
	Partition     string // "" means DefaultPartition
	TransactionID string // the producer's id; "" means the message id
	TraceID       string
	Payload       []byte // copied by Push; the caller may reuse it after Push returns
	// ProducerSub is the authenticated subject of the producer (the HTTP
	// bridge's JWT sub), stored with the message; "" for none.
	ProducerSub string
}

// PushStatus is the outcome of one PushItem.
type PushStatus uint8

const (
	// Queued: stored, and durable under the journal's sync policy.
	Queued PushStatus = iota + 1
	// Duplicate: a message with the same transactionId exists in that
	// partition (or earlier in the same push); MessageID names it.
	Duplicate
	// Failed: refused; Err says why. Its neighbours are unaffected.
	Failed
)

func (s PushStatus) String() string {
	switch s {
	case Queued:
		return "queued"
	case Duplicate:
		return "duplicate"
	case Failed:
		return "failed"
	}
	return "unknown"
}

// PushResult answers one PushItem.
type PushResult struct {
	Status        PushStatus
	MessageID     UUID
	TransactionID string // as pushed; "" when none was given (it is then the message id)
	PartitionID   UUID
	Offset        uint64
	Err           error // set when Status is Failed
}

// SubMode decides where a consumer group that has never read a queue starts.
type SubMode uint8

const (
	// SubAll starts at the oldest retained message (the default).
	SubAll SubMode = iota
	// SubNew starts after the messages that exist when the group appears.
	SubNew
	// SubFrom starts at the first message pushed at or after a timestamp.
	SubFrom
)

func (m SubMode) String() string {
	switch m {
	case SubNew:
		return "new"
	case SubFrom:
		return "from"
	}
	return "all"
}

// PopRequest asks for messages.
type PopRequest struct {
	// Queue names the queue; or leave it "" and name Namespace and/or Task
	// to pop from any queue that carries them, higher priority first.
	Queue      string
	Namespace  string
	Task       string
	Partition  string // "" means any partition of the queue
	Group      string // "" means QueueModeGroup
	Batch      int    // cap on messages returned; 0 means 1
	Partitions int    // cap on partitions leased by one pop; 0 means 1
	// Wait parks the pop until at least one message can be returned or
	// Timeout passes (0 means 30 s).
	Wait    bool
	Timeout time.Duration
	AutoAck bool // move the cursor at delivery: at most once, no lease
	// Subscription and From apply only when the group first reads the queue.
	Subscription SubMode
	From         time.Time
	// Buf, when it has room, holds the messages a pop takes during the
	// PopAsync call (the answer is then Buf[:n]), so that a caller that
	// encodes and drops them can reuse one buffer. The engine writes Buf
	// only during the call; the answer may still come later and alias it
	// (an autoAck pop answers once its cursor move is durable). A pop that
	// parked answers into memory of its own.
	Buf []Message
	// BareTxn leaves TransactionID "" for a message pushed without one
	// (its transactionId is then its ID's text), for a caller that writes
	// that text itself instead of receiving a string per message.
	BareTxn bool
	// AcksByName says the caller's acks will name the messages by id or
	// transactionId (Queen's HTTP API), not by offset: the lease then keeps
	// each message's names (56 bytes, more for a transactionId that is not
	// a UUID), so that such an ack finds its message without reading it
	// back from the journal. An ack by name of a lease without them reads
	// the lease's messages.
	AcksByName bool
	// MaxBytes bounds the answer by bytes, as MessageBytes counts them
	// (0 means Config.MaxPopBytes, which also caps it): a pop takes
	// messages while they fit, and done says when the budget cut the answer
	// short. Leases and autoAck cover exactly the messages answered. Every
	// message a push accepts fits Config.MaxPopBytes; a message that alone
	// is larger than a smaller MaxBytes (a client with small frames) is not
	// taken, and the pop answers ErrTooLarge.
	MaxBytes int
}

// MessageOverhead is what MessageBytes counts for a message beyond its
// payload and strings: its ids, offset, times, lease and counts, as any
// transport encodes them (the binary protocol's fixed fields take 99
// bytes at most: protocol.MaxMessageFixed).
const MessageOverhead = 128

// MessageBytes is the size a pop's byte budget counts for a message with a
// payload of payload bytes (as stored: sealed payloads count their seal),
// and these strings; a transactionId that is the message's id counts its
// 36 characters. The queue and group names are the answer's, not the
// message's, and are not counted.
func MessageBytes(payload int, transactionID, traceID, partition, producerSub string) int {
	return msgBytes(payload, len(transactionID), len(traceID), len(partition), len(producerSub))
}

// MaxMessageOverhead is the most MessageBytes counts for a message beyond
// its payload: a seal, the longest names and ids, and MessageOverhead.
const MaxMessageOverhead = sealOverhead + 4*MaxNameBytes + MessageOverhead

func msgBytes(payload, txn, trace, partition, sub int) int {
	if txn == 0 {
		txn = 36
	}
	return payload + txn + trace + partition + sub + MessageOverhead
}

// Message is a delivered message. Payload is shared with the engine's cache
// and must not be modified.
type Message struct {
	ID            UUID
	TransactionID string
	TraceID       string
	Payload       []byte
	CreatedAt     int64 // Unix nanoseconds
	Queue         string
	Partition     string
	PartitionID   UUID
	Offset        uint64
	LeaseID       UUID // zero for autoAck pops
	LeaseExpires  int64
	Group         string
	RetryCount    int    // failed acks this message has had in this group
	ProducerSub   string // the producer's authenticated subject, if any
	// PayloadErr is set, and Payload nil, when ScanMessages lists a message
	// whose payload does not open (no key the server is given opens it);
	// it wraps ErrEncryption.
	PayloadErr error
}

// AckStatus is one of the four answers to a delivered message.
type AckStatus uint8

const (
	// Completed: done; the cursor may move past it.
	Completed AckStatus = iota + 1
	// FailedAck: spends a retry; the lease is released; the message comes
	// back after retryDelay, or goes to the dead-letter queue when its
	// retries are spent.
	FailedAck
	// Retry: the lease is released and the message comes back at once; no
	// retry is spent.
	Retry
	// DLQ: filed in the dead-letter queue now.
	DLQ
)

func (s AckStatus) String() string {
	switch s {
	case Completed:
		return "completed"
	case FailedAck:
		return "failed"
	case Retry:
		return "retry"
	case DLQ:
		return "dlq"
	}
	return "unknown"
}

// ParseAckStatus reads the names Queen's clients send: completed/true/success,
// failed/false, retry, dlq.
func ParseAckStatus(s string) (AckStatus, error) {
	switch strings.ToLower(s) {
	case "completed", "complete", "true", "success", "":
		return Completed, nil
	case "failed", "false", "fail":
		return FailedAck, nil
	case "retry":
		return Retry, nil
	case "dlq":
		return DLQ, nil
	}
	return 0, fmt.Errorf("%w: unknown ack status %q (want completed, failed, retry or dlq)", ErrInvalid, s)
}

// AckItem acknowledges one delivered message. The message is named by its
// partition and either its Offset (when HasOffset) or its MessageID or
// TransactionID.
type AckItem struct {
	PartitionID   UUID
	HasOffset     bool
	Offset        uint64
	MessageID     UUID
	TransactionID string
	LeaseID       UUID // zero: no lease named (see Config.UncheckedAcks)
	Group         string
	Status        AckStatus
	Error         string // kept with a dead-letter entry
	// live asks for the live lease LeaseID, unexpired: a repeat of an ack
	// that took effect under a lease that has ended is refused (a streams
	// cycle must not apply twice).
	live bool
}

// AckResult answers one AckItem. Err is nil when the ack took effect (or
// repeats one that already did).
type AckResult struct {
	Err           error
	Queue         string
	Partition     string
	Offset        uint64
	LeaseReleased bool // the ack released (or ended) the lease
	DeadLettered  bool // the message is now in the dead-letter queue
}
