package engine

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// QueueOptions are the per-queue settings of SEMANTICS.md. Configure replaces
// all of them: an option left at its zero value in a Configure call is not
// "unset"; callers start from DefaultQueueOptions.
type QueueOptions struct {
	LeaseTime                 time.Duration // how long a pop's lease lives; default 300 s
	RetryLimit                int           // failed acks a message survives before the DLQ; default 3
	RetryDelay                time.Duration // wait before a failed message comes back; default 1 s
	DelayedProcessing         time.Duration // visibility delay after push; default 0
	WindowBuffer              time.Duration // serve a partition only once its newest message is this old; default 0
	MaxSize                   int64         // messages the queue may hold; 0 = unlimited
	TTL                       time.Duration // Queen's ttl option, kept and echoed; default 3600 s
	RetentionEnabled          bool
	RetentionSeconds          int64
	CompletedRetentionSeconds int64
	MaxWaitTimeSeconds        int64
	Priority                  int
	EncryptionEnabled         bool
	DeadLetterQueue           bool // Queen's flag, kept and echoed (the DLQ is always on)
	DLQAfterMaxRetries        bool // Queen's flag, kept and echoed
	MaxPartitions             int  // 0 = unlimited
	Namespace, Task           string
	// DedupWindow is how long transactionIds are remembered for duplicate
	// detection (Regent's option; 0 means DefaultDedupWindow, 1 hour).
	DedupWindow time.Duration
}

// DefaultQueueOptions returns the defaults of SEMANTICS.md.
func DefaultQueueOptions() QueueOptions {
	return QueueOptions{
		LeaseTime:  300 * time.Second,
		RetryLimit: 3,
		RetryDelay: time.Second,
		TTL:        3600 * time.Second,
	}
}

// autoQueueOptions are the options of a queue created by its first push:
// the defaults, with namespace and task taken from a dotted name ("a.b").
func autoQueueOptions(name string) QueueOptions {
	o := DefaultQueueOptions()
	if i := strings.IndexByte(name, '.'); i >= 0 {
		o.Namespace, o.Task = name[:i], name[i+1:]
	}
	return o
}

// Validate reports the first option out of range.
func (o *QueueOptions) Validate() error {
	switch {
	case o.LeaseTime <= 0:
		return fmt.Errorf("%w: leaseTime must be positive", ErrInvalid)
	case o.LeaseTime > 7*24*time.Hour:
		return fmt.Errorf("%w: leaseTime above 7 days", ErrInvalid)
	case o.RetryLimit < 0 || o.RetryLimit > 1_000_000:
		return fmt.Errorf("%w: retryLimit must be between 0 and 1000000", ErrInvalid)
	case o.RetryDelay < 0 || o.RetryDelay > 7*24*time.Hour:
		return fmt.Errorf("%w: retryDelay must be between 0 and 7 days", ErrInvalid)
	case o.DelayedProcessing < 0 || o.WindowBuffer < 0 || o.TTL < 0 || o.DedupWindow < 0:
		return fmt.Errorf("%w: durations must not be negative", ErrInvalid)
	case o.MaxSize < 0 || o.MaxPartitions < 0:
		return fmt.Errorf("%w: maxSize and maxPartitions must not be negative", ErrInvalid)
	case o.RetentionSeconds < 0 || o.CompletedRetentionSeconds < 0 || o.MaxWaitTimeSeconds < 0:
		return fmt.Errorf("%w: retention seconds must not be negative", ErrInvalid)
	}
	if err := checkLabel("namespace", o.Namespace); err != nil {
		return err
	}
	return checkLabel("task", o.Task)
}

func checkLabel(what, s string) error {
	if len(s) > MaxNameBytes || !utf8.ValidString(s) || hasControl(s) {
		return fmt.Errorf("%w: %s must be valid UTF-8 without control characters, at most %d bytes", ErrInvalid, what, MaxNameBytes)
	}
	return nil
}

// MaxNameBytes bounds queue, partition and group names.
const MaxNameBytes = 255

// DefaultMaxPopBytes is Config.MaxPopBytes when it is 0: what one pop's
// answer holds at most.
const DefaultMaxPopBytes = 16 << 20

// QueueModeGroup is the group of pops that name none: competing consumers
// sharing one cursor.
const QueueModeGroup = "__QUEUE_MODE__"

// groupLabel names a group in an error text: `group "g"`, or "queue mode"
// for QueueModeGroup, whose name is internal and never shown to a user.
func groupLabel(name string) string {
	if name == QueueModeGroup {
		return "queue mode"
	}
	return "group " + strconv.Quote(name)
}

// DefaultPartition is the partition of pushes that name none.
const DefaultPartition = "Default"

// CheckQueueName says whether name may name a queue (checkName), for a
// caller that records a queue's configuration before any engine applies it
// (a replicated cluster's broker).
func CheckQueueName(name string) error { return checkName("queue", name, true) }

// checkName validates a queue, partition or group name: 1 to 255 bytes of
// UTF-8 with no control characters; queue names also may not hold '/' or '\'
// (they appear in URL paths and CLI arguments).
func checkName(what, s string, noSlash bool) error {
	if s == "" {
		return fmt.Errorf("%w: %s name is empty", ErrInvalid, what)
	}
	if len(s) > MaxNameBytes {
		return fmt.Errorf("%w: %s name is longer than %d bytes", ErrInvalid, what, MaxNameBytes)
	}
	if !utf8.ValidString(s) || hasControl(s) {
		return fmt.Errorf("%w: %s name %q must be UTF-8 without control characters", ErrInvalid, what, s)
	}
	if noSlash && strings.ContainsAny(s, `/\`) {
		return fmt.Errorf("%w: %s name %q must not contain '/' or '\\'", ErrInvalid, what, s)
	}
	return nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return true
		}
	}
	return false
}
