package httpapi

import "time"

// What the analytics tests (http_analytics_test.go) set inside a Server.

// SetAnalyticsClock makes the analytics history of s read the time from
// now (its sampler and its routes alike).
func SetAnalyticsClock(s *Server, now func() time.Time) {
	h := s.met.hist
	h.mu.Lock()
	h.now = now
	h.mu.Unlock()
}

// SampleAnalytics takes a sample of the analytics history of s, by its
// clock.
func SampleAnalytics(s *Server) { s.met.hist.sample() }
