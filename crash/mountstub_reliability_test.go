//go:build !linux

package crash

import "errors"

func mountTmpfs(dir string, size int) (unmount func(), err error) {
	return nil, errors.New("tmpfs mounts are a Linux test facility")
}
