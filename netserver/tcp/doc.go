// Package tcp serves Regent's binary protocol (package protocol) on gnet
// event loops: frame in, engine call, reply out.
//
// # Event loops
//
// Config.Loops event loops (one per CPU by default) own the connections;
// a running server adds one P per loop to GOMAXPROCS (procs.go) so that the
// goroutines the loops wake are not left without one. gnet calls OnTraffic
// once per read: the loop decodes every complete frame in the buffer in one
// call and hands each request to the engine. Frames longer than
// Config.MaxFrameBytes are refused from their header, before they are
// buffered. While a large frame is still arriving, the loop reads only its
// header at each read (partialFrame): gnet's Peek(-1) copies all the input
// buffered so far, and doing that at every read of a 1 MiB frame made its
// push cost the server 10 ms of CPU instead of 2.3 (regent bench push
// --size 1048576 --batch 1).
//
// # Replies: the reply buffer and Wake
//
// Every reply is encoded into its connection's reply buffer under the
// connection's lock, from the loop (a pop served from memory, a refusal)
// or from whichever goroutine the engine answers on (the journal's
// committer after a group commit, a timer ending a long poll). A reply made
// off the loop sends a Wake unless one is already on its way or the loop is
// in OnTraffic and will flush by itself; the loop then writes everything
// ready in one write. Off the loop only Wake and Close are called on a
// connection, never a write.
//
// # The in-flight window
//
// A connection may have Config.MaxInFlight requests unanswered (parked long
// polls included); past that a request is answered overloaded and the
// connection stays open. Replies waiting for a client to read them are
// capped by Config.MaxOutboundBytes: a client that lets more pile up is
// disconnected. Connections are capped by Config.MaxConns.
//
// # What may block
//
// Nothing on a loop: no lock held across a wait, no wait on the journal, no
// write from a foreign goroutine. Backpressure is an answer (overloaded)
// or a closed connection, never a stalled loop.
//
// # Authentication
//
// With Config.Auth on, a client sends its token in an Auth frame after
// Hello; it is verified once (netserver.Authenticator) and each request is
// then checked against its opcode's level (netserver.OpLevel) and the
// token's expiry: two comparisons, no cryptography (tcp_auth.go).
//
// # Shutdown
//
// Server.Shutdown stops taking requests, answers parked long polls (empty),
// waits until every request in flight is answered (its journal commit done
// and its reply in the buffer) or its context ends, wakes the loops to
// write the last replies, then stops gnet and closes every connection.
// Server.Died reports a door that stopped without Shutdown.
//
// # Accepting
//
// The server accepts on its own listener (accept.go), not gnet's: gnet ends
// its engine on an accept error it does not retry, such as running out of
// descriptors. The accept loop pauses on such an error and tries again,
// refuses connections past Config.MaxConns itself (an overloaded error,
// then close), and enrolls the admitted ones on the event loops.
package tcp
