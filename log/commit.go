package log

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// group is one group commit: the records appended while the previous group
// was being written, framed as uvarint(len)|bytes, and their callbacks.
type group struct {
	index uint64 // the WAL index it will be written at
	n     int    // records
	body  []byte
	dones []func(error)
	seg   uint64 // SyncAlways: first index of the segment it was written to
	big   bool   // it passed pipelineBytes
}

// pipelineBytes: under SyncAlways a group this large is sealed and
// compressed while the previous fsync runs; a smaller one keeps collecting
// appends until the syncer is free (fewer, fuller fsyncs).
const pipelineBytes = 256 << 10

// reset empties g for reuse, keeping its buffers (unless one grew huge).
func (g *group) reset(maxBatch int) {
	clear(g.dones) // drop the closures so they can be collected
	g.dones = g.dones[:0]
	g.body = g.body[:0]
	if cap(g.body) > 4*maxBatch {
		g.body = nil
	}
	g.n = 0
	g.big = false
}

// Append copies rec into the group being filled and returns its position at
// once; it never waits. done is called exactly once, from the committer (or
// syncer) goroutine, when the record is durable under the sync policy
// (SyncAlways: written and fsynced; SyncInterval, SyncNone: written), or with
// the error if that failed. done must not block, nor call Close (which waits
// for the committer); Append, Read and the other methods are fine. A nil done
// is allowed. Records appended by one goroutine keep their order.
//
// Append refuses a record, at once and without a trace, when:
//   - it is larger than MaxEntryBytes (with its framing): ErrTooLarge;
//   - MaxQueuedBytes of records already wait to be written and fsynced (the
//     disk is slower than the appenders): an error wrapping ErrBusy, which
//     passes by itself as the committer catches up. A record always fits
//     when nothing waits, however large (up to MaxEntryBytes);
//   - the disk is full: an error wrapping ErrNoSpace (see Err);
//   - after a failure (see Err): that error; after Close: ErrClosed.
//
// A full open group (MaxBatchBytes, MaxEntryBytes or 2^20-1 records) is
// sealed and queued for the committer, and the record opens the next one.
func (l *Log) Append(rec []byte, done func(error)) (uint64, error) {
	need := recordFrameLen(len(rec))
	if need > l.cfg.MaxEntryBytes {
		return 0, fmt.Errorf("%w: record of %d bytes (MaxEntryBytes %d)", ErrTooLarge, len(rec), l.cfg.MaxEntryBytes)
	}
	l.mu.Lock()
	switch {
	case l.err != nil:
		err := l.err
		l.mu.Unlock()
		return 0, err
	case l.noSpace != nil:
		err := l.noSpace
		l.mu.Unlock()
		return 0, err
	case l.closing:
		l.mu.Unlock()
		return 0, ErrClosed
	case l.queued > 0 && l.queued+int64(need) > int64(l.cfg.MaxQueuedBytes):
		queued := l.queued
		l.mu.Unlock()
		l.stats.busy.Add(1)
		return 0, fmt.Errorf("%w: %d bytes wait to be written (MaxQueuedBytes %d); try again", ErrBusy, queued, l.cfg.MaxQueuedBytes)
	}
	if l.queued == 0 {
		l.progress.Store(time.Now().UnixNano()) // the stall clock starts now (see Stalled)
	}
	g := l.open
	kick := false
	if g.n > 0 && (len(g.body) >= l.cfg.MaxBatchBytes || len(g.body)+need > l.cfg.MaxEntryBytes || g.n >= l.maxRecords) {
		// Full: sealed as it is (the committer writes sealed groups first,
		// in order), and this record opens the next group.
		l.sealed = append(l.sealed, g)
		l.open = l.takeFree()
		l.open.index = g.index + 1
		g = l.open
		kick = true
	}
	pos := MakePos(g.index, g.n)
	g.body = appendRecord(g.body, rec)
	l.queued += int64(need)
	if l.unsafeEarlyAck && done != nil {
		go done(nil) // UNSAFE test hook: answered before the record is written
		done = nil
	}
	g.dones = append(g.dones, done)
	g.n++
	if g.n == 1 {
		kick = true
	}
	if !g.big && len(g.body) >= pipelineBytes {
		g.big = true // worth compressing while the syncer is busy: tell the committer
		kick = true
	}
	l.stats.appends.Add(1)
	l.mu.Unlock()
	if kick {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
	return pos, nil
}

// run is the committer goroutine.
func (l *Log) run() {
	defer close(l.stopped)
	var tick <-chan time.Time
	if l.cfg.Sync == SyncInterval {
		l.syncTimer = time.NewTimer(time.Hour)
		l.syncTimer.Stop()
		defer l.syncTimer.Stop()
		tick = l.syncTimer.C
	}
	if l.cfg.Sync == SyncAlways {
		go l.syncer()
	}
	for {
		l.mu.Lock()
		if len(l.sealed) > 0 {
			g := l.sealed[0]
			l.sealed[0] = nil
			l.sealed = l.sealed[1:]
			if len(l.sealed) == 0 {
				l.sealed = nil
			}
			l.mu.Unlock()
			l.commit(g)
			continue
		}
		if l.open.n > 0 && l.cfg.Sync == SyncAlways && !l.closing && !l.open.big && l.syncBusy.Load() {
			// Seal only when the syncer is free: appends that come meanwhile
			// join this group and share its fsync. A big group is sealed at
			// once, so that its compression overlaps the running fsync.
			l.mu.Unlock()
			select {
			case <-l.syncIdle:
			case <-l.kick:
			case <-l.stop:
			}
			continue
		}
		if l.open.n > 0 {
			g := l.open
			l.open = l.takeFree()
			l.open.index = g.index + 1
			l.mu.Unlock()
			l.commit(g)
			continue
		}
		closing := l.closing
		l.mu.Unlock()
		if closing {
			if l.syncQ != nil {
				close(l.syncQ)
				<-l.syncerDone
			}
			l.finalSync()
			return
		}
		select {
		case <-l.kick:
		case <-tick:
			l.timerArmed = false
			l.intervalSync()
		case <-l.stop:
		}
	}
}

// intervalSync is SyncInterval's rule, applied after each write and when the
// timer fires: fsync if something was written and the last fsync is at least
// SyncInterval old; otherwise make sure the timer will come back for it.
func (l *Log) intervalSync() {
	if !l.dirty || l.stickyErr() != nil {
		return
	}
	if wait := l.cfg.SyncInterval - time.Since(l.lastSync); wait > 0 {
		if !l.timerArmed {
			l.syncTimer.Reset(wait)
			l.timerArmed = true
		}
		return
	}
	l.wmu.RLock()
	defer l.wmu.RUnlock()
	if l.wal != nil {
		_ = l.syncLocked() // a failure is sticky and logged by failed
	}
}

// takeFree returns an empty group for appenders to fill. l.mu is held.
func (l *Log) takeFree() *group {
	if n := len(l.free); n > 0 {
		g := l.free[n-1]
		l.free = l.free[:n-1]
		return g
	}
	return &group{}
}

// recycle empties g, once its records are done, and keeps it for reuse (a
// few groups at most: a burst of sealed groups gives its memory back).
func (l *Log) recycle(g *group) {
	n := int64(len(g.body))
	g.reset(l.cfg.MaxBatchBytes)
	l.progress.Store(time.Now().UnixNano())
	l.mu.Lock()
	l.queued -= n
	if len(l.free) < maxFreeGroups {
		l.free = append(l.free, g)
	}
	l.mu.Unlock()
}

// maxFreeGroups is how many empty groups the log keeps for reuse.
const maxFreeGroups = 4

// commit writes one sealed group as one WAL entry. Under SyncAlways the
// syncer fsyncs it and calls its callbacks, so the next group is compressed
// and written while this one's fsync runs (pipelined group commit);
// otherwise the callbacks run here, in order.
func (l *Log) commit(g *group) {
	err := l.stickyErr()
	if err == nil {
		if l.unsafeEarlyAck {
			time.Sleep(unsafeWriteDelay) // see EnvUnsafeAckBeforeWrite
		}
		err = l.write(g)
		if shortErr(err) {
			err = l.waitForSpace(g)
		}
	}
	if err == nil && l.syncQ != nil {
		l.syncQ <- g
		return
	}
	g.finish(err)
	l.recycle(g)
}

func (g *group) finish(err error) {
	for _, done := range g.dones {
		if done != nil {
			done(err)
		}
	}
}

// syncer is SyncAlways's second stage: it takes every group written so far,
// fsyncs once for all of them, and calls their callbacks in order.
func (l *Log) syncer() {
	defer close(l.syncerDone)
	var f *os.File
	var fseg uint64
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	batch := make([]*group, 0, cap(l.syncQ)+1)
	for g := range l.syncQ {
		l.syncBusy.Store(true)
		batch = append(batch[:0], g)
	more:
		for {
			select {
			case g2, ok := <-l.syncQ:
				if !ok {
					break more
				}
				batch = append(batch, g2)
			default:
				break more
			}
		}
		err := l.stickyErr()
		if err == nil {
			// tidwall fsyncs a segment before it moves on to the next, so
			// only the segment of the newest group needs it here. Our own
			// descriptor lets the fsync run without tidwall's lock, while
			// the committer writes the next group.
			last := batch[len(batch)-1]
			if f == nil || fseg != last.seg {
				if f != nil {
					f.Close()
				}
				fseg = last.seg
				f, err = l.openForSync(fseg)
			}
			if err == nil {
				start := time.Now()
				if serr := fdatasync(f); serr != nil {
					err = l.failed(fmt.Errorf("log: fsync: %w", serr))
				} else {
					l.stats.noteFsync(time.Since(start))
				}
			}
		}
		for _, g := range batch {
			g.finish(err)
			l.recycle(g)
		}
		clear(batch)
		l.syncBusy.Store(false)
		select {
		case l.syncIdle <- struct{}{}:
		default:
		}
	}
}

// openForSync opens segment seg for the syncer's fsyncs. While the process
// is out of descriptors it waits for one (the groups wait, and Append
// refuses records once MaxQueuedBytes wait: "overloaded"), instead of
// failing the journal; any other error is a failure.
func (l *Log) openForSync(seg uint64) (*os.File, error) {
	logged := false
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		f, err := os.OpenFile(filepath.Join(l.walDir, segmentName(seg)), os.O_RDONLY, 0)
		if err == nil {
			if logged {
				l.logger.Warn("journal: a descriptor is free again; fsyncs go on", "segment", seg)
			}
			return f, nil
		}
		if !isFdShort(err) || l.isClosing() {
			return nil, l.failed(fmt.Errorf("log: open segment for fsync: %w", err))
		}
		if !logged {
			logged = true
			l.stats.fdShort.Add(1)
			l.logger.Error("journal: out of file descriptors to fsync a new segment; waiting for one", "segment", seg, "err", err)
		}
		time.Sleep(wait)
	}
}

func (l *Log) write(g *group) error {
	l.ebuf = encodeEntryGuessing(l.ebuf, g.index, g.n, g.body, &l.guess)
	if cap(l.ebuf) > 4*l.cfg.MaxBatchBytes+entryHeaderLen {
		defer func() { l.ebuf = nil }()
	}
	l.wmu.RLock()
	defer l.wmu.RUnlock()
	if l.wal == nil {
		return l.failed(fmt.Errorf("log: wal is not open (a truncation failed)"))
	}
	err := l.fault(g.index, false)
	if err == nil {
		err = l.wal.Write(g.index, l.ebuf)
		if err == nil {
			err = l.fault(g.index, true)
		}
	}
	if err != nil {
		if isShort(err) {
			// Not sticky: the committer rewinds the WAL and retries (see
			// waitForSpace); Append refuses records meanwhile.
			return l.enterNoSpace(g.index, err)
		}
		return l.failed(fmt.Errorf("log: write entry %d: %w", g.index, err))
	}
	created, seg := l.noteWrite(g.index, len(l.ebuf))
	g.seg = seg
	l.dirty = true
	l.last.Store(g.index)
	l.stats.entries.Add(1)
	l.stats.records.Add(uint64(g.n))
	l.stats.bytesRaw.Add(uint64(len(g.body)))
	l.stats.bytesWritten.Add(uint64(len(l.ebuf)))
	l.stats.lastBatch.Store(uint64(g.n))
	switch l.cfg.Sync {
	case SyncAlways:
		// the syncer fsyncs (see commit)
	case SyncInterval:
		if time.Since(l.lastSync) >= l.cfg.SyncInterval {
			if err := l.syncLocked(); err != nil {
				return err
			}
		} else if !l.timerArmed {
			l.syncTimer.Reset(l.cfg.SyncInterval - time.Since(l.lastSync))
			l.timerArmed = true
		}
	}
	// tidwall/wal creates segment files without fsyncing the directory; a
	// crash could then lose a whole fsynced segment.
	if created && l.cfg.Sync != SyncNone {
		if err := l.syncWALDir(); err != nil {
			return l.failed(err)
		}
	}
	return nil
}

// syncLocked fsyncs the tail segment and records the latency. The caller
// holds wmu.RLock with l.wal open. A failure is sticky: after a failed fsync
// the page cache state is unknown, so the log stops.
func (l *Log) syncLocked() error {
	start := time.Now()
	err := l.wal.Sync()
	l.lastSync = time.Now()
	if err != nil {
		return l.failed(fmt.Errorf("log: fsync: %w", err))
	}
	l.dirty = false
	l.stats.noteFsync(l.lastSync.Sub(start))
	return nil
}

// finalSync is the committer's last act on Close: make everything durable
// whatever the policy, including the directory.
func (l *Log) finalSync() {
	if l.stickyErr() != nil {
		return
	}
	l.wmu.RLock()
	defer l.wmu.RUnlock()
	if l.wal == nil {
		return
	}
	if err := l.syncLocked(); err != nil {
		return
	}
	if err := l.syncWALDir(); err != nil {
		l.failed(err)
	}
}
