package tcp

import "time"

// AdvanceAuthClock moves the clock that s checks token expiry against by d
// (tests: a token that expires while a connection is open, without waiting).
func AdvanceAuthClock(s *Server, d time.Duration) { s.auth.AdvanceClock(d) }
