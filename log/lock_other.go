//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package log

import "fmt"

type dirLock struct{}

// lockDir: directory locking uses flock, which this platform lacks.
func lockDir(path string) (*dirLock, error) {
	return nil, fmt.Errorf("log: lock %s: directory locking is not supported on this platform", path)
}

func (d *dirLock) release() error { return nil }
