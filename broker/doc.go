// Package broker is Regent's composition root: it builds, starts and stops
// one whole broker (the journal, the engine, both doors and their metrics),
// in the shape of nsq's nsqd (New, Main, Exit). `regent serve` is a thin
// main over it, the in-process bench server uses it, and broker/brokertest
// starts one for a test.
//
// # What it builds
//
// New, in this order, and nothing listens yet:
//
//	step  part                        from
//	1     the journal (log.Open)      Options.Journal: opens Dir, repairs a torn tail, replays
//	2     the engine (engine.New)     Options.Engine, over the journal: recovery from it
//	3     the TCP door                binary protocol on gnet, over the engine
//	4     the HTTP door and metrics   Queen's HTTP API v1, /metrics, /health, the dashboard
//
// Both doors report the journal's figures (fsyncs, batches, bytes, disk
// use) in Stats replies and /metrics, and the HTTP door reports the TCP
// door's connections and health. Unless Options.Engine.MaxPopBytes is set,
// the engine's pop budget is the largest whose reply fits one TCP frame, so
// every message a push accepts can be popped over either door.
//
// # Start and stop
//
//	Main   1. the TCP door starts its event loops (returns once it accepts)
//	       2. the HTTP door listens (TLS when Options.TLS is set) and serves
//	Exit   1. the HTTP door stops taking requests and answers those in flight
//	       2. the TCP door does the same (parked long polls answered empty)
//	       3. the engine stops (its last snapshot)
//	       4. the journal closes (a final fsync): last, since every step before writes to it
//
// Steps 1 and 2 of Exit share Options.ShutdownTimeout; Exit returns at the
// latest ShutdownMargin after it, with an error, even when a stuck disk
// holds steps 3 and 4 (what was answered is durable already under the sync
// policy, and the next start replays the journal). Main does not block: a
// door that stops serving before Exit is told on Died (a *DoorError), and
// the broker should then be stopped; Healthy tells the same on demand. A
// failed New or Main closes what it had built, in the same order.
//
// # Who owns what
//
// The Broker owns its journal, engine and doors, and Exit is the only way
// they close: the Engine and Journal accessors lend them to tests and
// embedding programs, which must not close them. The caller owns the
// process: signals, descriptor limits, flags, the banner and exit codes
// stay in cmd/regent. Only doors.go names netserver (its constructors,
// configurations and AuthConfig), so that the split of netserver into
// netserver/tcp and netserver/httpapi touches one file here.
package broker
