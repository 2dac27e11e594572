package bench

import (
	"fmt"
	"os"
	"syscall"
)

const dropCachesFile = "/proc/sys/vm/drop_caches"

// canDropPageCache says whether dropPageCache will be allowed, before a
// backlog spends minutes on its push phase.
func canDropPageCache() error {
	f, err := os.OpenFile(dropCachesFile, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("bench: --drop-caches: %w (it needs root, and a writable /proc/sys)", err)
	}
	return f.Close()
}

// dropPageCache writes every dirty page back and then empties the kernel's
// page cache (and its dentry and inode caches), so that what is read next
// comes from the disk. It needs root.
func dropPageCache() error {
	syscall.Sync()
	if err := os.WriteFile(dropCachesFile, []byte("3\n"), 0); err != nil {
		return fmt.Errorf("bench: --drop-caches: %w (it needs root, and a writable /proc/sys)", err)
	}
	return nil
}
