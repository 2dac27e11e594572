// Package httpapi serves Queen MQ's HTTP API v1 over Regent's engine, so
// that Queen's own clients (JS, Python, Go, PHP, C++) work unchanged, with
// /health, /metrics (Prometheus text, metrics.go) and the embedded dashboard
// (package dashboard) beside it.
//
// # Model
//
// net/http serves each request on its own goroutine; a handler calls the
// engine and may wait for it (a push until its group commit, a long poll
// until a message or its timeout), which holds that goroutine only.
// Request bodies are bounded one by one (Config.MaxBodyBytes, 413 before
// reading) and together (Config.MaxBodyBytesInFlight: a body that does not
// fit waits Config.BodyWait, then 503 with Retry-After); connections are
// capped by Config.MaxConns, and a client that does not read its answer is
// cut off after Config.WriteTimeout.
//
// # Fast path and admin path
//
// The hot routes (push, pop, ack, ack batch, transaction) decode their
// bodies in place with a hand-written JSON reader (http_decode.go) and
// append their answers into pooled buffers (http_json.go): no reflection,
// no allocation per message, payloads copied once as the raw JSON text they
// were pushed as. The colder admin routes (resources, status, consumer
// groups, DLQ operations, traces, maintenance, the dashboard's feeds) use
// encoding/json on small structs. Both map engine errors through
// netserver's one table (netserver.HTTPStatus).
//
// # In a cluster
//
// The data-plane routes (push, pop, ack, ack batch, transaction, lease
// extend) call a netserver.DataPlane: the engine itself when the broker
// runs alone (netserver.EnginePlane, no cost per request), or the one a
// cluster's broker gives (Config.DataPlane), which forwards what another
// broker owns to it, so that Queen's clients may talk to any broker. The
// other routes answer from this broker's engine, or ask the cluster
// (Config.Cluster) where they concern all of it.
//
// # Authentication
//
// With Config.Auth on, every route but the public ones needs
// "Authorization: Bearer <jwt>", verified per request by
// netserver.Authenticator against the route's level from netserver's access
// table: public (/health, the dashboard's page and files, the 404
// catch-all; /metrics and /metrics/prometheus unless MetricsAuth),
// read-only (reads), read-write (push, pop, ack, leases, transactions,
// configure) and admin (deletes, purges, maintenance). A route registered
// without a row in that table panics when the server is built.
// ClaimsFrom gives a handler the verified claims.
//
// # Shutdown
//
// Server.Shutdown stops accepting connections, closes idle ones and waits
// until the requests in progress are answered or its context ends; parked
// long polls are answered by the engine's Close, or end with their
// connections when the context runs out (their messages stay with the
// broker).
package httpapi
