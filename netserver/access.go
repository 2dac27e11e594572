package netserver

import "github.com/regentmq/regent/protocol"

// DashboardPrefix is where the HTTP door serves the dashboard's files
// (httpapi/dashboard.AssetPrefix, which a test keeps equal): public, like
// the page itself.
const DashboardPrefix = "/dashboard/"

// Level is the role an operation needs when auth is on: read-only <
// read-write < admin, Queen's levels.
type Level uint8

const (
	LevelPublic Level = iota
	LevelReadOnly
	LevelReadWrite
	LevelAdmin
	// LevelMetrics is public, or read-only with AuthConfig.MetricsAuth
	// (Queen serves /metrics without a token).
	LevelMetrics
)

func (lv Level) String() string {
	switch lv {
	case LevelPublic:
		return "public"
	case LevelReadOnly:
		return "read-only"
	case LevelReadWrite:
		return "read-write"
	case LevelAdmin:
		return "admin"
	case LevelMetrics:
		return "metrics"
	}
	return "level(?)"
}

// Role is the protocol's name of a level.
func (lv Level) Role() protocol.Role {
	switch lv {
	case LevelReadOnly:
		return protocol.RoleReadOnly
	case LevelReadWrite:
		return protocol.RoleReadWrite
	case LevelAdmin:
		return protocol.RoleAdmin
	}
	return protocol.RoleNone
}

// access is one row of the access table: a level, and the operations of
// both doors that need it. A row holds the opcode and the HTTP routes that
// do the same thing, so the two doors cannot drift apart.
type access struct {
	lv     Level
	ops    []protocol.Op
	routes []string // net/http patterns, as registered
}

// accessTable is THE table of levels, for the binary protocol and the HTTP
// bridge alike (Queen's levels: reads read-only; push, pop, ack, leases,
// transactions and configure read-write; deletes, purges and maintenance
// admin). Every opcode and every route must be in it: httpapi's Server.handle
// refuses a pattern that is not (a panic when the server is built), and
// TestEveryOperationHasALevel checks the opcodes and the table's rows.
var accessTable = []access{
	// Before a token: the handshake, liveness, the token itself, health,
	// the dashboard's page and files (they hold no data: the page asks for
	// a token), and the 404 catch-all.
	{LevelPublic, []protocol.Op{protocol.OpHello, protocol.OpPing, protocol.OpAuth},
		[]string{"GET /health", "GET /{$}", "GET " + DashboardPrefix, "/"}},
	{LevelMetrics, nil, []string{"GET /metrics", "GET /metrics/prometheus"}},

	// Data plane.
	{LevelReadWrite, []protocol.Op{protocol.OpPush}, []string{"POST /api/v1/push"}},
	{LevelReadWrite, []protocol.Op{protocol.OpPop}, []string{"GET /api/v1/pop/queue/{queue}", "GET /api/v1/pop",
		"GET /api/v1/pop/queue/{queue}/partition/{partition...}"}},
	{LevelReadWrite, []protocol.Op{protocol.OpAck}, []string{"POST /api/v1/ack", "POST /api/v1/ack/batch"}},
	{LevelReadWrite, []protocol.Op{protocol.OpTransaction}, []string{"POST /api/v1/transaction"}},
	{LevelReadWrite, []protocol.Op{protocol.OpLeaseExtend}, []string{"POST /api/v1/lease/{leaseId}/extend"}},

	// Streams (Queen 0.15): a query's registration and cycles write, its state is read.
	{LevelReadWrite, []protocol.Op{protocol.OpQueryRegister}, []string{"POST /streams/v1/queries"}},
	{LevelReadWrite, []protocol.Op{protocol.OpCycle}, []string{"POST /streams/v1/cycle"}},
	{LevelReadOnly, []protocol.Op{protocol.OpStateGet}, []string{"POST /streams/v1/state/get"}},

	// Queues.
	{LevelReadWrite, []protocol.Op{protocol.OpConfigure}, []string{"POST /api/v1/configure"}},
	{LevelAdmin, []protocol.Op{protocol.OpDeleteQueue}, []string{"DELETE /api/v1/resources/queues/{queue}"}},
	{LevelReadOnly, []protocol.Op{protocol.OpQueueList}, []string{"GET /api/v1/resources/queues"}},
	{LevelReadOnly, []protocol.Op{protocol.OpQueueInfo}, []string{"GET /api/v1/resources/queues/{queue}"}},
	{LevelReadOnly, nil, []string{"GET /api/v1/resources/overview", "GET /api/v1/resources/namespaces",
		"GET /api/v1/resources/tasks"}},

	// Messages and the dead-letter queue.
	{LevelReadOnly, []protocol.Op{protocol.OpBrowse}, []string{"GET /api/v1/messages", "GET /api/v1/messages/{partitionId}/{transactionId}"}},
	{LevelReadWrite, nil, []string{"DELETE /api/v1/messages/{partitionId}/{transactionId}"}},
	{LevelReadOnly, []protocol.Op{protocol.OpDLQList}, []string{"GET /api/v1/dlq"}},
	{LevelReadWrite, []protocol.Op{protocol.OpDLQRedrive}, []string{"POST /api/v1/dlq/redrive"}},
	{LevelAdmin, []protocol.Op{protocol.OpDLQPurge}, []string{"POST /api/v1/dlq/purge"}},

	// Consumer groups.
	{LevelReadOnly, nil, []string{"GET /api/v1/consumer-groups", "GET /api/v1/consumer-groups/lagging",
		"GET /api/v1/consumer-groups/{group}"}},
	{LevelAdmin, []protocol.Op{protocol.OpDeleteGroup}, []string{"DELETE /api/v1/consumer-groups/{group}",
		"DELETE /api/v1/consumer-groups/{group}/queues/{queue}"}},
	{LevelReadWrite, nil, []string{"POST /api/v1/consumer-groups/{group}/subscription"}},
	{LevelReadWrite, []protocol.Op{protocol.OpSeek}, []string{"POST /api/v1/consumer-groups/{group}/queues/{queue}/seek",
		"POST /api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek"}},
	{LevelAdmin, nil, []string{"POST /api/v1/stats/refresh"}},

	// Status, the dashboard's feeds, and the broker's figures.
	{LevelReadOnly, []protocol.Op{protocol.OpStats}, []string{"GET /api/v1/status", "GET /api/v1/status/queues",
		"GET /api/v1/status/queues/{queue}", "GET /api/v1/status/queues/{queue}/messages",
		"GET /api/v1/status/analytics", "GET /api/v1/status/buffers",
		"GET /api/v1/dashboard/system", "GET /api/v1/dashboard/queues", "GET /api/v1/dashboard/queues/{queue}",
		"GET /api/v1/dashboard/messages"}},
	// Queen's analytics (read-only, as Queen has them).
	{LevelReadOnly, nil, []string{"GET /api/v1/analytics/system-metrics", "GET /api/v1/analytics/worker-metrics",
		"GET /api/v1/analytics/postgres-stats", "GET /api/v1/analytics/queue-lag", "GET /api/v1/analytics/queue-ops",
		"GET /api/v1/analytics/queue-parked-replicas", "GET /api/v1/analytics/retention"}},

	// A cluster's shard map (1.6): what a client needs to route its requests.
	{LevelReadOnly, []protocol.Op{protocol.OpMetadata}, []string{"GET /api/v1/cluster"}},
	// The link between the replicas of a shard (1.7): brokers only.
	{LevelAdmin, []protocol.Op{protocol.OpRaft}, nil},

	// Traces.
	{LevelReadWrite, nil, []string{"POST /api/v1/traces"}},
	{LevelReadOnly, nil, []string{"GET /api/v1/traces/names", "GET /api/v1/traces/by-name/{traceName}",
		"GET /api/v1/traces/{partitionId}/{transactionId}"}},

	// Maintenance.
	{LevelAdmin, nil, []string{"GET /api/v1/system/maintenance", "POST /api/v1/system/maintenance",
		"GET /api/v1/system/maintenance/pop", "POST /api/v1/system/maintenance/pop"}},
}

// opLevels and routeLevels index accessTable.
var (
	opLevels    [256]Level
	opListed    [256]bool
	routeLevels = map[string]Level{}
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

// OpLevel is the level of an opcode, and whether the table lists it (the
// binary door treats a known opcode without a row as admin-only).
func OpLevel(op protocol.Op) (lv Level, listed bool) { return opLevels[op], opListed[op] }

// RouteLevel is the level of a net/http pattern, and whether the table has
// it (the HTTP door refuses to register a pattern that it has not).
func RouteLevel(pattern string) (lv Level, ok bool) {
	lv, ok = routeLevels[pattern]
	return lv, ok
}

// Routes are the net/http patterns the table lists, in its order.
func Routes() []string {
	var rs []string
	for _, a := range accessTable {
		rs = append(rs, a.routes...)
	}
	return rs
}
