package broker

// This file is the only one that names the doors (netserver/tcp,
// netserver/httpapi) and what they share (netserver): their constructors,
// configurations and shared types.

import (
	"context"
	"crypto"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"

	"golang.org/x/sync/semaphore"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/netserver/httpapi"
	"github.com/regentmq/regent/netserver/tcp"
	"github.com/regentmq/regent/protocol"
)

// AuthConfig is the doors' JWT authentication (netserver.AuthConfig).
type AuthConfig = netserver.AuthConfig

// ParseKeyFile reads an RS256 or EdDSA public key (PEM) or a JWKS for
// AuthConfig.PublicKey and AuthConfig.KeySet (netserver.ParseKeyFile).
func ParseKeyFile(b []byte) (pub crypto.PublicKey, set map[string]crypto.PublicKey, err error) {
	return netserver.ParseKeyFile(b)
}

// TCPConfig and HTTPConfig are the doors' own configurations (tcp.Config,
// httpapi.Config), which Options.TuneTCP and Options.TuneHTTP adjust.
type (
	TCPConfig  = tcp.Config
	HTTPConfig = httpapi.Config
)

// popWaiter is what the HTTP door's data plane answers for a pop that
// parked; a cluster's broker gives the door its own data plane (forward.go).
type popWaiter = netserver.PopWaiter

var _ netserver.DataPlane = (*forwarder)(nil)

// doors are the broker's two transports.
type doors struct {
	tcpCfg   tcp.Config
	httpCfg  httpapi.Config
	tcp      *tcp.Server
	tcpOn    bool // tcp started: only a started tcp.Server may be shut down
	http     *httpapi.Server
	httpLn   net.Listener
	httpErr  chan error                // Serve's return
	httpDead atomic.Pointer[DoorError] // the HTTP door stopped before Exit
}

// configureDoors fills both doors' configurations from the options, then
// lets Options.TuneTCP and Options.TuneHTTP adjust them.
func (b *Broker) configureDoors() {
	o := &b.opts
	b.d.tcpCfg = tcp.Config{Logger: o.Logger, MaxConns: o.TCPMaxConns, Auth: o.Auth, MaxFrameBytes: o.MaxFrameBytes}
	b.d.httpCfg = httpapi.Config{Version: o.Version, MaxConns: o.HTTPMaxConns, Logger: o.Logger, Auth: o.Auth,
		MaxBodyBytes: o.MaxBodyBytes, MaxBodyBytesInFlight: o.MaxBodyBytesInFlight}
	if o.MaxBodyBytesInFlight > 0 {
		// One budget for what both doors hold of requests on their way in:
		// HTTP bodies, and the binary protocol's large frames.
		budget := semaphore.NewWeighted(o.MaxBodyBytesInFlight)
		b.d.tcpCfg.FrameBudget, b.d.tcpCfg.FrameBudgetBytes = budget, o.MaxBodyBytesInFlight
		b.d.httpCfg.Bodies = budget
	}
	if o.TuneTCP != nil {
		o.TuneTCP(&b.d.tcpCfg)
	}
	if o.TuneHTTP != nil {
		o.TuneHTTP(&b.d.httpCfg)
	}
}

// MaxPayloadFor is the largest message payload whose pop reply fits a
// binary-protocol frame of maxFrame bytes (0: protocol.DefaultMaxFrame):
// the engine's default MaxPayloadBytes for a broker with that
// Options.MaxFrameBytes, and the most it may be set to.
func MaxPayloadFor(maxFrame int) int {
	if maxFrame <= 0 {
		maxFrame = protocol.DefaultMaxFrame
	}
	return tcp.PopBytesFor(maxFrame) - engine.MaxMessageOverhead
}

// popBytes is the engine's default pop budget: the largest with which
// every pop reply fits one TCP frame (and so an HTTP reply, which has no
// frame limit).
func (d *doors) popBytes() int {
	frame := d.tcpCfg.MaxFrameBytes
	if frame <= 0 {
		frame = protocol.DefaultMaxFrame
	}
	return tcp.PopBytesFor(frame)
}

// replicatedFrameWeight is how many times its size a large frame counts
// against the request-bytes share on a replicated broker (tcp.Config's
// FrameWeight): its request is decoded, compressed into its shard's Raft
// log, sent to two followers and journaled by each, and those copies live
// about as long as it does. 50 clients pushing 15 MB batches for 20 s to
// three replicated brokers at the default --memory-limit, two runs each:
// peak RSS 583 to 711 MiB per broker counting each frame once, 315 to 403
// MiB counting it three times; 1,035 messages stored in each run against
// 1,320 and 1,335, and the small pushes among them answered in 0.93 s at
// the median instead of 3.7 to 4.3 s.
const replicatedFrameWeight = 3

// buildDoors builds both doors over the engine, with the journal's figures
// for Stats replies and /metrics.
func (b *Broker) buildDoors() (err error) {
	stats := journalStats(b.j)
	tc := b.d.tcpCfg
	tc.Addr, tc.JournalStats = b.opts.TCPAddr, stats
	if b.cl != nil {
		tc.Cluster = b.cl
	}
	if rp := b.replicas(); rp != nil {
		tc.Plane, tc.Raft, tc.Engines = rp.plane, rp.node.ReceiveWire, rp.engines
		if tc.FrameWeight == 0 {
			tc.FrameWeight = replicatedFrameWeight
		}
	}
	if b.d.tcp, err = tcp.New(tc, b.e); err != nil {
		return err
	}
	hc := b.d.httpCfg
	hc.Addr, hc.JournalStats, hc.TCPConnections, hc.TCPHealth = b.opts.HTTPAddr, stats, b.d.tcp.Connections, b.d.tcp.Healthy
	hc.TCPFrames = b.d.tcp.Frames
	if b.cl != nil {
		fw := b.cl.dataPlane(b.e, b.opts.Engine.MaxPopBytes)
		hc.Cluster, hc.DataPlane, hc.DLQ = b.cl, fw, fw.DLQ
	}
	hc.UncheckedAcks = b.opts.Engine.UncheckedAcks // for a replicated broker's bridge, which has no one engine
	b.d.http, err = httpapi.New(hc, b.e)
	return err
}

// replicas is the broker's share of a replicated cluster's shards, or nil.
func (b *Broker) replicas() *replicaPart {
	if b.cl == nil {
		return nil
	}
	return b.cl.rp
}

// openDoors starts the TCP door, then listens (TLS when configured) and
// serves HTTP.
func (b *Broker) openDoors() error {
	if err := b.d.tcp.Start(); err != nil {
		return err
	}
	b.d.tcpOn = true
	if b.d.http == nil {
		return nil // not served (buildDoors)
	}
	l, err := net.Listen("tcp", b.opts.HTTPAddr)
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	if b.opts.TLS != nil {
		l = tls.NewListener(l, b.opts.TLS)
	}
	b.d.httpLn = l
	b.d.httpErr = make(chan error, 1)
	go func() { b.d.httpErr <- b.d.http.Serve(l) }()
	return nil
}

// watchDoors delivers the first door to stop before Exit on b.died.
func (b *Broker) watchDoors() {
	var de *DoorError
	var raftDied <-chan error // nil: never ready
	if rp := b.replicas(); rp != nil {
		raftDied = rp.died
	}
	select {
	case <-b.exiting:
		return
	case err := <-raftDied:
		// The replicas' loop stopped (a journal that failed): nothing
		// commits any more, so the broker must stop rather than hold
		// requests for ever.
		de = &DoorError{Door: "raft", Err: err}
	case err := <-b.d.tcp.Died():
		de = &DoorError{Door: "tcp", Err: err}
	case err := <-b.d.httpErr:
		if errors.Is(err, http.ErrServerClosed) {
			return // Exit
		}
		de = &DoorError{Door: "http", Err: err}
		b.d.httpDead.Store(de)
	}
	b.died <- de
}

// shutdown stops the HTTP door, then the TCP door: each stops taking
// requests and answers those in flight within ctx.
func (d *doors) shutdown(ctx context.Context) []error {
	var errs []error
	if d.http != nil && d.httpLn != nil {
		if err := d.http.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http: %w", err))
		}
	}
	if d.tcpOn {
		if err := d.tcp.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("tcp: %w", err))
		}
	}
	return errs
}

func (d *doors) healthy() error {
	if !d.tcpOn {
		return errors.New("broker: the TCP door is not serving")
	}
	if err := d.tcp.Healthy(); err != nil {
		return err
	}
	if d.http == nil {
		return nil // not served (buildDoors)
	}
	if d.httpLn == nil {
		return errors.New("broker: the HTTP door is not serving")
	}
	if de := d.httpDead.Load(); de != nil {
		return de
	}
	return nil
}

func (d *doors) tcpAddr() net.Addr {
	if !d.tcpOn {
		return nil
	}
	return d.tcp.Addr()
}

func (d *doors) httpAddr() net.Addr {
	if d.httpLn == nil {
		return nil
	}
	return d.httpLn.Addr()
}

// journalStats reads the journal's figures for the doors.
func journalStats(j *log.Log) func() netserver.JournalStats {
	return func() netserver.JournalStats {
		s := j.Stats()
		return netserver.JournalStats{
			Fsyncs: s.Fsyncs, FsyncNanosTotal: s.FsyncNanosTotal, LastFsyncNanos: s.LastFsyncNanos,
			FsyncBuckets: log.FsyncBuckets[:], FsyncHistogram: s.FsyncHistogram[:],
			Entries: s.Entries, Records: s.Records, LastBatchRecords: s.LastBatchRecords,
			BytesWritten: s.BytesWritten, DiskBytes: j.DiskBytes(),
		}
	}
}

func (d *doors) tcpInFlight() int {
	if !d.tcpOn {
		return 0
	}
	return d.tcp.InFlight()
}

func (d *doors) tcpConnections() int {
	if !d.tcpOn {
		return 0
	}
	return d.tcp.Connections()
}
