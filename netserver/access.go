package netserver

import (
	"github.com/regentmq/regent/netserver/dashboard"
	"github.com/regentmq/regent/protocol"
)

// level is the role an operation needs when auth is on: read-only <
// read-write < admin, Queen's levels.
type level uint8

const (
	levelPublic level = iota
	levelReadOnly
	levelReadWrite
	levelAdmin
	// levelMetrics is public, or read-only with AuthConfig.MetricsAuth
	// (Queen serves /metrics without a token).
	levelMetrics
)

func (lv level) String() string {
	switch lv {
	case levelPublic:
		return "public"
	case levelReadOnly:
		return "read-only"
	case levelReadWrite:
		return "read-write"
	case levelAdmin:
		return "admin"
	case levelMetrics:
		return "metrics"
	}
	return "level(?)"
}

// role is the protocol's name of a level.
func (lv level) role() protocol.Role {
	switch lv {
	case levelReadOnly:
		return protocol.RoleReadOnly
	case levelReadWrite:
		return protocol.RoleReadWrite
	case levelAdmin:
		return protocol.RoleAdmin
	}
	return protocol.RoleNone
}

// access is one row of the access table: a level, and the operations of
// both doors that need it. A row holds the opcode and the HTTP routes that
// do the same thing, so the two doors cannot drift apart.
type access struct {
	lv     level
	ops    []protocol.Op
	routes []string // net/http patterns, as registered
}

// accessTable is THE table of levels, for the binary protocol and the HTTP
// bridge alike (Queen's levels: reads read-only; push, pop, ack, leases,
// transactions and configure read-write; deletes, purges and maintenance
// admin). Every opcode and every route must be in it: HTTPServer.handle
// refuses a pattern that is not (a panic when the server is built), and
// TestEveryOperationHasALevel checks the opcodes and the table's rows.
var accessTable = []access{
	// Before a token: the handshake, liveness, the token itself, health,
	// the dashboard's page and files (they hold no data: the page asks for
	// a token), and the 404 catch-all.
	{levelPublic, []protocol.Op{protocol.OpHello, protocol.OpPing, protocol.OpAuth},
		[]string{"GET /health", "GET /{$}", "GET " + dashboard.AssetPrefix, "/"}},
	{levelMetrics, nil, []string{"GET /metrics", "GET /metrics/prometheus"}},

	// Data plane.
	{levelReadWrite, []protocol.Op{protocol.OpPush}, []string{"POST /api/v1/push"}},
	{levelReadWrite, []protocol.Op{protocol.OpPop}, []string{"GET /api/v1/pop/queue/{queue}", "GET /api/v1/pop",
		"GET /api/v1/pop/queue/{queue}/partition/{partition...}"}},
	{levelReadWrite, []protocol.Op{protocol.OpAck}, []string{"POST /api/v1/ack", "POST /api/v1/ack/batch"}},
	{levelReadWrite, []protocol.Op{protocol.OpTransaction}, []string{"POST /api/v1/transaction"}},
	{levelReadWrite, []protocol.Op{protocol.OpLeaseExtend}, []string{"POST /api/v1/lease/{leaseId}/extend"}},

	// Queues.
	{levelReadWrite, []protocol.Op{protocol.OpConfigure}, []string{"POST /api/v1/configure"}},
	{levelAdmin, []protocol.Op{protocol.OpDeleteQueue}, []string{"DELETE /api/v1/resources/queues/{queue}"}},
	{levelReadOnly, []protocol.Op{protocol.OpQueueList}, []string{"GET /api/v1/resources/queues"}},
	{levelReadOnly, []protocol.Op{protocol.OpQueueInfo}, []string{"GET /api/v1/resources/queues/{queue}"}},
	{levelReadOnly, nil, []string{"GET /api/v1/resources/overview", "GET /api/v1/resources/namespaces",
		"GET /api/v1/resources/tasks"}},

	// Messages and the dead-letter queue.
	{levelReadOnly, nil, []string{"GET /api/v1/messages", "GET /api/v1/messages/{partitionId}/{transactionId}"}},
	{levelReadWrite, nil, []string{"DELETE /api/v1/messages/{partitionId}/{transactionId}"}},
	{levelReadOnly, []protocol.Op{protocol.OpDLQList}, []string{"GET /api/v1/dlq"}},
	{levelReadWrite, []protocol.Op{protocol.OpDLQRedrive}, []string{"POST /api/v1/dlq/redrive"}},
	{levelAdmin, []protocol.Op{protocol.OpDLQPurge}, []string{"POST /api/v1/dlq/purge"}},

	// Consumer groups.
	{levelReadOnly, nil, []string{"GET /api/v1/consumer-groups", "GET /api/v1/consumer-groups/lagging",
		"GET /api/v1/consumer-groups/{group}"}},
	{levelAdmin, []protocol.Op{protocol.OpDeleteGroup}, []string{"DELETE /api/v1/consumer-groups/{group}",
		"DELETE /api/v1/consumer-groups/{group}/queues/{queue}"}},
	{levelReadWrite, nil, []string{"POST /api/v1/consumer-groups/{group}/subscription"}},
	{levelReadWrite, []protocol.Op{protocol.OpSeek}, []string{"POST /api/v1/consumer-groups/{group}/queues/{queue}/seek",
		"POST /api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek"}},
	{levelAdmin, nil, []string{"POST /api/v1/stats/refresh"}},

	// Status, the dashboard's feeds, and the broker's figures.
	{levelReadOnly, []protocol.Op{protocol.OpStats}, []string{"GET /api/v1/status", "GET /api/v1/status/queues",
		"GET /api/v1/status/queues/{queue}", "GET /api/v1/status/queues/{queue}/messages",
		"GET /api/v1/status/analytics", "GET /api/v1/status/buffers",
		"GET /api/v1/dashboard/system", "GET /api/v1/dashboard/queues", "GET /api/v1/dashboard/queues/{queue}"}},

	// Traces.
	{levelReadWrite, nil, []string{"POST /api/v1/traces"}},
	{levelReadOnly, nil, []string{"GET /api/v1/traces/names", "GET /api/v1/traces/by-name/{traceName}",
		"GET /api/v1/traces/{partitionId}/{transactionId}"}},

	// Maintenance.
	{levelAdmin, nil, []string{"GET /api/v1/system/maintenance", "POST /api/v1/system/maintenance",
		"GET /api/v1/system/maintenance/pop", "POST /api/v1/system/maintenance/pop"}},
}

// opLevels and routeLevels index accessTable.
var (
	opLevels    [256]level
	opListed    [256]bool
	routeLevels = map[string]level{}
)

func init() {
	for _, a := range accessTable {
		for _, op := range a.ops {
			if opListed[op] {
				panic("netserver: opcode " + op.String() + " twice in the access table")
			}
			opListed[op], opLevels[op] = true, a.lv
		}
		for _, r := range a.routes {
			if _, dup := routeLevels[r]; dup {
				panic("netserver: route " + r + " twice in the access table")
			}
			routeLevels[r] = a.lv
		}
	}
}

// routeLevel is the level of a registered pattern; it panics for a pattern
// that is not in the table (a route added without a level).
func routeLevel(pattern string) level {
	lv, ok := routeLevels[pattern]
	if !ok {
		panic("netserver: route " + pattern + " has no row in accessTable")
	}
	return lv
}
