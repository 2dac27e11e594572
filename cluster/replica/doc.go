// Package replica replicates a shard's journal on several brokers with
// etcd-io/raft (go.etcd.io/raft/v3), the second stage of CLUSTER.md: the
// shard's Raft log is its journal, and a broker serves a shard only while
// it leads the shard's Raft group.
//
// # The model
//
// A broker runs one Node. The Node holds one Shard per Raft group the
// broker is a member of, each driven through a raft.RawNode, and moves them
// all forward in three steps that the caller (Run, or a test that wants
// every step in a known order) repeats:
//
//   - Tick advances every group's clock by one tick (100 ms in Run);
//   - Receive steps the Raft messages that came from other brokers;
//   - Process takes every group's Ready, sends the messages of all groups
//     batched per peer (Transport), saves their entries and hard states to
//     their Logs, applies what was committed, then makes the Saves durable
//     together (Config.Sync: one group commit for every shard of the
//     broker) and delivers what waited for that: the append responses and
//     votes to other brokers, and each group's news that its entries are
//     stable. Raft runs with AsyncStorageWrites, so in Run the last two
//     steps go to a syncer goroutine and the loop takes the next Readys
//     while the journal fsyncs.
//
// On a broker, every shard's Raft log lives in the broker's one journal
// (Disk, over package log): an entry is a record naming its shard, term and
// index, so one group commit makes the appends of every shard durable
// (Config.Sync is Disk.Sync), and there is no second copy of a message.
//
// Every call into a RawNode happens under its Shard's mutex, so Append, on
// the engine's goroutines, proposes at once.
//
// # Leading a shard: the engine behind the term
//
// A shard's state machine is Regent's engine (package engine) limited to
// the shard's partitions, and it exists only on the leader. A broker that
// becomes leader in term T waits until it has applied an entry of term T
// (Raft's empty entry at the start of every term: once it is committed, so
// is everything before it), then builds a fresh engine over a Journal that
// replays the committed log and proposes what the engine appends. Followers
// keep the log and build nothing: whichever of them leads next rebuilds the
// state from the same committed entries, starting from the newest snapshot
// in them (below).
//
// The engine's Journal contract maps onto Raft as follows:
//
//   - Append proposes the record and returns the index Raft gives it (the
//     leader's log grows only by its own proposals within a term, so the
//     index is known at once); done runs when the entry is committed, that
//     is when a majority of the group has made it durable, and never before.
//   - When leadership is lost (a higher term seen, CheckQuorum stepping down),
//     the Journal is deposed: every proposal still waiting is answered with
//     ErrNotLeader, Err reports it wrapped with engine.ErrDeposed (the engine
//     then refuses everything), and the engine is closed. A deposed leader completes
//     nothing it had not seen committed: an entry it proposed may still be
//     committed by the next leader, and then a client that retries is
//     deduplicated by its transactionId.
//   - Positions are Raft indexes, the same on every replica, so a snapshot
//     one engine wrote is valid for every engine of the group. The engine
//     snapshots every SnapshotEveryBytes of records; WriteSnapshot proposes
//     the snapshot as an entry of the log (marked: the engine is never
//     handed it as a record), every replica notes the newest one it applied,
//     and LoadSnapshot gives it to the next leader's engine, which replays
//     only the records after it. A broker that starts again learns from its
//     log where the newest snapshot is (Log.Marks) instead of applying the
//     committed log again.
//
// What the broker's shard leader tells a client is therefore justified by a
// committed record, for every request whose answer the engine gives after
// its journal's done: pushes, acks, and (with engine.Config.JournalLeases,
// which NewEngine must set) a leased pop, whose grant is a record. The next
// leader replays the grants: a live lease survives the failover, its
// consumer's acks are accepted there, an ack under a lease the leader never
// granted is refused, and the lease's expiry is re-armed at the time it had
// (late by at most the failover, never early); an extension is a record too
// (engine.ExtendLeaseAsync answers once it is committed).
//
// # Failover
//
// Groups run with PreVote and CheckQuorum: a replica that heard its leader
// within an election timeout (10 ticks) refuses to vote, so a partitioned
// or restarted replica cannot depose a leader that works. When the leader
// dies, that would make the others wait out the timeout before electing.
// A dead process closes its connections, which the Link sees: Node.PeerDown
// has the groups that followed it forget it (Raft's ForgetLeader: a
// leaderless follower votes at once) and their lowest other voter stand,
// again at each tick while no leader is known. The new leader is elected
// in a few round trips; a machine that vanishes without closing anything
// still costs the election timeout.
//
// # A replica that lost its log
//
// Compaction stops at a snapshot entry's keep (journal.keepLocked), so the
// entries after a log's start hold the newest snapshot entry and every
// record a replay reads. A Raft snapshot is therefore only a log's start
// (DiskLog.Snapshot: index, term, configuration, no data): a replica whose
// log ends before the leader's starts installs it and is sent the entries
// that follow. That is how a replica unheard for Config.DownTicks, which no
// longer holds compaction back, is caught up when it returns. A broker started again on a new disk has lost what it
// acknowledged, which Raft assumes never happens: a leader that remembers
// it never probes below it, and its heartbeats carry a commit index past
// the new log (stepped, Raft stops the process). So the follower does not
// step such a heartbeat and answers with a refusal saying where its log
// ends (Shard.lostLogLocked), and the leader stands again in a new term
// (Shard.noteLostLogLocked), whose leader has no such memory. The votes
// the broker cast are lost with its disk too: it must not start on a new
// disk while its old process may still vote.
//
// # Lock order
//
// An engine lock, then Shard.mu (Append and Read are called under partition
// locks). Shard.mu is never held while calling into the engine or running
// a done callback: those take partition locks.
package replica
