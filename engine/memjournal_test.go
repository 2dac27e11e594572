package engine

import (
	"errors"
	"sync"
	"time"
)

// memJournal is an in-memory Journal for unit tests. Appends are committed
// in order by a goroutine, like the real journal's committer, so callbacks
// never run under the appender's locks.
type memJournal struct {
	mu      sync.Mutex
	recs    [][]byte
	snap    []byte
	snapPos uint64
	hasSnap bool
	queue   chan memEntry
	stopped chan struct{}
	failErr error
	// appendErr, when set, fails Append only (a write that passed the
	// engine's check and then found the disk full).
	appendErr error
	// allow, with appendErr, lets that many more appends through first.
	allow int
	// hold, when set, keeps commits back until released (to observe
	// pre-commit states).
	hold chan struct{}
	// reads counts Read calls; snaps WriteSnapshot calls.
	reads, snaps int
}

type memEntry struct {
	done func(error)
}

func newMemJournal() *memJournal {
	j := &memJournal{queue: make(chan memEntry, 1<<16), stopped: make(chan struct{})}
	go j.commit()
	return j
}

func (j *memJournal) commit() {
	defer close(j.stopped)
	for en := range j.queue {
		j.mu.Lock()
		h := j.hold
		j.mu.Unlock()
		if h != nil {
			<-h
		}
		if en.done != nil {
			j.mu.Lock()
			err := j.failErr
			j.mu.Unlock()
			en.done(err)
		}
	}
}

func (j *memJournal) close() {
	close(j.queue)
	<-j.stopped
}

// reopen returns a journal holding the records committed so far (a restart).
func (j *memJournal) reopen() *memJournal {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := newMemJournal()
	n.recs = append(n.recs, j.recs...)
	n.snap, n.snapPos, n.hasSnap = j.snap, j.snapPos, j.hasSnap
	return n
}

func (j *memJournal) Append(rec []byte, done func(error)) (uint64, error) {
	j.mu.Lock()
	if j.appendErr != nil && j.failErr == nil && j.allow > 0 {
		j.allow--
	} else if err := j.failErr; err != nil || j.appendErr != nil {
		if err == nil {
			err = j.appendErr
		}
		j.mu.Unlock()
		return 0, err
	}
	j.recs = append(j.recs, append([]byte(nil), rec...))
	pos := uint64(len(j.recs)) << 20 // one record per entry
	j.mu.Unlock()
	j.queue <- memEntry{done: done}
	return pos, nil
}

func (j *memJournal) Read(pos uint64) ([]byte, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.reads++
	i := int(pos>>20) - 1
	if i < 0 || i >= len(j.recs) || j.recs[i] == nil {
		return nil, errors.New("memjournal: no such record")
	}
	return append([]byte(nil), j.recs[i]...), nil
}

func (j *memJournal) Replay(after uint64, fn func(uint64, []byte) error) error {
	j.mu.Lock()
	recs := append([][]byte(nil), j.recs...)
	j.mu.Unlock()
	for i, r := range recs {
		pos := uint64(i+1) << 20
		if pos <= after || r == nil {
			continue
		}
		if err := fn(pos, r); err != nil {
			return err
		}
	}
	return nil
}

func (j *memJournal) LoadSnapshot() (uint64, []byte, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.snapPos, j.snap, j.hasSnap, nil
}

func (j *memJournal) WriteSnapshot(pos uint64, data []byte) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.snap, j.snapPos, j.hasSnap = append([]byte(nil), data...), pos, true
	j.snaps++
	return nil
}

// Release keeps everything: the memory journal is one segment.
func (j *memJournal) Release(covered, live uint64) error { return nil }

func (j *memJournal) OldestSegment() (from, to uint64, ok bool) { return 0, 0, false }

func (j *memJournal) Stalled(time.Duration) error { return nil }

func (j *memJournal) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.failErr
}

// snapshotData is the last snapshot written.
func (j *memJournal) snapshotData() []byte {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.snap
}
