package log

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data and the metadata needed to read it back (its
// size), which is what an append-only file needs.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
