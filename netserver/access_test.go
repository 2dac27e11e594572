package netserver

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/regentmq/regent/protocol"
)

// Every opcode and every HTTP route has a level, from the one table, and an
// operation has the same level on both doors.
func TestEveryOperationHasALevel(t *testing.T) {
	for _, op := range protocol.Ops() {
		if !opListed[op] {
			t.Errorf("opcode %s has no row in accessTable", op)
		}
	}
	h := newHarness(t)
	served := map[string]bool{}
	for _, p := range h.s.patterns {
		served[p] = true
	}
	for r := range routeLevels {
		if !served[r] {
			t.Errorf("accessTable names %q, which the bridge does not serve", r)
		}
	}
	if len(served) != len(routeLevels) {
		t.Errorf("%d routes served, %d in the table", len(served), len(routeLevels))
	}
	// Queen's levels, and the same on both doors.
	for _, c := range []struct {
		op    protocol.Op
		route string
		lv    level
	}{
		{protocol.OpHello, "GET /health", levelPublic},
		{protocol.OpPush, "POST /api/v1/push", levelReadWrite},
		{protocol.OpPop, "GET /api/v1/pop/queue/{queue}", levelReadWrite},
		{protocol.OpAck, "POST /api/v1/ack", levelReadWrite},
		{protocol.OpTransaction, "POST /api/v1/transaction", levelReadWrite},
		{protocol.OpLeaseExtend, "POST /api/v1/lease/{leaseId}/extend", levelReadWrite},
		{protocol.OpConfigure, "POST /api/v1/configure", levelReadWrite},
		{protocol.OpQueueList, "GET /api/v1/resources/queues", levelReadOnly},
		{protocol.OpQueueInfo, "GET /api/v1/resources/queues/{queue}", levelReadOnly},
		{protocol.OpDeleteQueue, "DELETE /api/v1/resources/queues/{queue}", levelAdmin},
		{protocol.OpDeleteGroup, "DELETE /api/v1/consumer-groups/{group}/queues/{queue}", levelAdmin},
		{protocol.OpSeek, "POST /api/v1/consumer-groups/{group}/queues/{queue}/seek", levelReadWrite},
		{protocol.OpDLQList, "GET /api/v1/dlq", levelReadOnly},
		{protocol.OpDLQRedrive, "POST /api/v1/dlq/redrive", levelReadWrite},
		{protocol.OpDLQPurge, "POST /api/v1/dlq/purge", levelAdmin},
		{protocol.OpStats, "GET /api/v1/status", levelReadOnly},
	} {
		if opLevels[c.op] != c.lv || routeLevels[c.route] != c.lv {
			t.Errorf("%s: opcode %s, route %s %s; want %s", c.op, opLevels[c.op], c.route, routeLevels[c.route], c.lv)
		}
	}
	for _, r := range []string{"POST /api/v1/system/maintenance", "POST /api/v1/stats/refresh", "DELETE /api/v1/consumer-groups/{group}"} {
		if routeLevels[r] != levelAdmin {
			t.Errorf("%s: %s, want admin", r, routeLevels[r])
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("a route without a row was registered")
		}
	}()
	h.s.handle("GET /api/v1/new-thing", func(http.ResponseWriter, *http.Request) {})
}

// With auth on, every route but the public ones answers 401 without a
// token: /health, the dashboard's page and files and the 404 catch-all
// always, /metrics and /metrics/prometheus unless MetricsAuth.
func TestNoRouteIsOpenWithAuthOn(t *testing.T) {
	param := regexp.MustCompile(`\{[^}]*\}`)
	for _, metricsAuth := range []bool{false, true} {
		h := newHarness(t, func(c *HTTPConfig, _ *engineConfig) {
			c.Auth = AuthConfig{Enabled: true, Secret: []byte("s"), MetricsAuth: metricsAuth}
		})
		public := map[string]bool{"GET /health": true, "GET /{$}": true, "GET /dashboard/": true, "/": true,
			"GET /metrics": !metricsAuth, "GET /metrics/prometheus": !metricsAuth}
		for _, p := range h.s.patterns {
			method, path, ok := strings.Cut(p, " ")
			if !ok {
				method, path = "GET", "/no-such-route"
			}
			path = strings.ReplaceAll(param.ReplaceAllString(path, "x"), "{$}", "")
			if strings.HasSuffix(path, "/") && path != "/" {
				path += "app.css"
			}
			code, body := h.do(method, path, nil)
			if public[p] != (code != http.StatusUnauthorized) {
				t.Errorf("metricsAuth %v: %s %s without a token: %d %s (public: %v)", metricsAuth, method, path, code, body, public[p])
			}
		}
	}
}
