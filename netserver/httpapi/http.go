package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/protocol"
	"golang.org/x/sync/semaphore"
)

// Config configures the HTTP bridge. Zero values take the documented
// defaults.
type Config struct {
	// Addr is the address ListenAndServe listens on; default ":6632"
	// (Queen's port).
	Addr string
	// MaxBodyBytesInFlight bounds the request bodies held at once, across
	// all connections: a request whose body does not fit waits up to
	// BodyWait for room, then is answered 503 with Retry-After. Default
	// 256 MiB; at least MaxBodyBytes.
	MaxBodyBytesInFlight int64
	// Bodies, when set, is the budget MaxBodyBytesInFlight counts against
	// (its size must be MaxBodyBytesInFlight), shared with the broker's
	// TCP door, whose large frames count against it from their arrival
	// until they are answered (netserver/tcp's Config.FrameBudget). Nil:
	// the bridge's own.
	Bodies *semaphore.Weighted
	// BodyWait is how long a body waits for room; default 1 s.
	BodyWait time.Duration
	// MaxBodyBytes caps a request body; a larger one is refused with 413
	// before it is read. Default 64 MiB.
	MaxBodyBytes int64
	// ReadHeaderTimeout bounds the reading of a request's headers; default
	// 10 s. There is no overall read or write timeout: long polls last as
	// long as their timeout parameter.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes keep-alive connections idle that long; default 120 s.
	IdleTimeout time.Duration
	// ReadBodyTimeout bounds the reading of a request's body (a client that
	// trickles its body is cut off); default 60 s.
	ReadBodyTimeout time.Duration
	// WriteTimeout bounds the writing of one response, counted from its
	// first byte, so a client that does not read its answers is
	// disconnected (long polls are not limited: they write when they end).
	// Default 60 s.
	WriteTimeout time.Duration
	// MaxConns caps open connections; more are answered 503 and closed
	// (file descriptors are finite). Default 10000.
	MaxConns int
	// MaxHeaderBytes caps request headers; default 1 MiB.
	MaxHeaderBytes int
	// Auth turns on JWT authentication (off by default).
	Auth netserver.AuthConfig
	// JournalStats, when set, feeds the journal figures of /metrics (the
	// broker wires it to the journal; httpapi does not import log).
	JournalStats func() netserver.JournalStats
	// TCPConnections, when set, reports the binary protocol's open
	// connections for /metrics.
	TCPConnections func() int
	// TCPFrames, when set, reports the bytes the binary protocol's large
	// frames hold of the budget they share with HTTP bodies (Bodies), and
	// the frames refused for want of room, for /metrics.
	TCPFrames func() (held int64, refused uint64)
	// TCPHealth, when set, reports why the binary protocol's door does not
	// serve (nil while it does); /health reports it.
	TCPHealth func() error
	// Cluster, when set, is the cluster this broker is part of: GET
	// /api/v1/cluster answers its shard map, /health names it, and
	// configure and delete-queue apply to every broker. Without it the
	// broker runs alone.
	Cluster netserver.Cluster
	// DataPlane, when set, serves the data-plane routes (push, pop, ack,
	// transaction, lease extend) instead of the engine: a cluster's broker
	// gives one that forwards what another broker owns to it, so that any
	// broker's bridge serves the whole cluster. nil: the engine
	// (netserver.EnginePlane).
	DataPlane netserver.DataPlane
	// UncheckedAcks is engine.Config.UncheckedAcks for a bridge without
	// one engine (a replicated broker's engines share it): with it, a
	// transaction's requiredLeases is ignored, as with one engine.
	UncheckedAcks bool
	// DLQ, when set, lists the dead letters GET /api/v1/dlq answers with:
	// a cluster's broker lists every broker's (Queen's clients ask any
	// one), where the engine alone holds only its own. A broker with no
	// one engine serves the route only with it.
	DLQ func(ctx context.Context, f engine.DLQFilter) ([]engine.DLQEntry, int, error)
	// Version is reported by /health; default "dev".
	Version string
	// Logger receives the bridge's logs; nil means slog.Default().
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultHTTPAddr              = ":6632"
	DefaultMaxBodyBytes          = 64 << 20
	DefaultMaxBodyBytesInFlight  = 256 << 20
	DefaultHTTPReadHeaderTimeout = 10 * time.Second
	DefaultHTTPIdleTimeout       = 120 * time.Second
	DefaultMaxHeaderBytes        = 1 << 20
	DefaultHTTPReadBodyTimeout   = 60 * time.Second
	DefaultHTTPWriteTimeout      = 60 * time.Second
	DefaultHTTPMaxConns          = 10000
)

func (c *Config) setDefaults() error {
	if c.Addr == "" {
		c.Addr = DefaultHTTPAddr
	}
	if c.MaxBodyBytes < 0 || c.ReadHeaderTimeout < 0 || c.IdleTimeout < 0 || c.MaxHeaderBytes < 0 ||
		c.ReadBodyTimeout < 0 || c.WriteTimeout < 0 || c.MaxConns < 0 {
		return fmt.Errorf("%w: negative limit in Config", engine.ErrInvalid)
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxBodyBytesInFlight == 0 {
		c.MaxBodyBytesInFlight = max(DefaultMaxBodyBytesInFlight, c.MaxBodyBytes)
	}
	if c.MaxBodyBytesInFlight < c.MaxBodyBytes {
		return fmt.Errorf("netserver: MaxBodyBytesInFlight %d is below MaxBodyBytes %d", c.MaxBodyBytesInFlight, c.MaxBodyBytes)
	}
	if c.BodyWait <= 0 {
		c.BodyWait = time.Second
	}
	if c.ReadHeaderTimeout == 0 {
		c.ReadHeaderTimeout = DefaultHTTPReadHeaderTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultHTTPIdleTimeout
	}
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if c.ReadBodyTimeout == 0 {
		c.ReadBodyTimeout = DefaultHTTPReadBodyTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultHTTPWriteTimeout
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultHTTPMaxConns
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Server serves Queen MQ's HTTP API v1 over an engine. Every route calls
// the same engine operations as the binary protocol and maps engine errors
// through netserver's one table (netserver.HTTPStatus). It is safe for
// concurrent use.
type Server struct {
	cfg      Config
	e        *engine.Engine
	dp       netserver.DataPlane // Config.DataPlane, or the engine's
	log      *slog.Logger
	mux      *http.ServeMux
	handler  http.Handler
	srv      *http.Server
	auth     *netserver.Authenticator // nil when auth is off
	patterns []string                 // every route registered, for the tests
	met      *httpMetrics
	started  time.Time
	bodies   *semaphore.Weighted // MaxBodyBytesInFlight
	held     atomic.Int64        // bytes of bodies counted against it now
	big      bigBufs             // large body buffers, reused while bodies flow
	fails    failLog             // the failed requests' log lines (writeErr)

	maintenance    atomic.Bool // push maintenance mode (see handleMaintenance)
	popMaintenance atomic.Bool // pops answer 204 while set
	conns          atomic.Int64
	open           atomic.Int64 // connections admitted by the MaxConns listener
	refusing       atomic.Int32 // refusals being written
}

// New returns an HTTP bridge over e. A broker of a replicated cluster has
// no one engine (e nil, with a Config.DataPlane): it serves the data plane,
// health, the cluster's map and the queues' configuration, and answers the
// other routes 503 (routesWithoutEngine).
func New(cfg Config, e *engine.Engine) (*Server, error) {
	if e == nil && cfg.DataPlane == nil {
		return nil, fmt.Errorf("%w: no engine and no data plane", engine.ErrInvalid)
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, e: e, dp: cfg.DataPlane, log: cfg.Logger, mux: http.NewServeMux(), started: time.Now(),
		bodies: cfg.Bodies}
	if s.bodies == nil {
		s.bodies = semaphore.NewWeighted(cfg.MaxBodyBytesInFlight)
	}
	if s.dp == nil {
		s.dp = netserver.EnginePlane{E: e}
	}
	if cfg.Auth.Enabled {
		a, err := netserver.NewAuthenticator(cfg.Auth)
		if err != nil {
			return nil, err
		}
		s.auth = a
	}
	s.met = newHTTPMetrics(s)
	s.routes()
	s.handler = http.HandlerFunc(s.serveHTTP)
	s.srv = &http.Server{
		Addr:              cfg.Addr,
		Handler:           s.handler,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
		ConnState:         s.connState,
	}
	return s, nil
}

// Handler returns the bridge's handler (CORS, auth and every route), for
// use in another server or in tests.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve accepts connections on l until Shutdown; it returns
// http.ErrServerClosed after a Shutdown. Past MaxConns open connections a
// new one is answered 503 and closed.
func (s *Server) Serve(l net.Listener) error {
	stop := s.met.startSampler()
	defer stop()
	return s.srv.Serve(&limitListener{Listener: l, s: s})
}

// limitListener admits at most MaxConns connections at once.
type limitListener struct {
	net.Listener
	s *Server
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.s.open.Add(1) <= int64(l.s.cfg.MaxConns) {
			return &countedConn{Conn: c, open: &l.s.open}, nil
		}
		l.s.open.Add(-1)
		l.s.refuse(c)
	}
}

// countedConn gives its place back when closed.
type countedConn struct {
	net.Conn
	open   *atomic.Int64
	closed atomic.Bool
}

func (c *countedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.open.Add(-1)
	}
	return c.Conn.Close()
}

// CloseWrite lets net/http half-close before closing (so that a client
// still sending does not get a reset instead of the answer).
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// refuse answers a connection past MaxConns with 503 and closes it. The
// answer is written in the background (reading what the client sent first,
// so that the close does not reset it), at most 64 at a time; past that the
// connection is just closed.
func (s *Server) refuse(c net.Conn) {
	if s.refusing.Add(1) > 64 {
		s.refusing.Add(-1)
		c.Close()
		return
	}
	go func() {
		defer s.refusing.Add(-1)
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		var buf [4096]byte
		c.Read(buf[:])
		msg := append(appendString([]byte(`{"error":`), fmt.Sprintf("too many connections (limit %d)", s.cfg.MaxConns)), '}')
		fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nRetry-After: 1\r\nContent-Length: %d\r\n\r\n%s", len(msg), msg)
	}()
}

// ListenAndServe listens on cfg.Addr and serves.
func (s *Server) ListenAndServe() error {
	l, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return err
	}
	return s.Serve(l)
}

// Shutdown stops accepting connections, closes idle ones, and waits until
// the requests in progress are answered or ctx ends. Parked long polls are
// answered by the engine's Close, or end with their connections when ctx
// runs out (they are cancelled: their messages stay with the broker).
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		s.srv.Close()
	}
	return err
}

func (s *Server) connState(_ net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		s.conns.Add(1)
	case http.StateClosed, http.StateHijacked:
		s.conns.Add(-1)
	}
}

// Shared header values (net/http never modifies them).
var (
	hdrJSON       = []string{"application/json"}
	hdrText       = []string{"text/plain; version=0.0.4; charset=utf-8"}
	hdrAllowAll   = []string{"*"}
	hdrAllowMeth  = []string{"GET, POST, PUT, DELETE, OPTIONS"}
	hdrAllowHdrs  = []string{"Content-Type, Authorization"}
	hdrCORSMaxAge = []string{"86400"}
	hdrClose      = []string{"close"}
)

// serveHTTP adds Queen's CORS headers to every answer and answers OPTIONS
// preflights with 204, then routes.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.met.requests.Add(1)
	// Bound the writing of the answer from its first byte (a client that
	// does not read is cut off); the deadline of the connection's previous
	// answer is lifted first, so a long poll can wait as long as it must.
	dw := &deadlineWriter{ResponseWriter: w, d: s.cfg.WriteTimeout}
	dw.rc = http.NewResponseController(w)
	dw.rc.SetWriteDeadline(time.Time{})
	w = dw
	h := w.Header()
	h["Access-Control-Allow-Origin"] = hdrAllowAll
	h["Access-Control-Allow-Methods"] = hdrAllowMeth
	h["Access-Control-Allow-Headers"] = hdrAllowHdrs
	h["Access-Control-Max-Age"] = hdrCORSMaxAge
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// deadlineWriter sets the connection's write deadline when the answer
// starts.
type deadlineWriter struct {
	http.ResponseWriter
	rc    *http.ResponseController
	d     time.Duration
	armed bool
}

func (w *deadlineWriter) arm() {
	if !w.armed {
		w.armed = true
		w.rc.SetWriteDeadline(time.Now().Add(w.d)) // ErrNotSupported in tests' recorders: fine
	}
}

func (w *deadlineWriter) WriteHeader(code int) {
	w.arm()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.arm()
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// handle registers a route; its level comes from netserver's access table
// (netserver.RouteLevel).
func (s *Server) handle(pattern string, h http.HandlerFunc) {
	lv, ok := netserver.RouteLevel(pattern)
	if !ok {
		panic("httpapi: route " + pattern + " has no row in netserver's access table")
	}
	s.patterns = append(s.patterns, pattern)
	if s.e == nil && !routesWithoutEngine[pattern] {
		h = notServedWithoutEngine
	}
	if lv == netserver.LevelMetrics {
		lv = netserver.LevelPublic
		if s.cfg.Auth.MetricsAuth {
			lv = netserver.LevelReadOnly
		}
	}
	if s.auth == nil || lv == netserver.LevelPublic {
		s.mux.HandleFunc(pattern, h)
		return
	}
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		r, ok := checkAuth(s.auth, w, r, lv)
		if ok {
			h(w, r)
		}
	})
}

// routesWithoutEngine are the routes a bridge without one engine (a
// broker of a replicated cluster) serves: the data plane goes through
// Config.DataPlane, a queue's configuration through Config.Cluster (etcd,
// which every broker applies to the engines of the shards it leads).
// The others read one engine's state; they answer 503, as the binary
// door's operator requests do on such a broker.
var routesWithoutEngine = map[string]bool{
	"GET /health":                   true,
	"GET /api/v1/cluster":           true,
	"POST /api/v1/push":             true,
	"GET /api/v1/pop/queue/{queue}": true,
	"GET /api/v1/pop":               true,
	"GET /api/v1/pop/queue/{queue}/partition/{partition...}": true,
	"POST /api/v1/ack":                        true,
	"POST /api/v1/ack/batch":                  true,
	"POST /api/v1/transaction":                true,
	"POST /api/v1/lease/{leaseId}/extend":     true,
	"POST /api/v1/configure":                  true,
	"GET /api/v1/dlq":                         true, // with Config.DLQ (handleDLQ)
	"DELETE /api/v1/resources/queues/{queue}": true,
	"GET /api/v1/system/maintenance":          true,
	"POST /api/v1/system/maintenance":         true,
	"GET /api/v1/system/maintenance/pop":      true,
	"POST /api/v1/system/maintenance/pop":     true,
	"/":                                       true,
}

func notServedWithoutEngine(w http.ResponseWriter, _ *http.Request) {
	writeError(w, http.StatusServiceUnavailable, "this route is not served by a broker of a replicated cluster yet")
}

// routes registers every route of Queen's HTTP API v1 that Regent serves.
func (s *Server) routes() {
	// Health and metrics.
	s.handle("GET /health", s.handleHealth)
	s.handle("GET /metrics", s.handleMetricsJSON)
	s.handle("GET /metrics/prometheus", s.handlePrometheus)
	s.handle("GET /api/v1/cluster", s.handleCluster)
	// Data plane.
	s.handle("POST /api/v1/push", s.handlePush)
	s.handle("GET /api/v1/pop/queue/{queue}", s.handlePop)
	s.handle("GET /api/v1/pop", s.handlePop) // by namespace and task: Queen documents it, Regent serves it
	s.handle("GET /api/v1/pop/queue/{queue}/partition/{partition...}", s.handlePop)
	s.handle("POST /api/v1/ack", s.handleAck)
	s.handle("POST /api/v1/ack/batch", s.handleAckBatch)
	s.handle("POST /api/v1/transaction", s.handleTransaction)
	s.handle("POST /api/v1/lease/{leaseId}/extend", s.handleLeaseExtend)
	// Queues.
	s.handle("POST /api/v1/configure", s.handleConfigure)
	s.handle("DELETE /api/v1/resources/queues/{queue}", s.handleDeleteQueue)
	s.handle("GET /api/v1/resources/overview", s.handleOverview)
	s.handle("GET /api/v1/resources/queues", s.handleQueues)
	s.handle("GET /api/v1/resources/queues/{queue}", s.handleQueue)
	s.handle("GET /api/v1/resources/namespaces", s.handleNamespaces)
	s.handle("GET /api/v1/resources/tasks", s.handleTasks)
	// Messages and the dead-letter queue.
	s.handle("GET /api/v1/messages", s.handleMessages)
	s.handle("GET /api/v1/messages/{partitionId}/{transactionId}", s.handleMessage)
	s.handle("DELETE /api/v1/messages/{partitionId}/{transactionId}", s.handleDeleteMessage)
	s.handle("GET /api/v1/dlq", s.handleDLQ)
	s.handle("POST /api/v1/dlq/redrive", s.handleDLQRedrive)
	s.handle("POST /api/v1/dlq/purge", s.handleDLQPurge)
	// Consumer groups.
	s.handle("GET /api/v1/consumer-groups", s.handleGroups)
	s.handle("GET /api/v1/consumer-groups/lagging", s.handleLagging)
	s.handle("GET /api/v1/consumer-groups/{group}", s.handleGroup)
	s.handle("DELETE /api/v1/consumer-groups/{group}", s.handleDeleteGroup)
	s.handle("DELETE /api/v1/consumer-groups/{group}/queues/{queue}", s.handleDeleteGroup)
	s.handle("POST /api/v1/consumer-groups/{group}/subscription", s.handleSubscription)
	s.handle("POST /api/v1/consumer-groups/{group}/queues/{queue}/seek", s.handleSeek)
	s.handle("POST /api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek", s.handlePartitionSeek)
	s.handle("POST /api/v1/stats/refresh", s.handleStatsRefresh)
	// Status (the dashboard's feeds).
	s.handle("GET /api/v1/status", s.handleStatus)
	s.handle("GET /api/v1/status/queues", s.handleStatusQueues)
	s.handle("GET /api/v1/status/queues/{queue}", s.handleStatusQueue)
	s.handle("GET /api/v1/status/queues/{queue}/messages", s.handleStatusQueueMessages)
	s.handle("GET /api/v1/status/analytics", s.handleAnalytics)
	s.handle("GET /api/v1/status/buffers", s.handleBuffers)
	// Analytics (http_analytics.go).
	s.handle("GET /api/v1/analytics/system-metrics", s.handleSystemMetrics)
	s.handle("GET /api/v1/analytics/worker-metrics", s.handleWorkerMetrics)
	s.handle("GET /api/v1/analytics/postgres-stats", s.handlePostgresStats)
	s.handle("GET /api/v1/analytics/queue-lag", s.handleQueueLag)
	s.handle("GET /api/v1/analytics/queue-ops", s.handleQueueOps)
	s.handle("GET /api/v1/analytics/queue-parked-replicas", s.handleQueueParkedReplicas)
	s.handle("GET /api/v1/analytics/retention", s.handleRetention)
	// Traces.
	s.handle("POST /api/v1/traces", s.handleAddTrace)
	s.handle("GET /api/v1/traces/names", s.handleTraceNames)
	s.handle("GET /api/v1/traces/by-name/{traceName}", s.handleTracesByName)
	s.handle("GET /api/v1/traces/{partitionId}/{transactionId}", s.handleTraces)
	// Streams (Queen 0.15).
	s.handle("POST /streams/v1/queries", s.handleStreamQueries)
	s.handle("POST /streams/v1/cycle", s.handleStreamCycle)
	s.handle("POST /streams/v1/state/get", s.handleStreamState)
	// Maintenance.
	s.handle("GET /api/v1/system/maintenance", s.handleMaintenance)
	s.handle("POST /api/v1/system/maintenance", s.handleMaintenance)
	s.handle("GET /api/v1/system/maintenance/pop", s.handlePopMaintenance)
	s.handle("POST /api/v1/system/maintenance/pop", s.handlePopMaintenance)
	// The web dashboard at / (its files under /dashboard/, feeds under /api/v1/dashboard/).
	s.dashboardRoutes()
	// Everything else: Queen answers 404.
	s.handle("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "Not Found")
	})
}

// readBody reads the request body into a pooled buffer, refusing bodies
// above MaxBodyBytes (413) and empty ones (400 "Empty request body", as
// Queen does) unless allowEmpty. On failure it has answered; the caller
// returns.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, allowEmpty bool) (*[]byte, bool) {
	// A body that trickles in is cut off after ReadBodyTimeout; the
	// deadline is lifted once the body is in (the connection then waits for
	// the next request under ReadHeaderTimeout and IdleTimeout). After a
	// failure it stays, so that net/http does not wait for the rest of the
	// body either, and the connection is closed.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.cfg.ReadBodyTimeout))
	max := s.cfg.MaxBodyBytes
	if r.ContentLength > max {
		w.Header()["Connection"] = hdrClose
		s.writeErr(w, fmt.Errorf("%w: request body of %d bytes is above the limit of %d", engine.ErrTooLarge, r.ContentLength, max))
		return nil, false
	}
	// The body is held in memory (and counted against MaxBodyBytesInFlight)
	// until the handler gives it back with putBody.
	held := int64(0)
	fail := func(bp *[]byte) {
		putBuf(bp)
		s.release(held)
		w.Header()["Connection"] = hdrClose // do not wait for the rest of the body
	}
	if r.ContentLength > 0 {
		if !s.holdBody(w, r, r.ContentLength) {
			return nil, false
		}
		held = r.ContentLength
	}
	bp := getBuf()
	b := *bp
	if r.ContentLength >= 0 {
		// The length is known: read exactly that much (net/http stops the
		// body there).
		n := int(r.ContentLength)
		if cap(b) < n {
			b = s.big.get(n)
		}
		b = b[:n]
		if _, err := io.ReadFull(r.Body, b); err != nil {
			*bp = b
			fail(bp)
			writeError(w, http.StatusBadRequest, "cannot read the request body: "+err.Error())
			return nil, false
		}
	}
	for r.ContentLength < 0 {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		if more := int64(cap(b)) - held; more > 0 { // what the buffer may hold is counted first
			if !s.holdBody(w, r, more) {
				*bp = b
				fail(bp)
				return nil, false
			}
			held += more
		}
		n, err := r.Body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if int64(len(b)) > max {
			*bp = b
			fail(bp)
			s.writeErr(w, fmt.Errorf("%w: request body above the limit of %d bytes", engine.ErrTooLarge, max))
			return nil, false
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			*bp = b
			fail(bp)
			writeError(w, http.StatusBadRequest, "cannot read the request body: "+err.Error())
			return nil, false
		}
	}
	*bp = b
	if extra := held - int64(len(b)); extra > 0 { // keep exactly what putBody gives back
		s.release(extra)
	}
	rc.SetReadDeadline(time.Time{})
	if !allowEmpty && len(b) == 0 {
		putBuf(bp)
		writeError(w, http.StatusBadRequest, "Empty request body")
		return nil, false
	}
	return bp, true
}

// holdBody counts n more bytes of request bodies against
// MaxBodyBytesInFlight, waiting up to BodyWait for room; when there is none
// it answers 503 with Retry-After and reports false.
func (s *Server) holdBody(w http.ResponseWriter, r *http.Request, n int64) bool {
	if s.bodies.TryAcquire(n) {
		s.held.Add(n)
		return true
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.BodyWait)
	defer cancel()
	if s.bodies.Acquire(ctx, n) == nil {
		s.held.Add(n)
		return true
	}
	s.met.bodyRefusals.Add(1)
	w.Header()["Connection"] = hdrClose
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("the server holds %d bytes of request bodies already (its limit): try again", s.cfg.MaxBodyBytesInFlight))
	return false
}

// putBody gives a body read by readBody back: its memory, and its share of
// MaxBodyBytesInFlight.
func (s *Server) putBody(bp *[]byte) {
	if bp == nil {
		return
	}
	s.release(int64(len(*bp)))
	if cap(*bp) > maxPooledBuf {
		held := s.held.Load()
		s.big.put(*bp, s.cfg.MaxBodyBytesInFlight-held, held == 0)
		*bp = nil
	}
	putBuf(bp)
}

// bigBufs keeps large body buffers for the next large bodies while bodies
// flow, so that a flood of them reuses MaxBodyBytesInFlight of buffers
// instead of making as much garbage (with the runtime's default GC pacing,
// twice the budget in memory); once no body is held, they go.
type bigBufs struct {
	mu    sync.Mutex
	free  [][]byte
	bytes int64 // their capacities
}

// get returns a buffer of length n: a kept one not more than twice as
// large, or a new one.
func (bb *bigBufs) get(n int) []byte {
	bb.mu.Lock()
	for i, b := range bb.free {
		if cap(b) >= n && cap(b) <= 2*n {
			bb.free[i] = bb.free[len(bb.free)-1]
			bb.free[len(bb.free)-1] = nil
			bb.free = bb.free[:len(bb.free)-1]
			bb.bytes -= int64(cap(b))
			bb.mu.Unlock()
			return b[:n]
		}
	}
	bb.mu.Unlock()
	return make([]byte, n)
}

// put keeps b for reuse within room (what MaxBodyBytesInFlight leaves
// beside the bodies held now), so that bodies held and buffers kept stay
// within the budget together. When no body is held (room is the whole
// budget) every kept buffer goes: a broker that has finished a flood keeps
// no memory for it.
func (bb *bigBufs) put(b []byte, room int64, idle bool) {
	bb.mu.Lock()
	defer bb.mu.Unlock()
	if idle {
		clear(bb.free)
		bb.free, bb.bytes = nil, 0
		return
	}
	if bb.bytes+int64(cap(b)) <= room {
		bb.free = append(bb.free, b)
		bb.bytes += int64(cap(b))
	}
}

func (s *Server) release(n int64) {
	if n > 0 {
		s.held.Add(-n)
		s.bodies.Release(n)
	}
}

// writeJSON answers with status and the JSON in b.
func writeJSON(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h["Content-Type"] = hdrJSON
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	w.Write(b)
}

// writeError answers {"error": msg}.
func writeError(w http.ResponseWriter, status int, msg string) {
	b := append(appendString([]byte(`{"error":`), msg), '}')
	writeJSON(w, status, b)
}

// writeErr answers an error with the HTTP status of its code (netserver.HTTPStatus).
func (s *Server) writeErr(w http.ResponseWriter, err error) {
	status := netserver.HTTPStatus(err)
	switch {
	case status == http.StatusServiceUnavailable: // passing: a failover, a full disk, a journal behind
		s.fails.log(s.log, err, time.Now())
	case status >= 500:
		s.log.Warn("http: request failed", "err", err) // each: none is drowned by a failover's 503s
	}
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1") // passing: the journal behind, the disk full, a restart
	}
	writeError(w, status, errText(err))
}

// failLog logs the requests the server answered unavailable (503) at
// WARN, at most one line every failLogEvery: a failover, a full disk or a
// journal behind fails every request for a while, and a line each flooded
// the log (the other 5xx, internal errors, are logged each). A line
// says how many failures went unlogged since the one before it.
type failLog struct {
	mu      sync.Mutex
	last    time.Time
	skipped int
}

// failLogEvery is the least time between two lines of failLog.
const failLogEvery = time.Second

func (f *failLog) log(l *slog.Logger, err error, now time.Time) {
	f.mu.Lock()
	if now.Sub(f.last) < failLogEvery {
		f.skipped++
		f.mu.Unlock()
		return
	}
	skipped := f.skipped
	f.last, f.skipped = now, 0
	f.mu.Unlock()
	if skipped > 0 {
		l.Warn("http: request failed", "err", err, "failed_unlogged", skipped)
		return
	}
	l.Warn("http: request failed", "err", err)
}

// errText is the text a client reads for err: a protocol error's message
// without its code name, otherwise the error's text.
func errText(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Msg != "" {
		return pe.Msg
	}
	return err.Error()
}

// badRequest is a client's mistake: 400 through the error table.
func badRequest(msg string) error { return protocol.NewError(protocol.CodeInvalid, msg) }

// invalidJSON wraps a body's syntax error as Queen words it.
func invalidJSON(err *jsonError) error { return badRequest("Invalid JSON: " + err.Error()) }
