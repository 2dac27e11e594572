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
// # Concurrency
//
// Partitions are spread over lock stripes (hash of queue id and partition
// number). Everything about a partition (its messages, its cursors, leases,
// retry counts) is guarded by its stripe's mutex, and every change is
// journaled while that mutex is held, so the journal's order is the order in
// which changes happened to each partition. Lock order, outermost first:
// waiter, engine, queue, stripe, group, dead-letter list, lease registry.
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
// are applied in memory at once and answered once journaled. Records carry
// effects (a cursor, retry counts, dead-letter entries), not requests, so
// recovery replays them without leases or clocks. Leases are not journaled:
// after a restart the messages that were in flight come back, with their
// retry counts kept. The record and snapshot formats are drawn in record.go
// and snapshot.go.
package engine
