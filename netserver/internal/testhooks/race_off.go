//go:build !race

package testhooks

// Race reports whether the binary was built with the race detector (see
// race_on.go).
const Race = false
