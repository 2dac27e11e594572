//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package log

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// dirLock is an exclusive flock on Dir/LOCK. flock locks belong to the open
// file description, so a second Open in the same process fails too; the
// kernel drops the lock when the holder exits, however it exits.
type dirLock struct {
	f *os.File
}

// lockDir takes the lock or fails with an error wrapping ErrLocked that names
// the holder's pid (written in the file by the holder).
func lockDir(path string) (*dirLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("log: lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another process"
			if b, rerr := os.ReadFile(path); rerr == nil {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
					holder = "pid " + strconv.Itoa(pid)
					if pid == os.Getpid() {
						holder += " (this process)"
					}
				}
			}
			return nil, fmt.Errorf("%w: journal directory is in use by %s (lock file %s)", ErrLocked, holder, path)
		}
		return nil, fmt.Errorf("log: lock %s: %w", path, err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt(pid, 0) // informative only
	}
	return &dirLock{f: f}, nil
}

// release drops the lock; closing the file releases the flock.
func (d *dirLock) release() error {
	if d == nil || d.f == nil {
		return nil
	}
	err := d.f.Close()
	d.f = nil
	if err != nil {
		return fmt.Errorf("log: release lock: %w", err)
	}
	return nil
}
