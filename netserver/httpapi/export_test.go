package httpapi

import (
	"net/http"

	"github.com/regentmq/regent/engine"
)

// What the external tests (package httpapi_test) read or do inside a
// Server; they build it with newDoorHarness, since a broker does not lend
// its doors.

// Patterns are the routes s serves, as registered.
func Patterns(s *Server) []string { return s.patterns }

// Handle registers a route on s as the server's own routes are.
func Handle(s *Server, pattern string, h http.HandlerFunc) { s.handle(pattern, h) }

// BodyBytesHeld is how many request body bytes s holds at once.
func BodyBytesHeld(s *Server) int64 { return s.held.Load() }

// ParkedPolls is how many long polls s holds parked.
func ParkedPolls(s *Server) int64 { return s.met.parked.Load() }

// GiveBack gives msgs back as s does for a poll whose client is gone.
func GiveBack(s *Server, msgs []engine.Message) { s.giveBack(msgs) }

// The answers' types and limits that the tests decode and check.
type (
	QueueSummary    = queueSummary
	PartitionDetail = partitionDetail
	MsgCounts       = msgCounts
)

const DLQPageBytes = dlqPageBytes

// HistQuantile is histQuantile, the dashboard's quantile of a histogram.
func HistQuantile(bounds []float64, counts []uint64, q float64) float64 {
	return histQuantile(bounds, counts, q)
}
