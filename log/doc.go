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
// Every mutex of the package, outermost first: a goroutine holding one may
// take only those after it.
//
//	| lock     | guards                                       | while held, may block on                    |
//	|----------|----------------------------------------------|---------------------------------------------|
//	| snapMu   | the snapshot files: one WriteSnapshot or     | file I/O: writing, fsyncing and renaming a  |
//	|          | LoadSnapshot at a time                       | snapshot, reading them back                 |
//	| wmu (RW) | the tidwall/wal pointer: RLock to write or   | RLock: the committer's entry write (and the |
//	|          | read through it, Lock to close or reopen it  | fsync under SyncInterval and at Close), a   |
//	|          |                                              | Read or Replay; Lock (TruncateFront, the    |
//	|          |                                              | disk-full rewind, Close): waits for those,  |
//	|          |                                              | then closes, removes, fsyncs and reopens    |
//	| readMu   | reads through tidwall (its concurrent reads  | disk reads and zstd decoding of old entries |
//	|          | of old segments are unsafe), the entry cache |                                             |
//	| segMu    | the segment list                             | nothing                                     |
//	| mu       | group commit state: open, sealed, queued,    | nothing; nothing is taken while it is held  |
//	|          | free groups, the sticky failure, no-space    |                                             |
//
// Append takes only mu, briefly: it never waits (a record it cannot take
// now is refused). The syncer (SyncAlways) fsyncs through a descriptor of
// its own, holding no lock; the committer hands it a written group holding
// none. No lock of this package is held while a done callback runs, so a
// callback may take its caller's locks (the engine's stripes) and append.
// Err reads an atomic and takes no lock; Stalled and Stats take mu
// briefly.
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
// Reads are serialized by one mutex. Replay goes through tidwall/wal (whose
// concurrent reads of old segments are unsafe), which loads a segment file
// whole. Read, whose readers are spread over the journal, reads an old
// segment's entry with one pread, at an offset found by one scan of the
// file and kept (see segread.go; the tail segment comes from tidwall's
// copy in memory), and keeps the last few decoded entries so consecutive
// records decode once. No record is
// ever returned from an entry whose CRC, framing or lengths do not hold: the
// caller gets an error wrapping ErrCorrupt that names the entry (also when
// a segment went bad or away after Open: never a panic).
//
// # Directory layout
//
//	| path                         | what                                                  |
//	|------------------------------|-------------------------------------------------------|
//	| Dir/LOCK                     | flock(LOCK_EX) while open; holds the owner's pid      |
//	| Dir/wal/%020d                | tidwall/wal segment files, named by their first index |
//	| Dir/snap/snap-%020d.rsnap    | snapshots, named by the position they cover (2 kept)  |
//	| Dir/snap/snap-%020d.rsnap.tmp| a snapshot being written; removed at Open             |
//	| Dir/wal/%020d.salvage        | a segment being rewritten by a salvage; removed at Open|
//	| Dir/damaged/                 | the files a salvage replaced or set aside, as they were|
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
// A hole is an entry of count 0, codec 0, rawLen 0 and no body: a salvage
// wrote it in place of an entry lost to damage, so that indexes stay dense
// (tidwall needs them so) and the loss stays on record. Replay passes over
// it; Read, Check and Lost report it (ErrLost).
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
// and logged with the number of bytes and entries dropped: that is what a
// crash leaves, and nothing acknowledged is in it.
//
// # Damage away from the tail
//
// Then every segment file is checked, every entry of it (what a recovery
// replays and what a read of an old message reaches: the engine keeps
// messages in the journal, so any entry may be read): the segments follow
// each other (each holds exactly the entries up to the next one's start: a
// deleted segment file, or one cut short, leaves entries missing), and every
// entry's framing, CRC and index hold. Measured on a 2-vCPU machine shared
// with other work: 413 to 802 ms per GiB of WAL (median 705 ms, five runs)
// with the files in the page cache (BenchmarkVerifyWAL, size=1024MiB), and
// reading a GiB from its disk with O_DIRECT took 0.32 to 0.36 s; so the
// whole WAL is checked, not only the entries after the newest snapshot (a
// broker with a gigabyte of journal starts about a second later).
//
// On damage (including a bad entry in the last segment that valid entries
// follow) Open refuses with an error wrapping ErrCorrupt that names the
// file, the entry (or the entries missing) and salvage. With Config.Salvage
// (regent serve --salvage) each damaged segment file is rewritten with its
// good entries as they were and a hole in place of each lost entry (after a
// bad entry the next valid one is found by scanning for the entry magic;
// entries carry their index, so the lost ones are known exactly; a missing
// segment's entries become holes at the end of the one before), the original
// is kept under Dir/damaged/, and every damaged place is logged with the
// entries lost. Nothing else is dropped: the entries after the damage, and
// the snapshots, stay. Lost lists the holes (from this Open or an earlier
// one), Check tells whether the entry of a position is whole, and Salvaged
// tells the engine that records may be missing from what it replays.
//
// When no snapshot is usable, LoadSnapshot refuses naming salvage; with
// Config.Salvage it moves them to Dir/damaged/, says so, and reports none:
// the state is rebuilt from the WAL, whole when it holds every entry from 1.
// A snapshot whose following entries are gone (a segment file missing
// before the first one) makes Replay refuse likewise; with Config.Salvage
// it replays from the first entry, logging what is missing.
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
// The engine does not know segments or the position layout: it says what it
// still needs (Release: what an older snapshot covers, the oldest record
// holding live messages) and the log picks the segments that go;
// OldestSegment gives the position range of the oldest segment, for copying
// its few live records forward; CheckFront says whether entry 1 is still
// held.
package log
