package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// noSpaceError is the type of ErrNoSpace: it matches syscall.ENOSPC too, so
// that callers that must not import this package (the engine) can recognize
// the condition with errors.Is(err, syscall.ENOSPC).
type noSpaceError struct{}

func (noSpaceError) Error() string        { return "log: no space left on the journal's device" }
func (noSpaceError) Is(target error) bool { return target == syscall.ENOSPC }

// ErrNoSpace: the journal's device is full (ENOSPC or EDQUOT on a write).
// Unlike other write failures it passes by itself: while it lasts Append
// refuses every record with an error wrapping ErrNoSpace (and matching
// syscall.ENOSPC), and the committer retries writing the group that failed,
// every Config.NoSpaceRetry at most, until it fits; then appends are accepted
// again. Records accepted before the disk filled up are neither lost nor
// failed: their done runs when they are written.
var ErrNoSpace error = noSpaceError{}

// busyError is the type of ErrBusy: it matches syscall.EAGAIN too, so that
// the engine can recognize it without importing this package.
type busyError struct{}

func (busyError) Error() string        { return "log: the journal is behind" }
func (busyError) Is(target error) bool { return target == syscall.EAGAIN }

// ErrBusy: Append refused a record because Config.MaxQueuedBytes of records
// already wait to be written and fsynced. Nothing of the record was kept;
// it passes by itself as the committer catches up, so the caller answers
// "overloaded" and the client tries again.
var ErrBusy error = busyError{}

// isDiskFull reports whether a write failed for want of space.
func isDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// isFdShort reports whether an operation failed for want of file
// descriptors (the process's or the system's limit): they come back when
// connections close.
func isFdShort(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// isShort reports whether a write failed for a resource that comes back by
// itself (space, descriptors): the committer waits and writes again.
func isShort(err error) bool { return isDiskFull(err) || isFdShort(err) }

// shortErr reports whether err is the refusal of a short resource (see
// enterNoSpace), not a failure.
func shortErr(err error) bool { return errors.Is(err, ErrNoSpace) || errors.Is(err, ErrBusy) }

// enterNoSpace records that writing entry index found the disk full: from
// now on Append refuses records with an error wrapping ErrNoSpace. The caller
// holds wmu (read), so TruncateFront cannot slip in before the WAL is
// rewound.
//
// Short of descriptors (EMFILE, ENFILE: opening a new segment file) is the
// same passing condition, refused with an error wrapping ErrBusy (the
// engine answers "overloaded") instead of ErrNoSpace.
func (l *Log) enterNoSpace(index uint64, cause error) error {
	err := fmt.Errorf("%w: appends are refused until space is freed (writing entry %d: %v)", ErrNoSpace, index, cause)
	what := "journal: disk full; appends are refused, and the write is retried until space is freed"
	counter := &l.stats.noSpace
	if isFdShort(cause) {
		err = fmt.Errorf("%w: out of file descriptors; appends are refused until some are free (writing entry %d: %v)", ErrBusy, index, cause)
		what = "journal: out of file descriptors; appends are refused, and the write is retried until some are free"
		counter = &l.stats.fdShort
	}
	l.mu.Lock()
	first := l.noSpace == nil
	l.noSpace = err
	l.publishState()
	l.mu.Unlock()
	if first {
		counter.Add(1)
		l.logger.Error(what, "dir", l.walDir, "entry", index, "err", cause)
	}
	return err
}

// waitForSpace is the committer's answer to a write of g that found the disk
// full: it puts the WAL back as it was after the last good write, waits,
// and writes g again, until that works (nil), the log fails for another
// reason, or the log is closed (the error is then sticky and g's records get
// it).
func (l *Log) waitForSpace(g *group) error {
	start := time.Now()
	delay := min(10*time.Millisecond, l.cfg.NoSpaceRetry)
	for attempt := 1; ; attempt++ {
		rerr := l.rewind()
		if rerr != nil && !isShort(rerr) {
			return l.failed(fmt.Errorf("log: disk full, then the WAL could not be restored to its last entry: %w", rerr))
		}
		stopping := false
		select {
		case <-time.After(delay):
		case <-l.stop:
			stopping = true
		}
		err := rerr
		if err == nil {
			err = l.write(g)
		}
		if err == nil {
			l.mu.Lock()
			what := "journal: space is back; appends are accepted again"
			if errors.Is(l.noSpace, ErrBusy) {
				what = "journal: descriptors are back; appends are accepted again"
			}
			l.noSpace = nil
			l.publishState()
			l.mu.Unlock()
			l.logger.Warn(what, "dir", l.walDir,
				"entry", g.index, "attempts", attempt, "waited", time.Since(start).Round(time.Millisecond))
			return nil
		}
		if rerr == nil && !shortErr(err) {
			return err // sticky already
		}
		if stopping {
			if rerr == nil {
				if err := l.rewind(); err != nil {
					l.logger.Error("journal: could not restore the WAL after the last failed write", "err", err)
				}
			}
			// Not wrapping ErrNoSpace: this failure is final.
			return l.failed(fmt.Errorf("log: closed while the disk was full: entry %d and the records after it were not written (%v)", g.index, err))
		}
		delay = min(2*delay, l.cfg.NoSpaceRetry)
	}
}

// rewind closes tidwall/wal and puts the segment files back as they were
// after the last successful write (l.segs mirrors them): a failed write may
// have left part of an entry at the end of the tail segment, or a new
// segment file, and tidwall's in-memory copy of the tail is no longer
// trustworthy. Then it reopens the WAL.
func (l *Log) rewind() (err error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.wal != nil {
		func() {
			defer func() { _ = recover() }() // tidwall's state after a failed roll is not ours to trust
			_ = l.wal.Close()                // may fail on the full disk: the files are fixed below
		}()
		l.wal = nil
	}
	// Read's open segment files go first: fixing the files may need
	// descriptors (wmu is held: no read is running).
	l.readMu.Lock()
	l.cache.reset()
	l.readMu.Unlock()
	l.segMu.Lock()
	tail := l.segs[len(l.segs)-1]
	l.segMu.Unlock()
	files, err := listSegments(l.walDir)
	if err != nil {
		return fmt.Errorf("log: rewind: %w", err)
	}
	for _, f := range files {
		p := filepath.Join(l.walDir, segmentName(f.start))
		switch {
		case f.start > tail.start:
			if err := os.Remove(p); err != nil {
				return fmt.Errorf("log: rewind: %w", err)
			}
		case f.start == tail.start && f.bytes != tail.bytes:
			if err := truncateSync(p, tail.bytes); err != nil {
				return fmt.Errorf("log: rewind: %w", err)
			}
		}
	}
	if err := l.syncWALDir(); err != nil {
		return err
	}
	return l.openWAL()
}

// truncateSync cuts the file at path to size bytes and fsyncs it.
func truncateSync(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// faultHook, when set (tests only), is called before each entry is handed to
// tidwall/wal (after=false) and after tidwall wrote it (after=true); an error
// it returns is treated as the write's error. after=true with a disk-full
// error imitates a write that reached the file but failed.
type faultHook func(index uint64, after bool) error

func (l *Log) fault(index uint64, after bool) error {
	if h := l.faultFn.Load(); h != nil {
		return (*h)(index, after)
	}
	return nil
}
