package httpapi

import (
	"net/http"

	"github.com/regentmq/regent/netserver/httpapi/dashboard"
)

// The web dashboard (package dashboard): the page at GET /, its files under
// GET /dashboard/, and the JSON feeds it reads besides Queen's routes
// (http_dashboard_api.go). The page and its files are public: they hold no
// data, and with auth on the page asks for a token and sends it with every
// request to the JSON routes, which check it as usual. Any other path keeps
// answering 404 (the catch-all of routes), /api/... included.

// dashboardRoutes registers the dashboard's page, files and feeds.
func (s *Server) dashboardRoutes() {
	page := dashboard.Handler().ServeHTTP
	s.handle("GET /{$}", page)
	s.handle("GET "+dashboard.AssetPrefix, page)
	s.handle("GET /api/v1/dashboard/system", s.handleDashSystem)
	s.handle("GET /api/v1/dashboard/queues", s.handleDashQueues)
	s.handle("GET /api/v1/dashboard/queues/{queue}", s.handleDashQueue)
	s.handle("GET /api/v1/dashboard/messages", s.handleDashFind)
}

// serves reports whether the bridge has a route for method and path other
// than the catch-all 404.
func (s *Server) serves(method, path string) bool {
	r, err := http.NewRequest(method, "http://regent"+path, nil)
	if err != nil {
		return false
	}
	_, pattern := s.mux.Handler(r)
	return pattern != "" && pattern != "/"
}

// dashboardFeatures says which optional actions the bridge offers. The
// page enables its dead-letter redrive and purge buttons only when the
// bridge serves these routes (http_dlq_ops.go; it sends {"ids":[entryId]}),
// and otherwise shows them disabled with a tooltip saying why.
func (s *Server) dashboardFeatures() map[string]bool {
	return map[string]bool{
		"dlqRedrive":    s.serves(http.MethodPost, "/api/v1/dlq/redrive"),
		"dlqPurge":      s.serves(http.MethodPost, "/api/v1/dlq/purge"),
		"deleteMessage": false, // DELETE /api/v1/messages/... answers 501 (http_messages.go)
		"auth":          s.auth != nil,
	}
}
