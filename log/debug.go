package log

import (
	"log/slog"
	"os"
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
