// Package log is Regent's durable journal: one shared write-ahead log of
// CRC-checked, zstd-compressed batches of records, written by one committer
// goroutine doing group commit, with torn-tail repair before open, a directory
// lock, snapshots, and segment truncation for retention.
//
// The records are opaque byte strings from the engine; this package knows
// nothing of queues. (The folder is our journal, so the standard library's
// log package is not used anywhere: logs go through log/slog.)
//
// # Model
//
// Appenders copy their record into the open group under a short mutex and get
// its position back at once: the group's WAL index is already known, it is the
// next entry the committer will write. The committer waits until the open
// group is non-empty, swaps it with a spare (appenders keep filling the next
// group while this one is compressed, written and fsynced), encodes it as one
// WAL entry, writes it, fsyncs per the SyncPolicy, and then calls every
// record's done callback in order. Under load the groups grow by themselves:
// everything that arrives during one write+fsync goes into the next one. A
// group that reaches MaxBatchBytes (or MaxEntryBytes, or 2^20-1 records) is
// sealed as it is and queued for the committer, and the next record opens a
// new group.
//
// Append never waits. The records accepted and not yet done are bounded by
// MaxQueuedBytes: past it Append refuses a record at once with ErrBusy
// (matching syscall.EAGAIN), keeping nothing of it, and the caller answers
// "overloaded". Backpressure is therefore explicit and no caller can be
// parked on the journal: not an event loop, and not a goroutine holding a
// lock that a done callback wants (the engine holds a partition's lock
// while it appends, and its done callbacks take partition locks). Stalled
// reports records that have waited too long without the committer
// finishing a group (a stuck disk).
//
// # Locks
//
// Outermost first: snapMu (snapshots), wmu (the tidwall/wal pointer: RLock
// to write or read, Lock to close or reopen it), readMu (reads and their
// cache), segMu (the segment list), mu (group commit state: open, sealed,
// queued, the sticky failure). Nothing is taken while mu is held, and no
// lock of this package is held while a done callback runs.
//
// A position (Pos) is (WAL index << 20) | record number in the entry.
//
// A write or fsync failure makes the log failed: every later Append returns
// that error (see Err); the records of the group that failed, and of groups
// already collected, get it in their done. Restart to recover.
//
// Except a full disk (ENOSPC, EDQUOT on a write), which passes by itself:
// Append refuses records with an error wrapping ErrNoSpace (it also matches
// syscall.ENOSPC) while Err reports it; the committer puts the WAL back as it
// was after the last good write (a failed write may leave part of an entry
// or a new segment file; tidwall's copy of the tail is reopened), waits (10ms
// doubling up to Config.NoSpaceRetry) and writes the same group again, until
// it fits. Records accepted before are not failed: their done runs when they
// are written. A failed fsync stays fatal (the page cache state is unknown).
// Close while the disk is full fails what could not be written.
//
// Reads (Read, Replay) go through tidwall/wal, serialized by one mutex
// because its concurrent reads of old segments are unsafe; Read keeps the
// last few decoded entries so consecutive records decode once. No record is
// ever returned from an entry whose CRC, framing or lengths do not hold: the
// caller gets an error wrapping ErrCorrupt that names the entry.
//
// # Directory layout
//
//	| path                         | what                                                  |
//	|------------------------------|-------------------------------------------------------|
//	| Dir/LOCK                     | flock(LOCK_EX) while open; holds the owner's pid      |
//	| Dir/wal/%020d                | tidwall/wal segment files, named by their first index |
//	| Dir/snap/snap-%020d.rsnap    | snapshots, named by the position they cover (2 kept)  |
//	| Dir/snap/snap-%020d.rsnap.tmp| a snapshot being written; removed at Open             |
//
// # WAL segment file (tidwall/wal binary format)
//
//	| field | size    | meaning                              |
//	|-------|---------|--------------------------------------|
//	| size  | uvarint | length of the entry that follows     |
//	| entry | size    | one WAL entry (below); repeated      |
//
// # WAL entry (one group commit), little-endian
//
//	| offset | size   | field   | meaning                                            |
//	|--------|--------|---------|----------------------------------------------------|
//	| 0      | 4      | magic   | "RGN1"                                             |
//	| 4      | 4      | crc32c  | CRC-32C (Castagnoli) of bytes 8..end               |
//	| 8      | 1      | version | 1                                                  |
//	| 9      | 1      | codec   | 0 raw, 1 zstd (one frame)                          |
//	| 10     | 4      | count   | records in the entry, 1..2^20-1                    |
//	| 14     | 4      | rawLen  | length of the uncompressed body                    |
//	| 18     | 8      | index   | the WAL index the entry was written at             |
//	| 26     | rest   | body    | the records, framed as below; zstd if codec is 1   |
//
// The CRC sits right after the magic so that it covers every other header
// field. The body is stored raw when compressing does not shrink it. When
// reading, an entry claiming rawLen above MaxEntryBytes is refused before
// decompression (zstd bombs), the decoder may not produce more than rawLen
// bytes, and the result must be exactly rawLen long and hold exactly count
// records. The stored index catches an entry read at the wrong index.
//
// # Record framing inside a body
//
//	| field | size    | meaning               |
//	|-------|---------|-----------------------|
//	| len   | uvarint | length of the record  |
//	| rec   | len     | the record's bytes    |
//
// # Snapshot file, little-endian
//
//	| offset | size | field   | meaning                                   |
//	|--------|------|---------|-------------------------------------------|
//	| 0      | 4    | magic   | "RGNS"                                    |
//	| 4      | 4    | crc32c  | CRC-32C of bytes 8..end                   |
//	| 8      | 1    | version | 1                                         |
//	| 9      | 1    | codec   | 0 raw, 1 zstd                             |
//	| 10     | 8    | pos     | the position the snapshot covers          |
//	| 18     | 8    | rawLen  | length of the snapshot data               |
//	| 26     | 8    | dataLen | length of the stored data that follows    |
//	| 34     | rest | data    | the snapshot data, zstd if codec is 1     |
//
// Snapshots are written to a temporary file, fsynced, renamed into place and
// the directory fsynced. LoadSnapshot takes the newest whose checks hold and
// falls back to the older one, logging why.
//
// # Durability and repair
//
// SyncAlways calls done after write+fsync; SyncInterval and SyncNone after
// the write (SyncInterval fsyncs at most every SyncInterval when something was
// written; SyncNone only on Close). tidwall/wal fsyncs a segment when it rolls
// to a new one but never the directory, so the committer fsyncs the WAL
// directory whenever a write created a segment file (SyncAlways,
// SyncInterval).
//
// Before tidwall/wal opens the WAL, the last segment file is scanned entry by
// entry. A torn tail (a bad entry after which no valid entry follows: its
// length runs past the end of the file, only zeros follow, or it is the last
// entry and garbled) is truncated to the end of the last good entry, fsynced
// and logged with the number of bytes and entries dropped. A bad entry
// followed by a valid one (found by scanning for the entry magic) is mid-log
// corruption: Open fails with ErrCorrupt naming the file and offset, unless
// Config.Salvage is set, which truncates there and logs loudly what was
// dropped. Older segments are checked when read (Replay stops at a bad
// entry with ErrCorrupt); with Config.Salvage, Open also checks the older
// segments from the newest usable snapshot's entry on and truncates the
// journal at the first bad entry, removing the later segment files and the
// snapshots at or after the cut, and logs what it dropped.
//
// A snapshot covering entries the WAL does not hold (its tail was lost: a
// machine crash under SyncNone or SyncInterval) is removed at Open, loudly:
// the entries written next would otherwise get positions below it and be
// skipped by the recovery after.
//
// EnvUnsafeAckBeforeWrite is a test hook that breaks durability on purpose
// (the crash harness must catch it); see debug.go.
//
// Retention drops whole segments only: TruncateFront takes a segment start.
package log
