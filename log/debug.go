package log

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// EnvUnsafeAckBeforeWrite names a TEST HOOK that breaks durability on
// purpose, so that the crash harness (package crash) can show it catches
// lost acknowledgements. When the environment variable is "1" at Open, every
// Append's done runs at once with nil, before the record is written, let
// alone fsynced; a kill -9 then loses records that were answered as durable.
// Each group is also written unsafeWriteDelay late, as by a disk slower than
// a test machine's, so that a kill at a random moment finds answered records
// unwritten nearly every time. (Answering after the write but before the
// fsync cannot be caught by killing the process, only by losing the machine:
// the page cache survives.) Never set it outside tests; Open logs an error
// when it is set.
const EnvUnsafeAckBeforeWrite = "REGENT_DEBUG_UNSAFE_ACK_BEFORE_WRITE"

const unsafeWriteDelay = 5 * time.Millisecond

func unsafeAckBeforeWrite(logger *slog.Logger) bool {
	if os.Getenv(EnvUnsafeAckBeforeWrite) != "1" {
		return false
	}
	logger.Error("UNSAFE TEST HOOK: records are acknowledged before they are written; a crash loses acknowledged data",
		"env", EnvUnsafeAckBeforeWrite)
	return true
}

// EnvStallWritesAfter names a TEST HOOK that imitates a disk that stops
// answering: when the environment variable holds a number n at Open, the
// committer's write of every entry after the first n does not return until
// Close (the records wait, Stalled reports them; at Close the write fails),
// so that tests can show the broker reports a stuck journal and still stops
// within its shutdown bound. Never set it outside tests; Open logs an error when
// it is set.
const EnvStallWritesAfter = "REGENT_DEBUG_STALL_WRITES_AFTER"

func (l *Log) stallWritesHook() {
	v := os.Getenv(EnvStallWritesAfter)
	if v == "" {
		return
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		l.logger.Error("ignoring a test hook that is not a number", "env", EnvStallWritesAfter, "value", v)
		return
	}
	l.logger.Error("TEST HOOK: the journal's writes stop for good after the first ones", "env", EnvStallWritesAfter, "writes", n)
	var writes atomic.Uint64
	h := faultHook(func(index uint64, after bool) error {
		if !after && writes.Add(1) > n {
			<-l.stop
			return fmt.Errorf("test hook %s: write of entry %d abandoned at Close", EnvStallWritesAfter, index)
		}
		return nil
	})
	l.faultFn.Store(&h)
}
