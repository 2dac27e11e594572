package bench

import (
	"fmt"
	"os"
	"syscall"
)

// dropPageCache writes every dirty page back and then empties the kernel's
// page cache (and its dentry and inode caches), so that what is read next
// comes from the disk. It needs root.
func dropPageCache() error {
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err != nil {
		return fmt.Errorf("bench: --drop-caches: %w (it needs root)", err)
	}
	return nil
}
