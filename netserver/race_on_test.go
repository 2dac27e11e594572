//go:build race

package netserver_test

// raceEnabled: the race detector slows compressing and copying 16 MiB
// payloads a hundredfold; the tests that move them skip under it.
const raceEnabled = true
