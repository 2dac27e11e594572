// Package brokertest starts a whole Regent (broker.New and Main) for a
// test, and offers the one polling helper tests use to wait for a state.
//
// Start gives the broker a temp data directory and free ports of
// 127.0.0.1 unless the options name them, and stops it (broker.Exit) when
// the test ends. Tests wait for a state with CheckFor, never with
// time.Sleep.
package brokertest
