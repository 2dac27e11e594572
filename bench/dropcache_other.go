//go:build !linux

package bench

import "errors"

var errDropCaches = errors.New("bench: --drop-caches works on Linux only")

// canDropPageCache and dropPageCache are Linux only.
func canDropPageCache() error { return errDropCaches }
func dropPageCache() error    { return errDropCaches }
