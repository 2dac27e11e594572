package netserver

import "time"

// AdvanceAuthClock moves the clock that s checks token expiry against by d
// (tests: a token that expires while a connection is open, without waiting).
func AdvanceAuthClock(s *TCPServer, d time.Duration) { s.auth.skew.Add(int64(d)) }
