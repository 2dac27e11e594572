package engine

import "errors"

// Sentinel errors. Transports map them to wire codes and HTTP statuses with
// errors.Is; the engine wraps them with context using %w.
var (
	// ErrInvalid: a request the engine cannot act on (bad name, bad option).
	ErrInvalid = errors.New("invalid request")
	// ErrQueueNotFound: the named queue does not exist.
	ErrQueueNotFound = errors.New("queue not found")
	// ErrPartitionNotFound: the named partition does not exist.
	ErrPartitionNotFound = errors.New("partition not found")
	// ErrGroupNotFound: the consumer group has never read this queue.
	ErrGroupNotFound = errors.New("consumer group not found")
	// ErrMessageNotFound: no message with that id, offset or transactionId.
	ErrMessageNotFound = errors.New("message not found")
	// ErrLeaseInvalid: the lease named is not the live lease of that
	// (group, partition): it expired, was released, or never existed.
	ErrLeaseInvalid = errors.New("invalid or expired lease")
	// ErrLeaseRequired: an ack without a lease id, refused because the server
	// checks leases (see Config.UncheckedAcks).
	ErrLeaseRequired = errors.New("lease id required")
	// ErrNotInFlight: the message is not in flight for that group (it was
	// never delivered, or it is already done).
	ErrNotInFlight = errors.New("message not in flight")
	// ErrAlreadyAcked: the message already took a different ack in this lease.
	ErrAlreadyAcked = errors.New("message already acknowledged with another status")
	// ErrTooLarge: a payload or request above the engine's limits.
	ErrTooLarge = errors.New("too large")
	// ErrQueueFull: the queue is at its maxSize.
	ErrQueueFull = errors.New("queue full")
	// ErrClosed: the engine is closed.
	ErrClosed = errors.New("engine closed")
	// ErrDeposed: the journal takes no more of the engine's changes because
	// the log it writes is no longer the engine's (a replicated shard whose
	// lead moved, or whose broker stops). A journal says so by wrapping it
	// in its errors (Err, Append); the engine then refuses every change
	// with that error, which is not a failure of the journal: nothing is
	// logged, and the engine is closed by its owner.
	ErrDeposed = errors.New("engine deposed")
	// ErrJournal: the journal cannot take changes: refused until restarted after
	// a write or fsync failure, or until space is freed when the disk is full
	// (the error then also wraps syscall.ENOSPC).
	ErrJournal = errors.New("journal failed")
	// ErrOverloaded: the journal is behind (too many bytes wait to be
	// written); nothing of the request was kept, and it may be sent again.
	ErrOverloaded = errors.New("overloaded: the journal is behind, try again")
	// ErrTxnAborted: a transaction was not applied because one of its
	// operations was refused.
	ErrTxnAborted = errors.New("transaction aborted")
	// ErrConflict: the request contradicts what is there (a streams query
	// registered again with another config hash, without reset).
	ErrConflict = errors.New("conflict")
	// ErrQueryNotFound: no streams query is registered with that id.
	ErrQueryNotFound = errors.New("query not found")
)
