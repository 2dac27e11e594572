package log

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Pos is the position of one record: the WAL index of the entry that holds it
// shifted left by 20 bits, ORed with the record's number inside that entry.
// Positions increase in append order; 0 is never a valid position (WAL indexes
// start at 1), so Replay(0, ...) means "from the start".
type Pos = uint64

const (
	posRecordBits = 20
	// maxRecordsPerEntry is how many records one entry (one group) may hold:
	// the record number must fit in posRecordBits.
	maxRecordsPerEntry = 1<<posRecordBits - 1
)

// MakePos builds the position of record number rec inside the entry at index.
func MakePos(index uint64, rec int) Pos { return index<<posRecordBits | uint64(rec)&maxRecordsPerEntry }

// PosIndex is the WAL index of the entry that holds the record at p.
func PosIndex(p Pos) uint64 { return p >> posRecordBits }

// PosRecord is the number of the record at p inside its entry.
func PosRecord(p Pos) int { return int(p & maxRecordsPerEntry) }

// SyncPolicy says when the committer fsyncs the WAL, and so when an Append's
// done callback runs.
type SyncPolicy int

const (
	// SyncAlways (the default) fsyncs after every group; done runs after the
	// fsync.
	SyncAlways SyncPolicy = iota
	// SyncInterval fsyncs at most every Config.SyncInterval when something was
	// written since the last fsync; done runs after the write, so a machine
	// crash can lose up to one interval of acknowledged records.
	SyncInterval
	// SyncNone never fsyncs except on Close (and where tidwall/wal fsyncs a
	// segment it rolls over); done runs after the write.
	SyncNone
)

// String names the policy as ParseSync accepts it.
func (p SyncPolicy) String() string {
	switch p {
	case SyncAlways:
		return "always"
	case SyncInterval:
		return "interval"
	case SyncNone:
		return "none"
	}
	return fmt.Sprintf("SyncPolicy(%d)", int(p))
}

// DefaultSyncInterval is the fsync period of SyncInterval when none is given.
const DefaultSyncInterval = 10 * time.Millisecond

// ParseSync reads a policy as written in flags and config files: "always",
// "none", "interval" (every DefaultSyncInterval) or "interval:DURATION" such as
// "interval:10ms". The duration is 0 for always and none.
func ParseSync(s string) (SyncPolicy, time.Duration, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	switch {
	case v == "always":
		return SyncAlways, 0, nil
	case v == "none":
		return SyncNone, 0, nil
	case v == "interval":
		return SyncInterval, DefaultSyncInterval, nil
	case strings.HasPrefix(v, "interval:"):
		d, err := time.ParseDuration(v[len("interval:"):])
		if err != nil {
			return 0, 0, fmt.Errorf("log: sync policy %q: bad interval: %v (want e.g. interval:10ms)", s, err)
		}
		if d <= 0 {
			return 0, 0, fmt.Errorf("log: sync policy %q: interval must be positive", s)
		}
		return SyncInterval, d, nil
	}
	return 0, 0, fmt.Errorf("log: unknown sync policy %q (want always, none, interval or interval:DURATION)", s)
}

// Defaults and limits of Config.
const (
	DefaultSegmentBytes  = 1 << 20
	DefaultMaxBatchBytes = 4 << 20
	DefaultMaxEntryBytes = 256 << 20
	DefaultMaxQueued     = 128 << 20
	// DefaultReadCacheBytes is Config.ReadCacheBytes when none is given.
	DefaultReadCacheBytes = 16 << 20
	// MaxEntryBytesLimit is the largest MaxEntryBytes accepted (an entry's
	// uncompressed length is stored in 32 bits, and the process-wide zstd
	// decoder is capped near it).
	MaxEntryBytesLimit = 1 << 30
	// DefaultNoSpaceRetry is Config.NoSpaceRetry when none is given.
	DefaultNoSpaceRetry = time.Second
)

// Config configures Open. Only Dir is required; zero values take the
// documented defaults.
type Config struct {
	// Dir holds the journal: Dir/wal (segments), Dir/snap (snapshots) and
	// Dir/LOCK. Created if missing.
	Dir string
	// Sync is the fsync policy; default SyncAlways.
	Sync SyncPolicy
	// SyncInterval is the fsync period for SyncInterval; default 10ms.
	SyncInterval time.Duration
	// SegmentBytes is the target size of one WAL segment file; default
	// 1 MiB. tidwall/wal keeps the whole tail segment in memory and grows
	// that buffer by appending, so each write copies the tail again now and
	// then, and up to twice the segment is held: with 64 MiB those copies
	// took 9% of the CPU of the TCP push benchmark (4 producers × 8 in
	// flight), with 16 MiB 7% and 46 MiB of the heap, with 4 MiB 6.5% and
	// 15 MiB (regent bench push against regent serve --pprof). With 1 MiB
	// the server's peak RSS in regent bench push went from 100-113 MiB to
	// 82-92 MiB; its CPU per message moved by 0.94x and 0.99x (medians of
	// the ratios of two sets of runs alternating with 4 MiB, on a shared
	// machine: within its noise). 256 KiB bought no more. A segment ends after the
	// entry that fills it, so an entry larger than a segment (a 1 MiB
	// message) has one of its own.
	SegmentBytes int
	// MaxBatchBytes is how many uncompressed bytes one group collects before
	// it is sealed and the next record opens a new group; default 4 MiB.
	MaxBatchBytes int
	// MaxQueuedBytes bounds the record bytes accepted and not yet durable
	// (the open group, sealed groups, and those being written or fsynced).
	// Past it Append refuses records at once with ErrBusy instead of
	// waiting, so that no caller ever blocks on the journal; default
	// 128 MiB. A record always fits when nothing waits.
	MaxQueuedBytes int
	// MaxEntryBytes is the largest (uncompressed) entry accepted when reading
	// and so the largest group, and caps one record; default 256 MiB, at most
	// MaxEntryBytesLimit.
	MaxEntryBytes int
	// ReadCacheBytes bounds the buffers of the entries Read keeps decoded
	// (see cacheSlots); default 16 MiB. The slot being read is kept
	// whatever its size.
	ReadCacheBytes int
	// Salvage lets Open go on despite damage away from the tail instead of
	// failing with ErrCorrupt: each damaged or missing entry is replaced by
	// a hole (every other entry is kept), the damaged files are kept under
	// Dir/damaged/, and what was lost is logged (see Lost). With it,
	// LoadSnapshot sets aside unusable snapshots instead of failing, and
	// Replay starts at the first entry when the ones after the snapshot are
	// gone. Torn tails are always repaired.
	Salvage bool
	// NoSpaceRetry is the longest wait between two attempts to write a group
	// again while the disk is full (see ErrNoSpace); the first comes after
	// 10ms and the wait doubles up to this. Default 1s.
	NoSpaceRetry time.Duration
	// Logger receives warnings (repairs, snapshot fallbacks) and errors;
	// nil means slog.Default().
	Logger *slog.Logger
}

// withDefaults validates c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	if c.Dir == "" {
		return c, fmt.Errorf("log: Config.Dir is required")
	}
	switch c.Sync {
	case SyncAlways, SyncNone:
	case SyncInterval:
		if c.SyncInterval < 0 {
			return c, fmt.Errorf("log: Config.SyncInterval %v is negative", c.SyncInterval)
		}
		if c.SyncInterval == 0 {
			c.SyncInterval = DefaultSyncInterval
		}
	default:
		return c, fmt.Errorf("log: unknown Config.Sync %v", c.Sync)
	}
	if c.SegmentBytes < 0 || c.MaxBatchBytes < 0 || c.MaxEntryBytes < 0 || c.MaxQueuedBytes < 0 || c.ReadCacheBytes < 0 {
		return c, fmt.Errorf("log: negative size in Config (SegmentBytes %d, MaxBatchBytes %d, MaxEntryBytes %d, MaxQueuedBytes %d, ReadCacheBytes %d)",
			c.SegmentBytes, c.MaxBatchBytes, c.MaxEntryBytes, c.MaxQueuedBytes, c.ReadCacheBytes)
	}
	if c.MaxQueuedBytes == 0 {
		c.MaxQueuedBytes = DefaultMaxQueued
	}
	if c.SegmentBytes == 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.ReadCacheBytes == 0 {
		c.ReadCacheBytes = DefaultReadCacheBytes
	}
	if c.MaxEntryBytes == 0 {
		c.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if c.MaxEntryBytes > MaxEntryBytesLimit {
		return c, fmt.Errorf("log: Config.MaxEntryBytes %d is above the limit %d", c.MaxEntryBytes, MaxEntryBytesLimit)
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = min(DefaultMaxBatchBytes, c.MaxEntryBytes)
	}
	if c.MaxBatchBytes > c.MaxEntryBytes {
		return c, fmt.Errorf("log: Config.MaxBatchBytes %d is above MaxEntryBytes %d", c.MaxBatchBytes, c.MaxEntryBytes)
	}
	if c.NoSpaceRetry < 0 {
		return c, fmt.Errorf("log: Config.NoSpaceRetry %v is negative", c.NoSpaceRetry)
	}
	if c.NoSpaceRetry == 0 {
		c.NoSpaceRetry = DefaultNoSpaceRetry
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}
