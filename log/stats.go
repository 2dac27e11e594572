package log

import (
	"fmt"
	"sync/atomic"
	"time"
)

// FsyncBuckets are the upper bounds of the fsync latency histogram in
// Stats.FsyncHistogram; its last bucket counts everything slower.
var FsyncBuckets = [...]time.Duration{
	100 * time.Microsecond,
	250 * time.Microsecond,
	500 * time.Microsecond,
	time.Millisecond,
	2 * time.Millisecond,
	5 * time.Millisecond,
	10 * time.Millisecond,
	25 * time.Millisecond,
	50 * time.Millisecond,
	100 * time.Millisecond,
}

// Stats are the journal's counters since Open. Each field is read atomically
// on its own, so a snapshot taken under load may be off by a group between
// fields.
type Stats struct {
	Appends          uint64 // Append calls accepted into a group
	Records          uint64 // records written to the WAL
	Entries          uint64 // groups written (one WAL entry each)
	BytesRaw         uint64 // framed record bytes before compression
	BytesWritten     uint64 // entry bytes handed to the WAL (headers included)
	Fsyncs           uint64 // fsyncs of the WAL tail
	FsyncNanosTotal  uint64 // time spent in them
	LastFsyncNanos   uint64 // latency of the latest one
	LastBatchRecords uint64 // records in the latest group written
	DiskFullEvents   uint64 // times a write found the disk full (see ErrNoSpace)
	BusyRefusals     uint64 // records refused because MaxQueuedBytes waited (see ErrBusy)
	FdShortEvents    uint64 // times a write found the process out of file descriptors
	QueuedBytes      uint64 // record bytes accepted and not yet done, now
	// FsyncHistogram[i] counts fsyncs that took at most FsyncBuckets[i] (and
	// more than the bucket before); the last element counts slower ones.
	FsyncHistogram [len(FsyncBuckets) + 1]uint64
}

type counters struct {
	appends, records, entries    atomic.Uint64
	bytesRaw, bytesWritten       atomic.Uint64
	fsyncs, fsyncNanos, lastSync atomic.Uint64
	lastBatch                    atomic.Uint64
	noSpace, busy, fdShort       atomic.Uint64
	hist                         [len(FsyncBuckets) + 1]atomic.Uint64
}

func (c *counters) noteFsync(d time.Duration) {
	c.fsyncs.Add(1)
	c.fsyncNanos.Add(uint64(d))
	c.lastSync.Store(uint64(d))
	i := 0
	for i < len(FsyncBuckets) && d > FsyncBuckets[i] {
		i++
	}
	c.hist[i].Add(1)
}

// Stats returns the counters.
func (l *Log) Stats() Stats {
	c := &l.stats
	s := Stats{
		Appends:          c.appends.Load(),
		Records:          c.records.Load(),
		Entries:          c.entries.Load(),
		BytesRaw:         c.bytesRaw.Load(),
		BytesWritten:     c.bytesWritten.Load(),
		Fsyncs:           c.fsyncs.Load(),
		FsyncNanosTotal:  c.fsyncNanos.Load(),
		LastFsyncNanos:   c.lastSync.Load(),
		LastBatchRecords: c.lastBatch.Load(),
		DiskFullEvents:   c.noSpace.Load(),
		BusyRefusals:     c.busy.Load(),
		FdShortEvents:    c.fdShort.Load(),
	}
	l.mu.Lock()
	s.QueuedBytes = uint64(l.queued)
	l.mu.Unlock()
	for i := range c.hist {
		s.FsyncHistogram[i] = c.hist[i].Load()
	}
	return s
}

// Stalled returns an error when records have waited for longer than after
// without the committer finishing any group: the disk, or the committer
// itself, is stuck. It is nil while nothing waits.
func (l *Log) Stalled(after time.Duration) error {
	l.mu.Lock()
	queued := l.queued
	l.mu.Unlock()
	if queued == 0 {
		return nil
	}
	since := time.Since(time.Unix(0, l.progress.Load()))
	if since < after {
		return nil
	}
	return fmt.Errorf("log: the committer finished no group for %v with %d bytes waiting to be written (stuck disk or committer)",
		since.Round(time.Millisecond), queued)
}
