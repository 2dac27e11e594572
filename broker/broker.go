package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
)

// Default listen addresses of the doors.
const (
	DefaultTCPAddr  = ":6633"
	DefaultHTTPAddr = ":6632"
)

// DefaultShutdownTimeout is Options.ShutdownTimeout when zero.
const DefaultShutdownTimeout = 30 * time.Second

// ShutdownMargin is what Exit allows past Options.ShutdownTimeout for the
// engine's last snapshot and the journal's final fsync before it gives up
// on them.
const ShutdownMargin = 5 * time.Second

// startupGrace is how long a failed New or Main may take to close what it
// had built.
const startupGrace = 5 * time.Second

// Options configure a Broker. Zero values take the documented defaults.
type Options struct {
	// Journal configures the journal (log.Open): Dir (required), Sync,
	// SyncInterval, Salvage, sizes. Its Logger defaults to Logger.
	Journal log.Config
	// Engine configures the engine (engine.New): encryption keys, limits,
	// clock. Its Logger defaults to Logger, and MaxPopBytes (0) to the
	// largest pop whose reply fits one TCP frame, so that every message a
	// push accepts can be popped over either door.
	Engine engine.Config
	// TCPAddr is the binary protocol's listen address; default ":6633".
	// Port 0 picks a free one (see TCPAddr once Main returned).
	TCPAddr string
	// HTTPAddr is the HTTP door's listen address; default ":6632".
	HTTPAddr string
	// TCPMaxConns and HTTPMaxConns cap each door's open connections; 0 is
	// the door's default (10000).
	TCPMaxConns, HTTPMaxConns int
	// MaxFrameBytes is the largest binary-protocol frame, header included:
	// a request (a push batch, a transaction), and a pop reply, which is
	// cut to fit. 0 is protocol.DefaultMaxFrame (16 MiB); at least
	// protocol.MinMaxFrame. The largest message (Engine.MaxPayloadBytes)
	// defaults to what a pop reply of this size can carry.
	MaxFrameBytes int
	// MaxBodyBytes caps an HTTP request body (a larger one is refused with
	// 413 before it is read), and MaxBodyBytesInFlight the bodies held at
	// once across requests (one that does not fit waits, then gets 503).
	// 0 is the HTTP door's default (64 MiB, 256 MiB).
	MaxBodyBytes, MaxBodyBytesInFlight int64
	// Auth turns on JWT authentication on both doors (off when
	// Auth.Enabled is false).
	Auth AuthConfig
	// TLS, when set, makes the HTTP door serve HTTPS. The TCP door speaks
	// plain TCP (a TLS terminator may stand in front of it).
	TLS *tls.Config
	// Version is what /health reports; default "dev".
	Version string
	// ShutdownTimeout bounds Exit's drain: requests in flight are answered
	// within it; default 30 s. Exit returns within it and ShutdownMargin.
	ShutdownTimeout time.Duration
	// Logger receives the logs of every part; nil means slog.Default().
	Logger *slog.Logger

	// TuneTCP and TuneHTTP, when set, adjust each door's own configuration
	// (a limit or timeout that Options does not carry, such as the TCP
	// frame size or the HTTP body cap) after the broker filled it from the
	// fields above and before the door is built. The broker's wiring
	// (Addr, JournalStats, TCPConnections, TCPHealth) is set after them and
	// wins. The engine's default MaxPopBytes follows the tuned TCP frame
	// size. Meant for tests and embedding programs; cmd/regent sets none.
	TuneTCP  func(*TCPConfig)
	TuneHTTP func(*HTTPConfig)
	// WrapJournal, when set, is given the opened journal and returns what
	// the engine writes through: the journal itself or a wrapper around it
	// (a test counting snapshots). The broker still owns the journal: it
	// closes it, and Journal returns it, not the wrapper.
	WrapJournal func(*log.Log) engine.Journal

	// Cluster, when set, makes the broker one of a cluster's (cluster.go):
	// New joins it (etcd, registration, the first shard map) before it
	// builds the engine, which then serves only the shards this broker
	// owns. In a replicated cluster (ClusterOptions.Replicas) the broker
	// has no one engine (Engine returns nil): one per shard it leads
	// (replicated.go).
	Cluster *ClusterOptions
}

// Broker is one Regent: its journal, its engine and its two doors. New
// builds it, Main opens the doors, Exit stops it.
type Broker struct {
	opts Options
	j    *log.Log
	e    *engine.Engine
	d    doors        // doors.go
	cl   *clusterPart // nil: the broker runs alone

	mu      sync.Mutex    // guards started, closing and the doors' fields Main sets
	started bool          // Main was called
	closing bool          // Exit or a failed start began to close
	exiting chan struct{} // closed when closing becomes true
	exit    sync.Once
	exitErr error
	died    chan error // one DoorError, if a door stops before Exit
}

// New opens the journal in opts.Journal.Dir (recovering what it holds),
// builds the engine over it and both doors over the engine. Nothing
// listens yet: Main opens the doors. On an error New closes what it had
// built; the error wraps log.ErrCorrupt for a damaged journal and
// engine.ErrEncryption for keys that do not fit the data directory.
func New(opts Options) (*Broker, error) {
	if opts.TCPAddr == "" {
		opts.TCPAddr = DefaultTCPAddr
	}
	if opts.HTTPAddr == "" {
		opts.HTTPAddr = DefaultHTTPAddr
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Journal.Logger == nil {
		opts.Journal.Logger = opts.Logger
	}
	if opts.Engine.Logger == nil {
		opts.Engine.Logger = opts.Logger
	}
	b := &Broker{opts: opts, exiting: make(chan struct{}), died: make(chan error, 1)}
	b.configureDoors()
	if b.opts.Engine.MaxPopBytes == 0 {
		b.opts.Engine.MaxPopBytes = b.d.popBytes()
	}
	// A cluster's brokers authenticate to each other when auth is on: a
	// configuration that gives them no token is refused before anything
	// opens.
	token, err := linkToken(b.opts)
	if err != nil {
		return nil, err
	}
	if b.j, err = log.Open(b.opts.Journal); err != nil {
		return nil, err
	}
	var ej engine.Journal = b.j
	if b.opts.WrapJournal != nil {
		ej = b.opts.WrapJournal(b.j)
	}
	if b.opts.Cluster != nil {
		if b.cl, err = startCluster(*b.opts.Cluster, b.opts.TCPAddr, b.opts.HTTPAddr, token, b.opts.Logger); err == nil && !b.cl.replicated() {
			b.cl.engineConfig(&b.opts.Engine)
		}
	}
	switch {
	case err != nil:
	case b.cl != nil && b.cl.replicated():
		// One engine per shard it leads, over the shard's Raft log; the
		// journal holds those logs (replicated.go). Their configuration
		// is checked now, not at the first takeover.
		if b.opts.Engine, err = b.opts.Engine.WithDefaults(); err == nil {
			b.cl.rp, err = startReplicas(b.cl, b.j, b.opts.Engine, b.opts.Logger)
		}
	default:
		b.e, err = engine.New(b.opts.Engine, ej)
	}
	if err == nil && b.cl != nil {
		err = b.cl.bind(b.e)
	}
	if err == nil {
		err = b.buildDoors()
	}
	if err != nil {
		b.mu.Lock()
		b.beginClose()
		b.mu.Unlock()
		b.close(startupGrace)
		return nil, err
	}
	return b, nil
}

// Main opens the doors: the TCP door first, then the HTTP door. It returns
// once both accept connections (unlike nsqd's Main, it does not block: Died
// tells of a door that stops, and Exit stops the broker). On an error Main
// closes the broker, and Exit has nothing left to do.
func (b *Broker) Main() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closing:
		return errors.New("broker: Main after Exit")
	case b.started:
		return errors.New("broker: Main called twice")
	}
	b.started = true
	if err := b.openDoors(); err != nil {
		b.beginClose()
		b.close(startupGrace)
		return err
	}
	go b.watchDoors()
	return nil
}

// A DoorError is what Died delivers: a door that stopped serving without
// Exit. Its text is the door's own error.
type DoorError struct {
	Door string // "tcp" or "http"; "raft" for a replicated cluster's loop (replicated.go)
	Err  error
}

func (e *DoorError) Error() string { return e.Err.Error() }
func (e *DoorError) Unwrap() error { return e.Err }

// Died delivers a *DoorError if a door stops serving before Exit (the TCP
// door's event loops end on an accept error such as EMFILE; the HTTP
// server's Serve returns). A broker with a dead door should be stopped.
func (b *Broker) Died() <-chan error { return b.died }

// Healthy reports why the broker does not serve on both doors, or nil.
func (b *Broker) Healthy() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.d.healthy()
}

// TCPAddr is the TCP door's address (the real port when the configured one
// was 0); nil before Main.
func (b *Broker) TCPAddr() net.Addr {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.d.tcpAddr()
}

// HTTPAddr is the HTTP door's address; nil before Main.
func (b *Broker) HTTPAddr() net.Addr {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.d.httpAddr()
}

// TCPInFlight is how many requests the TCP door has taken and not yet
// answered (parked long polls included): a test waits on it for a request
// to reach the broker. 0 before Main.
func (b *Broker) TCPInFlight() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.d.tcpInFlight()
}

// TCPConnections is how many connections the TCP door holds open; 0
// before Main.
func (b *Broker) TCPConnections() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.d.tcpConnections()
}

// Engine is the broker's engine, for tests and embedding programs; nil
// for a broker of a replicated cluster (see Shards).
func (b *Broker) Engine() *engine.Engine { return b.e }

// MaxPayloadBytes is the largest message payload the broker takes (its
// engines' engine.Config.MaxPayloadBytes).
func (b *Broker) MaxPayloadBytes() int {
	if b.e != nil {
		return b.e.MaxPayloadBytes()
	}
	return b.opts.Engine.MaxPayloadBytes
}

// UncheckedAcks reports whether the broker accepts acks that name no lease
// (engine.Config.UncheckedAcks).
func (b *Broker) UncheckedAcks() bool {
	if b.e != nil {
		return b.e.UncheckedAcks()
	}
	return b.opts.Engine.UncheckedAcks
}

// Shards are the engines of the replicated shards this broker leads now,
// by shard; nil for a broker that is not a replicated cluster's.
func (b *Broker) Shards() map[int]*engine.Engine {
	if b.cl == nil || b.cl.rp == nil {
		return nil
	}
	out := map[int]*engine.Engine{}
	for _, s := range b.cl.rp.shards {
		if e, _, _ := b.cl.rp.node.Shard(s).Engine(); e != nil {
			out[int(s)] = e
		}
	}
	return out
}

// Journal is the broker's journal, for tests and embedding programs.
func (b *Broker) Journal() *log.Log { return b.j }

// Exit stops the broker in order: the HTTP door, then the TCP door, stop
// taking requests and answer those in flight (their commits finish and
// their replies go out) within Options.ShutdownTimeout; then the engine
// stops (a snapshot) and the journal closes (a final fsync). A stuck disk
// can hold those last two for ever, and a stop must stop: past the timeout
// and ShutdownMargin Exit returns an error and leaves them behind (what was
// answered is durable already, under the sync policy; the next start
// replays the journal). Exit may be called more than once; later calls
// return the first one's result.
func (b *Broker) Exit() error {
	b.exit.Do(func() {
		b.mu.Lock() // after a Main in progress
		began := b.beginClose()
		b.mu.Unlock()
		if began {
			b.exitErr = closeWithin(b.close, b.opts.ShutdownTimeout)
		}
	})
	return b.exitErr
}

// beginClose marks the broker closing, under b.mu; it reports false when a
// failed start closed it already.
func (b *Broker) beginClose() bool {
	if b.closing {
		return false
	}
	b.closing = true
	close(b.exiting)
	return true
}

// close stops the doors, the engine and the journal, in that order.
func (b *Broker) close(grace time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	errs := b.d.shutdown(ctx)
	if b.cl != nil {
		if err := b.cl.close(); err != nil {
			errs = append(errs, fmt.Errorf("cluster: %w", err))
		}
	}
	if b.e != nil {
		if err := b.e.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if b.j != nil {
		if err := b.j.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// closeWithin runs close(grace) and waits for it at most grace and
// ShutdownMargin: the doors drain within grace, but a stuck disk can hold
// the engine's last snapshot and the journal's final fsync for ever.
func closeWithin(close func(time.Duration) error, grace time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- close(grace) }()
	bound := grace + ShutdownMargin
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("not stopped within %v (the journal is stuck?): exiting without the final snapshot and fsync; the next start replays the journal", bound)
	}
}
