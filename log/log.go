package log

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tidwall/wal"
)

// Errors returned by the package; they come wrapped with context, so test
// them with errors.Is.
var (
	// ErrCorrupt: an entry or a snapshot failed its checks (CRC, framing,
	// lengths). Its data is never returned.
	ErrCorrupt = errors.New("log: corrupt")
	// ErrClosed: the Log was closed.
	ErrClosed = errors.New("log: closed")
	// ErrLocked: another Log (in this process or another) holds the directory.
	ErrLocked = errors.New("log: directory locked")
	// ErrTooLarge: a record or an entry exceeds MaxEntryBytes. It matches
	// syscall.EMSGSIZE too, so that the engine can tell a record refused for
	// its size (that request's error) without importing this package.
	ErrTooLarge error = tooLargeError{}
	// ErrNotFound: no record at that position (not written yet, or truncated
	// away), or a Replay whose start was truncated away.
	ErrNotFound = errors.New("log: not found")
	// ErrBadIndex: TruncateFront was given an index that is not the first
	// index of a segment.
	ErrBadIndex = errors.New("log: not a segment start")
)

type tooLargeError struct{}

func (tooLargeError) Error() string        { return "log: too large" }
func (tooLargeError) Is(target error) bool { return target == syscall.EMSGSIZE }

// Names inside Config.Dir.
const (
	walDirName  = "wal"
	snapDirName = "snap"
	lockName    = "LOCK"
)

// Log is the journal: one tidwall/wal write-ahead log written by one
// committer goroutine doing group commit. All methods are safe for concurrent
// use.
type Log struct {
	cfg     Config
	logger  *slog.Logger
	dir     string
	walDir  string
	snapDir string
	lock    *dirLock

	// Group commit state, guarded by mu.
	mu     sync.Mutex
	open   *group   // the group appenders fill
	sealed []*group // full groups waiting for the committer, oldest first
	// queued is the size of the records accepted and not yet done (in the
	// open group, sealed, or being written or fsynced): MaxQueuedBytes
	// bounds it.
	queued int64
	// progress is when the committer last finished a group, or when work
	// arrived while none waited (Unix nanoseconds; see Stalled).
	progress atomic.Int64
	// maxRecords seals a group at this many records (record numbers must
	// fit in a position); a variable only so tests can lower it.
	maxRecords int
	closing    bool
	err        error // sticky failure
	noSpace    error // the disk is full: appends refused until a write works again
	// state mirrors err (or else noSpace) for Err, which takes no lock.
	state atomic.Pointer[error]
	// unsafeEarlyAck is the REGENT_DEBUG_UNSAFE_ACK_BEFORE_WRITE test hook
	// (see debug.go).
	unsafeEarlyAck bool
	// faultFn is a test hook in the write path (see faultHook).
	faultFn atomic.Pointer[faultHook]
	kick    chan struct{} // open group became non-empty (cap 1)
	stop    chan struct{} // closed by Close
	stopped chan struct{} // closed when the committer exits

	// Committer-only state.
	free       []*group      // empty groups for reuse (guarded by mu)
	syncQ      chan *group   // SyncAlways: written groups waiting for the syncer
	syncerDone chan struct{} // closed when the syncer exits
	syncBusy   atomic.Bool   // the syncer is fsyncing
	syncIdle   chan struct{} // the syncer became free (cap 1)
	ebuf       []byte        // encoded entry, reused
	guess      Compressor    // whether the next group is worth compressing (write)
	dirty      bool          // written since the last fsync
	lastSync   time.Time
	syncTimer  *time.Timer // SyncInterval: armed while an fsync is due
	timerArmed bool

	// walDirFile is the WAL directory, open from Open to Close (its fsyncs).
	walDirFile *os.File

	// wmu guards the wal pointer: RLock to use it (tidwall locks inside),
	// Lock to close or reopen it.
	wmu sync.RWMutex
	wal *wal.Log

	// readMu serializes wal.Read (tidwall's concurrent Read of old segments
	// can panic) and guards cache.
	readMu sync.Mutex
	cache  entryCache

	// segMu guards segs: the segment files, mirrored from tidwall's rules.
	segMu sync.Mutex
	segs  []segment

	first atomic.Uint64
	last  atomic.Uint64
	// holes are the entries lost to damage that a salvage skipped (found
	// at Open; read-only after).
	holes []IndexRange
	stats counters

	snapMu sync.Mutex

	closeOnce sync.Once
	closeErr  error
}

// segment is one WAL segment file.
type segment struct {
	start uint64 // index of its first entry (its file name)
	bytes int64
}

// Open locks cfg.Dir, repairs a torn tail of the last WAL segment, opens the
// WAL and starts the committer.
func Open(cfg Config) (_ *Log, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if _, err := zstdCodecs(); err != nil {
		return nil, err
	}
	l := &Log{
		cfg:     cfg,
		logger:  cfg.Logger,
		dir:     cfg.Dir,
		walDir:  filepath.Join(cfg.Dir, walDirName),
		snapDir: filepath.Join(cfg.Dir, snapDirName),
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),

		maxRecords: maxRecordsPerEntry,
	}
	l.cache.budget = cfg.ReadCacheBytes
	l.unsafeEarlyAck = unsafeAckBeforeWrite(l.logger)
	l.stallWritesHook()
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("log: create %s: %w", cfg.Dir, err)
	}
	if l.lock, err = lockDir(filepath.Join(cfg.Dir, lockName)); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			l.lock.release()
		}
	}()
	for _, d := range []string{l.walDir, l.snapDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, fmt.Errorf("log: create %s: %w", d, err)
		}
	}
	if err := syncDir(cfg.Dir); err != nil {
		return nil, err
	}
	if err := removeSnapTemps(l.snapDir); err != nil {
		return nil, err
	}
	// The WAL directory's descriptor stays open for its fsyncs: opening one
	// per new segment failed when the process was out of descriptors.
	if l.walDirFile, err = os.Open(l.walDir); err != nil {
		return nil, fmt.Errorf("log: open %s: %w", l.walDir, err)
	}
	defer func() {
		if err != nil {
			l.walDirFile.Close()
		}
	}()
	if err := removeSalvageTemps(l.walDir); err != nil {
		return nil, err
	}
	if err := repairWAL(l.walDir, cfg.Salvage, l.logger); err != nil {
		return nil, err
	}
	if l.holes, err = verifyWAL(cfg.Dir, l.walDir, cfg.Salvage, l.logger); err != nil {
		return nil, err
	}
	if err := l.openWAL(); err != nil {
		return nil, err
	}
	if err := l.dropSnapshotsAhead(); err != nil {
		l.wal.Close()
		return nil, err
	}
	l.open = &group{index: l.last.Load() + 1}
	if cfg.Sync == SyncAlways {
		// Unbuffered: the committer hands a written group over only when the
		// syncer is done with the previous one, so the next group collects
		// appends for a whole fsync (big groups) while being compressed in
		// parallel with it.
		l.syncQ = make(chan *group)
		l.syncerDone = make(chan struct{})
		l.syncIdle = make(chan struct{}, 1)
	}
	l.lastSync = time.Now()
	go l.run()
	return l, nil
}

// openWAL opens tidwall/wal on walDir and loads the index and segment state.
// The caller holds wmu (or is Open).
func (l *Log) openWAL() error {
	w, err := wal.Open(l.walDir, &wal.Options{
		NoSync:           true, // the committer fsyncs per policy
		SegmentSize:      l.cfg.SegmentBytes,
		LogFormat:        wal.Binary,
		SegmentCacheSize: 2,
		NoCopy:           true, // entries are immutable; we decode and copy out
		AllowEmpty:       true, // TruncateFront may drop every entry
		DirPerms:         0o750,
		FilePerms:        0o640,
	})
	if err != nil {
		if errors.Is(err, wal.ErrCorrupt) {
			return fmt.Errorf("%w: wal in %s: %v", ErrCorrupt, l.walDir, err)
		}
		return fmt.Errorf("log: open wal in %s: %w", l.walDir, err)
	}
	// wal.Open may have created the first segment file.
	if err := l.syncWALDir(); err != nil {
		w.Close()
		return err
	}
	first, err1 := w.FirstIndex()
	last, err2 := w.LastIndex()
	segs, err3 := listSegments(l.walDir)
	if err := errors.Join(err1, err2, err3); err != nil {
		w.Close()
		return fmt.Errorf("log: open wal in %s: %w", l.walDir, err)
	}
	if len(segs) == 0 {
		w.Close()
		return fmt.Errorf("log: open wal in %s: no segment file", l.walDir)
	}
	l.wal = w
	l.first.Store(first)
	l.last.Store(last)
	l.segMu.Lock()
	l.segs = segs
	l.segMu.Unlock()
	return nil
}

// listSegments returns the segment files of a WAL directory, ascending.
func listSegments(dir string) ([]segment, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var segs []segment
	for _, e := range ents {
		start, ok := segmentIndex(e.Name())
		if !ok || e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, err
		}
		segs = append(segs, segment{start: start, bytes: info.Size()})
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].start < segs[j].start })
	return segs, nil
}

// segmentIndex parses a tidwall segment file name (20 decimal digits).
func segmentIndex(name string) (uint64, bool) {
	if len(name) != 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(name, 10, 64)
	return v, err == nil && v > 0
}

func segmentName(index uint64) string { return fmt.Sprintf("%020d", index) }

// syncWALDir fsyncs the WAL directory through its kept descriptor.
func (l *Log) syncWALDir() error {
	if err := l.walDirFile.Sync(); err != nil {
		return fmt.Errorf("log: fsync dir %s: %w", l.walDir, err)
	}
	return nil
}

// syncDir fsyncs a directory so that files created, renamed or removed in it
// survive a crash.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("log: fsync dir %s: %w", dir, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("log: fsync dir %s: %w", dir, err)
	}
	return nil
}

// Err reports why Append refuses records right now, or nil while the log is
// healthy (also after a clean Close). It is the sticky failure after a write
// or fsync failed (restart to recover), or, while the disk is full, an error
// wrapping ErrNoSpace that passes by itself once a write fits again. It
// takes no lock.
func (l *Log) Err() error {
	if p := l.state.Load(); p != nil {
		return *p
	}
	return nil
}

// stickyErr is the sticky failure only.
func (l *Log) stickyErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// publishState refreshes the mirror that Err reads. l.mu is held.
func (l *Log) publishState() {
	switch {
	case l.err != nil:
		err := l.err
		l.state.Store(&err)
	case l.noSpace != nil:
		err := l.noSpace
		l.state.Store(&err)
	default:
		l.state.Store(nil)
	}
}

// NextIndex is the WAL index the group now being filled will get when the
// committer seals it: records at positions below MakePos(NextIndex(), 0) have
// been handed to the committer.
func (l *Log) NextIndex() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open.index
}

// LastIndex is the index of the last entry written (0 if none ever was).
func (l *Log) LastIndex() uint64 { return l.last.Load() }

// FirstIndex is the index of the first entry still in the log; when the log
// holds no entry it is LastIndex()+1.
func (l *Log) FirstIndex() uint64 { return l.first.Load() }

// SegmentStarts lists the first index of every segment file, ascending. The
// last one may be the start of an empty tail segment (LastIndex()+1).
func (l *Log) SegmentStarts() []uint64 {
	l.segMu.Lock()
	defer l.segMu.Unlock()
	out := make([]uint64, len(l.segs))
	for i, s := range l.segs {
		out[i] = s.start
	}
	return out
}

// DiskBytes is the size of the WAL segment files.
func (l *Log) DiskBytes() int64 {
	l.segMu.Lock()
	defer l.segMu.Unlock()
	var n int64
	for _, s := range l.segs {
		n += s.bytes
	}
	return n
}

// noteWrite mirrors tidwall/wal's segment rolling after the entry at index
// (n bytes of data) was written, and reports whether a new segment file was
// created (the WAL directory then needs an fsync). tidwall rolls to a new file
// before a write when the tail is already above SegmentSize, and after a write
// that brings the tail to SegmentSize or more.
func (l *Log) noteWrite(index uint64, n int) (created bool, seg uint64) {
	limit := int64(l.cfg.SegmentBytes)
	l.segMu.Lock()
	defer l.segMu.Unlock()
	if l.segs[len(l.segs)-1].bytes > limit {
		l.segs = append(l.segs, segment{start: index})
		created = true
	}
	seg = l.segs[len(l.segs)-1].start
	l.segs[len(l.segs)-1].bytes += int64(recordFrameLen(n))
	if l.segs[len(l.segs)-1].bytes >= limit {
		l.segs = append(l.segs, segment{start: index + 1})
		created = true
	}
	return created, seg
}

// Release drops the old segments that its reader (the engine) no longer
// needs, and so keeps the reader out of the position layout. covered is the
// position up to which an older snapshot covers every record (0: none): the
// entries after the one holding it stay, for a replay from that snapshot.
// live is the position of the oldest record that still holds messages (0:
// none): its entry stays. Release drops, with TruncateFront, the whole
// segments before the last segment start at or before the first entry that
// stays, and nothing when that is the first segment.
func (l *Log) Release(covered, live Pos) error {
	keep := uint64(1)
	if covered != 0 {
		keep = PosIndex(covered) + 1
	}
	if live > 0 && PosIndex(live) < keep {
		keep = PosIndex(live)
	}
	starts := l.SegmentStarts()
	cut := uint64(0)
	for _, s := range starts {
		if s <= keep {
			cut = s
		}
	}
	if len(starts) == 0 || cut <= starts[0] {
		return nil
	}
	return l.TruncateFront(cut)
}

// OldestSegment returns the positions [from, to) of the records the oldest
// segment file can hold, and whether a later segment follows it (only then
// can Release drop it).
func (l *Log) OldestSegment() (from, to Pos, ok bool) {
	starts := l.SegmentStarts()
	if len(starts) < 2 {
		return 0, 0, false
	}
	return MakePos(starts[0], 0), MakePos(starts[1], 0), true
}

// TruncateFront drops every whole segment file before index, which must be
// the first index of a segment (see SegmentStarts); retention never cuts a
// segment in the middle. Truncating to the current FirstIndex is a no-op.
// Index may be the start of an empty tail segment, which leaves the log empty
// (FirstIndex() == LastIndex()+1); new appends continue from there.
//
// The WAL is briefly closed and reopened (so tidwall/wal, whose own
// TruncateFront rewrites a whole segment and refuses to empty the log, is not
// used); appends keep collecting meanwhile.
func (l *Log) TruncateFront(index uint64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.wal == nil {
		return ErrClosed
	}
	if err := l.Err(); err != nil {
		return err
	}
	l.segMu.Lock()
	k := -1
	for i, s := range l.segs {
		if s.start == index {
			k = i
			break
		}
	}
	var drop []segment
	if k > 0 {
		drop = append(drop, l.segs[:k]...)
	}
	starts := len(l.segs)
	l.segMu.Unlock()
	if k < 0 {
		return fmt.Errorf("%w: TruncateFront(%d): segments start at %v", ErrBadIndex, index, l.SegmentStarts())
	}
	if k == 0 {
		return nil
	}
	// Close tidwall (it fsyncs the tail), remove the old files oldest first
	// (a crash in between leaves a contiguous suffix), fsync, reopen.
	if err := l.wal.Close(); err != nil {
		l.wal = nil
		return l.failed(fmt.Errorf("log: truncate: close wal: %w", err))
	}
	l.wal = nil
	l.readMu.Lock()
	l.cache.frames.closeFiles() // so that the removed files' space is freed
	for _, s := range drop {
		l.cache.frames.drop(s.start)
	}
	l.readMu.Unlock()
	for _, s := range drop {
		p := filepath.Join(l.walDir, segmentName(s.start))
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return l.failed(fmt.Errorf("log: truncate: %w", err))
		}
	}
	if err := l.syncWALDir(); err != nil {
		return l.failed(err)
	}
	// Reopening needs descriptors: while the process is out of them, the
	// WAL waits closed (writes and reads wait on wmu) until one is free.
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		err := l.openWAL()
		if err == nil {
			break
		}
		if !isFdShort(err) || l.isClosing() {
			return l.failed(fmt.Errorf("log: truncate: reopen: %w", err))
		}
		time.Sleep(wait)
	}
	l.logger.Info("journal truncated", "dir", l.dir, "segments_dropped", len(drop),
		"segments_left", starts-len(drop), "first_index", l.first.Load())
	return nil
}

// isClosing reports whether Close has begun.
func (l *Log) isClosing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closing
}

// failed makes err the sticky failure (if none is set yet) and returns it.
func (l *Log) failed(err error) error {
	l.mu.Lock()
	if l.err == nil {
		l.err = err
		l.publishState()
		l.logger.Error("journal failed; every later append will fail", "dir", l.dir, "err", err)
	}
	err = l.err
	l.mu.Unlock()
	return err
}

// Close seals and writes the open group (its records' done callbacks run),
// fsyncs, stops the committer, closes the WAL and releases the directory lock.
// Later calls return the first call's result.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closing = true
		l.mu.Unlock()
		close(l.stop)
		<-l.stopped
		var errs []error
		if err := l.stickyErr(); err != nil {
			errs = append(errs, err)
		}
		l.wmu.Lock()
		if l.wal != nil {
			if err := l.wal.Close(); err != nil {
				errs = append(errs, fmt.Errorf("log: close wal: %w", err))
			}
			l.wal = nil
		}
		l.wmu.Unlock()
		l.readMu.Lock()
		l.cache.reset()
		l.readMu.Unlock()
		l.walDirFile.Close()
		if err := l.lock.release(); err != nil {
			errs = append(errs, err)
		}
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}
