package engine

import "time"

// Journal is where the engine makes its changes durable. The log package's
// *log.Log implements it; tests may use an in-memory one. Positions are
// opaque, increasing uint64s.
type Journal interface {
	// Append copies rec into the journal's current group commit and returns
	// its position at once; done is called exactly once, from the journal's
	// committer, when rec is durable (or failed). done must not block.
	// Append never waits: the engine appends while it holds partition
	// locks that done callbacks take. It refuses a record it cannot take
	// now, keeping nothing of it, with an error matching syscall.EAGAIN
	// (the journal is behind), syscall.ENOSPC (the disk is full) or
	// syscall.EMSGSIZE (the record is too large); any other error is a
	// failure of the journal, which Err then reports.
	Append(rec []byte, done func(error)) (uint64, error)
	// Read returns a copy of the record at pos.
	Read(pos uint64) ([]byte, error)
	// Replay calls fn for every record after position after, in order.
	Replay(after uint64, fn func(pos uint64, rec []byte) error) error
	// LoadSnapshot returns the newest snapshot and the position it covers.
	LoadSnapshot() (pos uint64, data []byte, ok bool, err error)
	// WriteSnapshot stores a snapshot covering every record up to pos.
	WriteSnapshot(pos uint64, data []byte) error
	// SegmentStarts lists the first index of each segment; TruncateFront
	// drops the segments before index. Indexes are positions >> 20.
	SegmentStarts() []uint64
	TruncateFront(index uint64) error
	// Err reports why the journal refuses records now: a failure (a write or
	// fsync that failed; sticky), or a passing condition: an error matching
	// syscall.ENOSPC (disk full) or syscall.EAGAIN (out of descriptors).
	Err() error
	// Stalled returns an error when records have waited longer than after
	// without the journal writing any (a stuck disk or committer).
	Stalled(after time.Duration) error
}

// posIndex is the journal entry index of a position (see package log).
func posIndex(p uint64) uint64 { return p >> 20 }
