// Package netserver is the ground Regent's two doors stand on: the binary
// protocol on gnet (package netserver/tcp) and Queen MQ's HTTP API v1
// (package netserver/httpapi). Both call the same engine operations; this
// package holds what they must agree on, and nothing that serves a wire:
//
//   - the one table from engine errors to wire codes (CodeOf) and HTTP
//     statuses (HTTPStatus, a plain int: this package does not import
//     net/http, so the binary door does not depend on it through here);
//   - the access table: the level (public, read-only, read-write, admin)
//     of every opcode and every HTTP route, in one row per operation so the
//     doors cannot drift apart (OpLevel, RouteLevel), and the token
//     verification both doors use (AuthConfig, Authenticator, Claims);
//   - the journal's figures both doors report (JournalStats).
//
// What both doors promise:
//
//   - Ordering. The replies of one binary connection carry their request's
//     id and may come in any order; what a partition stores, and the order
//     a pop sees, is the order the engine accepted the pushes, whichever
//     door they came through. A push is answered after the journal has
//     accepted it under its sync policy, never before.
//   - Backpressure. No door buffers without bound and none waits on the
//     journal on a thread that serves other clients: a full door answers
//     overloaded (binary) or 503 with Retry-After (HTTP), a client that
//     does not read its replies is disconnected, and connections, request
//     bodies, frames and replies are capped by bytes. An answer costs
//     memory for its page, never for a whole queue: every list either door
//     answers is a page with a default and a maximum size, and says whether
//     more follow (over the binary protocol QueueInfo and QueueList since
//     1.2, and DLQList by its total), and over TCP it fits the frame its
//     client reads.
//   - Shutdown. Each door's Shutdown stops taking requests, answers parked
//     long polls (empty: their messages stay with the broker), waits until
//     the requests in flight are answered or its context ends, then closes
//     its connections. The engine is closed after the doors, by their
//     owner.
//
// An operation answered with an error leaves no trace on either door (the
// engine's rule), and a string from a request that the engine keeps is
// copied at that boundary: the tests here (package netserver_test) poison
// both doors' decode buffers after every request to prove it, drive the same
// operations through both doors, and stall and abuse both at once.
package netserver
