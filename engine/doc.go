// Package engine holds all of Regent's broker state and applies the delivery
// rules of SEMANTICS.md: queues and partitions created on first push,
// consumer groups with a cursor per (group, partition), one live lease per
// (group, partition), the four ack statuses with per-message retry counts,
// retry delays, the dead-letter queue, transactions, long polls, and
// recovery from the journal.
//
// # Model
//
// A queue holds partitions; a partition is an ordered run of messages with
// offsets 0, 1, 2, ... Messages are stored once (in the journal, and the
// recent ones in a per-partition tail cache) and never changed by an ack. A
// consumer group has, on each partition, a cursor: the first offset it has
// not finished. A pop leases the messages [cursor, cursor+n) of a partition
// to one consumer; acks mark messages inside that lease, and the cursor moves
// past the longest finished run (completed or dead-lettered). A failed or
// retry ack releases the lease; an expired lease does too; in both cases the
// messages from the cursor come back, in order.
//
// A pop's answer is bounded by bytes as well as by count (PopRequest.MaxBytes,
// Config.MaxPopBytes): it takes messages while they fit, its lease or autoAck
// covers exactly those, and it says when the budget left some out. Every
// payload a push accepts fits Config.MaxPopBytes with its names, so every
// stored message can be popped; messages read back from the journal are read
// only up to the budget.
//
// # Concurrency
//
// Partitions are spread over lock stripes (hash of queue id and partition
// number). Everything about a partition (its messages, its cursors, leases,
// retry counts) is guarded by its stripe's mutex, and every change is
// journaled while that mutex is held, so the journal's order is the order in
// which changes happened to each partition.
//
// Lock order, outermost first: a goroutine holding one may take only those
// after it (and several stripes only in stripe order). These are every
// mutex of the package.
//
//	| lock             | guards                                          | while held, may block on                   |
//	|------------------|-------------------------------------------------|--------------------------------------------|
//	| queue.dlqOp      | one dead-letter redrive or purge of a queue     | the journal: waits for the redrive's or    |
//	|                  | at a time                                       | purge's record to be durable (ctx bounds)  |
//	| Engine.snapMu    | one snapshot at a time                          | the journal: the barrier (retried while    |
//	|                  |                                                 | the journal is behind), WriteSnapshot and  |
//	|                  |                                                 | Release (file I/O, fsync)                  |
//	| waiter.mu        | a parked pop: retried, timed out or cancelled   | nothing (a retried pop takes the locks     |
//	|                  | once                                            | below and appends, which never waits)      |
//	| Engine.mu (RW)   | the queue tables                                | nothing                                    |
//	| queue.mu (RW)    | a queue's partition table and group names       | nothing                                    |
//	| stripe.mu        | its partitions, their groups' state, leases and | Journal.Read of a message not in memory (a |
//	|                  | cursors, its timer wheel, its ended leases      | disk read); never the committer: Append    |
//	|                  |                                                 | never waits                                |
//	| group.mu         | a group's ready list, waiters and version       | nothing                                    |
//	| labelWaiters.mu  | pops parked by namespace and task               | nothing                                    |
//	| absentWaiters.mu | pops parked on a queue that does not exist yet  | nothing (taken under Engine.mu when a      |
//	|                  | (absent.go)                                     | queue comes into being)                    |
//	| queue.dlqMu      | a queue's dead-letter list                      | nothing (a dlq-remove append never waits)  |
//	| queue.tombMu     | a queue's tombstones                            | nothing                                    |
//	| leaseShard.mu    | its share of the lease registry                 | nothing                                    |
//	| nonces.mu        | the nonce counter of sealed payloads (crypt.go) | nothing (a leaf: taken sealing under a     |
//	|                  |                                                 | stripe)                                    |
//	| FakeClock.mu     | a test clock's time                             | nothing (a leaf: read under any lock)      |
//
// dlqOp and snapMu are the only locks held across a wait on the journal,
// and no done callback takes them. No other lock is held across a wait on
// the journal, because the journal never makes anyone wait: Append takes a
// record or refuses it at once (Journal). Its done callbacks run on the
// journal's goroutines and take stripe locks (a commit publishes pushes),
// then group.mu and labelWaiters.mu (waking parked pops); that is safe
// because no holder of those waits for the journal. Calls that wait for
// durability (Push, Ack, Configure, ...) wait holding no lock. A timer fires
// under its stripe's lock; what it wakes (a parked pop's retry or timeout,
// which takes waiter.mu) runs after that lock is released, and woken pops
// are retried on goroutines of their own (Engine.wake).
//
// Each (queue, group) keeps a ready list: the partitions that have
// deliverable messages for it. A pop of "any partition" takes partitions from
// its front (fair, and never a scan of all partitions); commits, lease ends
// and retry delays running out put partitions back. Parked long polls wait in
// the group's waiter list and are woken by the same events.
//
// Timers (lease expiry, retry delays, poll deadlines) live in one hashed
// timer wheel per stripe: O(1) to arm and cancel, intrusive (no allocation),
// advanced by one ticker, or by Tick in tests that use a FakeClock.
//
// # Following an ack
//
// Ack and AckAsync (ack.go) find the partition and take its stripe
// (state.go, which holds the tables, the ids and their type, and the
// partitions' stripes); ackOne checks the ack against the live lease, or
// an ended one for a repeat, marks it and moves the cursor (lease.go: the
// states, advanceCursor); the change is encoded as one effect record and
// appended (journal.go: effectRecord, appendHeld, pending; the format and
// its encoders in record.go), or undone when the journal refuses it
// (state.go: save, restore); dead letters, when there are any, are filed
// by dlq.go, and countAcks (ack.go) adds the acks to the queue's counters
// (their type in flow.go). settle then ends a finished lease (lease.go;
// its timer leaves the wheel, wheel.go, which holds the clock too), tells
// the group what became deliverable and refreshes the queue's depth
// (ready.go), and shrinks the tail cache (cache.go). A completed ack
// touches eight files: ack, state, lease, journal, record, wheel, ready
// and cache, measured by coverage around one Ack (a program built with
// -cover -covermode=atomic clears its counters before the Ack and writes
// them after it).
// The answer comes when the last append pending holds is durable.
//
// # Reports
//
// What the transports list (partitions, dead letters) is read a page at a
// time, and what they sum is read one partition at a time (pages.go): a
// report costs memory for its page, not for its queue. Partitions are listed
// in creation order, and a page's cursor is its last partition's id, so a
// walk by cursor lists every partition that lived through it once. A page
// holds at most MaxPartitionPage partitions (MaxDLQPage dead letters, and at
// most DLQFilter.MaxBytes of them). ViewQueue and Queue copy a whole queue:
// tests and tools use them, the transports do not. Browse reads messages by
// offset a page at a time (at most MaxBrowsePage entries and
// BrowseRequest.MaxBytes), without a lease, a cursor move or a cache fill:
// the offsets it passes over come as gaps that say why (retention, damage,
// deletion).
//
// # Ownership
//
// The engine owns every byte it keeps beyond the call that brought it. A
// caller's strings and slices may alias a buffer the caller reuses for its
// next request (the binary protocol decodes requests into pooled arenas), so
// whatever becomes kept state is copied where it becomes kept: names of
// queues, partitions and groups, queue options (namespace, task), dead-letter
// error texts and producer subjects through own (own.go); transactionIds,
// traceIds, subjects and payloads by being encoded into the journal record
// that the tail cache then points into; a parked pop's names when it parks.
// TestEngineOwnsWhatItKeeps spoils every string it passes in after each call
// and checks what was kept, in memory and after restarts.
//
// # Durability
//
// A push is visible to pops and answered only once its journal record is
// durable (the journal calls back from its committer). Acks and autoAck pops
// are applied in memory once the journal accepted their record, and answered
// once it is durable; every other change (configure, seek, deletions,
// dead-letter redrive and purge, tombstones) answers after its record is
// durable too, and the calls that wait for that take a context.Context.
// Records carry effects (a cursor, retry counts, dead-letter entries), not
// requests, so recovery replays them without leases or clocks. Leases are not
// journaled: after a restart the messages that were in flight come back, with
// their retry counts kept. The record and snapshot formats are drawn in
// record.go and snapshot.go. Sealed payloads name the key that sealed them,
// and the journal records the key in use: New refuses keys that do not fit
// what the directory holds, and a rotation is explicit (keys.go).
//
// An operation answered with an error leaves no trace. A change becomes
// visible only once the journal has accepted its record, or is undone
// exactly when the journal refuses it (the journal behind, a full disk, a
// record too large): cursors, leases, retry counts and delays, dead-letter
// entries, depth and maxSize room, ready lists, and the queues and
// partitions a request would have created. What one journal record holds is
// applied all or nothing: a transaction, a seek over many partitions, a
// configure with its Default partition, a batch of redriven dead letters
// with their removal. A call that makes several records (a push or an ack
// over several partitions) answers each part for itself, and fails as a
// whole only when none of its records was taken. A refusal is that
// request's error; the engine fails for good (every change refused until a
// restart) only when the journal reports a failure of its own (Journal.Err).
// TestRefusedRecordLeavesNoTrace checks it for every kind of record.
//
// Damage in the journal is the journal's to find: the log checks every
// entry when it opens and refuses damage. Opened to salvage it (Salvager),
// it skips damaged entries, and recovery rebuilds what the rest holds: a
// lost push leaves lost offsets (a lost chunk), which every group passes
// over and queue info lists (PartitionInfo.Lost); lost acks deliver
// messages again. A message that cannot be read back after start fails a
// pop of its partition alone (ErrUnreadable, Stats.ReadErrors). See
// damage.go.
package engine
