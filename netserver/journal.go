package netserver

import "time"

// JournalStats are the journal figures both doors report: /metrics and the
// dashboard over HTTP, Stats replies over the binary protocol. The broker
// fills them from the journal (netserver does not import it) through
// httpapi.Config.JournalStats and tcp.Config.JournalStats.
type JournalStats struct {
	Fsyncs          uint64 // fsyncs since start
	FsyncNanosTotal uint64 // time spent in them
	LastFsyncNanos  uint64 // latency of the latest one
	// FsyncBuckets are the upper bounds of FsyncHistogram's buckets;
	// FsyncHistogram[i] counts fsyncs that took at most FsyncBuckets[i] (and
	// more than the bucket before), its last element the slower ones
	// (len(FsyncHistogram) == len(FsyncBuckets)+1).
	FsyncBuckets     []time.Duration
	FsyncHistogram   []uint64
	Entries          uint64 // batches (group commits) written
	Records          uint64 // records written
	LastBatchRecords uint64 // records in the latest batch
	BytesWritten     uint64 // bytes handed to the write-ahead log
	DiskBytes        int64  // bytes the journal occupies on disk
}
