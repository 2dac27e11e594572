// Package benchtest helps tests drive the load-test harness against real
// servers: Tag wraps a bench.Target so that every message pushed through it
// carries a serial number, and every delivery is tallied by it, so that a
// test can check that each message pushed was delivered, and how often.
package benchtest
