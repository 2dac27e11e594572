package httpapi_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/netserver/httpapi"
	"github.com/regentmq/regent/netserver/httpapi/dashboard"
	"github.com/regentmq/regent/protocol"
)

// Every opcode and every HTTP route has a level, from the one table, and an
// operation has the same level on both doors.
func TestEveryOperationHasALevel(t *testing.T) {
	for _, op := range protocol.Ops() {
		if _, listed := netserver.OpLevel(op); !listed {
			t.Errorf("opcode %s has no row in netserver's access table", op)
		}
	}
	h := newDoorHarness(t)
	served := map[string]bool{}
	for _, p := range httpapi.Patterns(h.s) {
		served[p] = true
	}
	routes := netserver.Routes()
	for _, r := range routes {
		if !served[r] {
			t.Errorf("the access table names %q, which the bridge does not serve", r)
		}
	}
	if len(served) != len(routes) {
		t.Errorf("%d routes served, %d in the table", len(served), len(routes))
	}
	// Queen's levels, and the same on both doors.
	for _, c := range []struct {
		op    protocol.Op
		route string
		lv    netserver.Level
	}{
		{protocol.OpHello, "GET /health", netserver.LevelPublic},
		{protocol.OpPush, "POST /api/v1/push", netserver.LevelReadWrite},
		{protocol.OpPop, "GET /api/v1/pop/queue/{queue}", netserver.LevelReadWrite},
		{protocol.OpAck, "POST /api/v1/ack", netserver.LevelReadWrite},
		{protocol.OpTransaction, "POST /api/v1/transaction", netserver.LevelReadWrite},
		{protocol.OpLeaseExtend, "POST /api/v1/lease/{leaseId}/extend", netserver.LevelReadWrite},
		{protocol.OpConfigure, "POST /api/v1/configure", netserver.LevelReadWrite},
		{protocol.OpQueueList, "GET /api/v1/resources/queues", netserver.LevelReadOnly},
		{protocol.OpQueueInfo, "GET /api/v1/resources/queues/{queue}", netserver.LevelReadOnly},
		{protocol.OpDeleteQueue, "DELETE /api/v1/resources/queues/{queue}", netserver.LevelAdmin},
		{protocol.OpDeleteGroup, "DELETE /api/v1/consumer-groups/{group}/queues/{queue}", netserver.LevelAdmin},
		{protocol.OpSeek, "POST /api/v1/consumer-groups/{group}/queues/{queue}/seek", netserver.LevelReadWrite},
		{protocol.OpDLQList, "GET /api/v1/dlq", netserver.LevelReadOnly},
		{protocol.OpDLQRedrive, "POST /api/v1/dlq/redrive", netserver.LevelReadWrite},
		{protocol.OpDLQPurge, "POST /api/v1/dlq/purge", netserver.LevelAdmin},
		{protocol.OpBrowse, "GET /api/v1/messages", netserver.LevelReadOnly},
		{protocol.OpStats, "GET /api/v1/status", netserver.LevelReadOnly},
	} {
		opLv, _ := netserver.OpLevel(c.op)
		routeLv, _ := netserver.RouteLevel(c.route)
		if opLv != c.lv || routeLv != c.lv {
			t.Errorf("%s: opcode %s, route %s %s; want %s", c.op, opLv, c.route, routeLv, c.lv)
		}
	}
	for _, r := range []string{"POST /api/v1/system/maintenance", "POST /api/v1/stats/refresh", "DELETE /api/v1/consumer-groups/{group}"} {
		if lv, _ := netserver.RouteLevel(r); lv != netserver.LevelAdmin {
			t.Errorf("%s: %s, want admin", r, lv)
		}
	}
	if netserver.DashboardPrefix != dashboard.AssetPrefix {
		t.Errorf("the access table opens %q, the dashboard serves %q", netserver.DashboardPrefix, dashboard.AssetPrefix)
	}
	defer func() {
		if recover() == nil {
			t.Error("a route without a row was registered")
		}
	}()
	httpapi.Handle(h.s, "GET /api/v1/new-thing", func(http.ResponseWriter, *http.Request) {})
}

// With auth on, every route but the public ones answers 401 without a
// token: /health, the dashboard's page and files and the 404 catch-all
// always, /metrics and /metrics/prometheus unless MetricsAuth.
func TestNoRouteIsOpenWithAuthOn(t *testing.T) {
	param := regexp.MustCompile(`\{[^}]*\}`)
	for _, metricsAuth := range []bool{false, true} {
		h := newDoorHarness(t, func(c *httpapi.Config, _ *engineConfig) {
			c.Auth = netserver.AuthConfig{Enabled: true, Secret: []byte("s"), MetricsAuth: metricsAuth}
		})
		public := map[string]bool{"GET /health": true, "GET /{$}": true, "GET /dashboard/": true, "/": true,
			"GET /metrics": !metricsAuth, "GET /metrics/prometheus": !metricsAuth}
		for _, p := range httpapi.Patterns(h.s) {
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
