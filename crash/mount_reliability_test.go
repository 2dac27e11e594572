//go:build linux

package crash

import (
	"fmt"
	"syscall"
)

// mountTmpfs mounts a tmpfs of size bytes on dir (root only) and returns
// how to unmount it.
func mountTmpfs(dir string, size int) (unmount func(), err error) {
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		return nil, err
	}
	return func() { syscall.Unmount(dir, syscall.MNT_DETACH) }, nil
}
