//go:build !linux

package bench

import "errors"

// dropPageCache is Linux only.
func dropPageCache() error {
	return errors.New("bench: --drop-caches works on Linux only")
}
