//go:build race

package testhooks

// Race reports whether the binary was built with the race detector. Under
// it, tests that move 16 MiB payloads or bound memory skip or allow more
// time: it slows compressing and copying large payloads a hundredfold, and
// sync.Pool drops pooled buffers at random, so heap bounds mean nothing.
const Race = true
