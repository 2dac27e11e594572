package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/netserver/httpapi"
	"github.com/regentmq/regent/netserver/tcp"
	"github.com/regentmq/regent/protocol"
)

var serveSettings = []setting{
	{"data", "REGENT_DATA", "./regent-data", "data directory (journal, snapshots)"},
	{"tcp", "REGENT_TCP", ":6633", "binary protocol listen address (the Go client, regent's commands)"},
	{"http", "REGENT_HTTP", ":6632", "HTTP listen address (Queen's HTTP API v1, /metrics, /health)"},
	{"sync", "REGENT_SYNC", "always", "fsync policy: always, interval:10ms, or none"},
	{"encryption-key", "REGENT_ENCRYPTION_KEY", "", "64 hex characters: the AES-256 key that seals the payloads of queues with encryptionEnabled (without it they refuse pushes); the data directory records its fingerprint, and start refuses another key"},
	{"encryption-old-keys", "REGENT_ENCRYPTION_OLD_KEYS", "", "keys (64 hex characters each, comma-separated) that open what they sealed and never seal: a rotation is --encryption-key NEW --encryption-old-keys OLD"},
	{"encryption-lost-keys", "REGENT_ENCRYPTION_LOST_KEYS", "", "fingerprints (16 hex characters each, comma-separated, as a refusal to start names them) of keys lost for good: start anyway; each message they sealed goes to the dead-letter queue when reached"},
	{"salvage", "REGENT_SALVAGE", "false", "true: start despite journal damage: skip the damaged entries (LOSES what they held; every other entry is kept), set aside unusable snapshots, and log what was lost; false: refuse to start on it"},
	{"log-format", "REGENT_LOG_FORMAT", "text", "log format: text or json"},
	{"log-level", "REGENT_LOG_LEVEL", "info", "log level: debug, info, warn or error"},
	{"shutdown-timeout", "REGENT_SHUTDOWN_TIMEOUT", "30s", "how long a stop may take: requests in flight are answered within it, and past it the process exits anyway (status 1), even with its disk stuck"},
}

func cmdServe(args []string, stdout, stderr io.Writer) int {
	s := newSettings("regent serve", stderr, serveSettings)
	s.fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: regent serve [flags]\n\nRuns the broker until SIGINT or SIGTERM (a second signal exits at once).\n\n")
		s.fs.PrintDefaults()
		fmt.Fprint(stderr, queenEnvHelp)
	}
	if err := s.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	logger, err := newLogger(stderr, s.get("log-format"), s.get("log-level"))
	if err != nil {
		fmt.Fprintln(stderr, "regent serve:", err)
		return exitUsage
	}
	pol, interval, err := log.ParseSync(s.get("sync"))
	if err != nil {
		fmt.Fprintln(stderr, "regent serve: --sync:", err)
		return exitUsage
	}
	var key []byte
	if k := s.get("encryption-key"); k != "" {
		if key, err = hex.DecodeString(k); err != nil || len(key) != 32 {
			fmt.Fprintln(stderr, "regent serve: --encryption-key: want 64 hex characters (32 bytes)")
			return exitUsage
		}
	}
	oldKeys, err := parseKeys(s.get("encryption-old-keys"))
	if err != nil {
		fmt.Fprintln(stderr, "regent serve: --encryption-old-keys:", err)
		return exitUsage
	}
	lostKeys := splitList(s.get("encryption-lost-keys"))
	salvage, err := strconv.ParseBool(s.get("salvage"))
	if err != nil {
		fmt.Fprintln(stderr, "regent serve: --salvage: want true or false")
		return exitUsage
	}
	grace, err := time.ParseDuration(s.get("shutdown-timeout"))
	if err != nil || grace <= 0 {
		fmt.Fprintln(stderr, "regent serve: --shutdown-timeout: want a positive duration such as 30s")
		return exitUsage
	}
	sec, err := securityFrom(s, logger)
	if err != nil {
		fmt.Fprintln(stderr, "regent serve:", err)
		return exitUsage
	}
	nofile, err := raiseNoFile()
	if err != nil {
		fmt.Fprintln(stderr, "regent serve:", err)
		return exitFailure
	}
	tcpConns, httpConns, err := connCaps(nofile)
	if err != nil {
		fmt.Fprintln(stderr, "regent serve:", err)
		return exitFailure
	}
	logger.Info("descriptors", "limit", nofile, "tcp_max_conns", tcpConns, "http_max_conns", httpConns)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := startBroker(brokerConfig{dir: s.get("data"), tcpAddr: s.get("tcp"), httpAddr: s.get("http"),
		sync: pol, syncInterval: interval, salvage: salvage, encryptionKey: key, oldKeys: oldKeys, lostKeys: lostKeys, logger: logger,
		tcpMaxConns: tcpConns, httpMaxConns: httpConns, security: sec})
	if err != nil {
		logger.Error("cannot start", "err", err)
		if errors.Is(err, log.ErrCorrupt) && !salvage {
			fmt.Fprintln(stderr, "regent serve: the journal is damaged. Keep a copy of the data directory, then --salvage starts by skipping the damaged entries: every other entry is kept, the messages lost are logged (queue, partition, offsets) and passed over by consumers.")
		}
		if errors.Is(err, engine.ErrEncryption) {
			fmt.Fprintln(stderr, keysHint)
		}
		return exitFailure
	}
	abs, _ := filepath.Abs(s.get("data"))
	fmt.Fprintf(stdout, "regent %s\n  data    %s (sync %s)\n  tcp     %s (binary protocol)\n  http    %s (Queen HTTP API v1, /metrics, /health)\n",
		version, abs, s.get("sync"), b.tcp.Addr(), b.httpLn.Addr())
	fmt.Fprint(stdout, sec.banner())
	failed := false
	select {
	case <-ctx.Done():
	case err := <-b.httpErr:
		logger.Error("http server stopped", "err", err)
		failed = true
	case err := <-b.tcp.Died():
		// A broker with one door dead does not limp on: it stops, says why,
		// and exits non-zero for its supervisor to restart it.
		logger.Error("stopping: a door died", "err", err)
		failed = true
	}
	stop() // a second signal now kills the process the default way
	logger.Info("shutting down: finishing requests in flight")
	if err := closeWithin(b.close, grace); err != nil {
		logger.Error("shutdown", "err", err)
		return exitFailure
	}
	logger.Info("stopped")
	if failed {
		return exitFailure
	}
	return exitOK
}

const keysHint = `regent serve: the encryption keys do not fit the data directory (see the error above). ` +
	`Start with the key that sealed its messages (--encryption-key). To rotate, give the new key as --encryption-key and ` +
	`the previous ones as --encryption-old-keys (they open what they sealed; the new key seals and is recorded). ` +
	`A key lost for good can be named by its fingerprint in --encryption-lost-keys: the broker starts, and each message it ` +
	`sealed goes to the dead-letter queue when reached.`

// parseKeys reads comma-separated keys of 64 hex characters.
func parseKeys(list string) ([][]byte, error) {
	var keys [][]byte
	for i, k := range splitList(list) {
		b, err := hex.DecodeString(k)
		if err != nil || len(b) != 32 {
			return nil, fmt.Errorf("key %d: want 64 hex characters (32 bytes)", i+1)
		}
		keys = append(keys, b)
	}
	return keys, nil
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// closeWithin runs close(grace) and waits for it at most grace and a few
// seconds more: the doors drain within grace, but a stuck disk can hold the
// engine's last snapshot and the journal's final fsync for ever, and a stop
// must stop. What was answered is durable already (under the sync policy);
// the next start replays the journal.
func closeWithin(close func(time.Duration) error, grace time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- close(grace) }()
	bound := grace + shutdownMargin
	select {
	case err := <-done:
		return err
	case <-time.After(bound):
		return fmt.Errorf("not stopped within %v (the journal is stuck?): exiting without the final snapshot and fsync; the next start replays the journal", bound)
	}
}

// shutdownMargin is what closeWithin allows past the grace period for the
// engine's snapshot and the journal's last fsync.
const shutdownMargin = 5 * time.Second

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// broker is a running Regent: the journal, the engine and the transports.
type broker struct {
	j       *log.Log
	e       *engine.Engine
	tcp     *tcp.Server
	http    *httpapi.Server
	httpLn  net.Listener
	httpErr chan error
}

type brokerConfig struct {
	dir               string
	tcpAddr, httpAddr string
	sync              log.SyncPolicy
	syncInterval      time.Duration
	salvage           bool
	encryptionKey     []byte
	oldKeys           [][]byte
	lostKeys          []string // fingerprints
	logger            *slog.Logger
	tcpMaxConns       int // 0: the door's default
	httpMaxConns      int
	security          security // serve_auth.go
}

func startBroker(c brokerConfig) (b *broker, err error) {
	b = &broker{httpErr: make(chan error, 1)}
	b.j, err = log.Open(log.Config{Dir: c.dir, Sync: c.sync, SyncInterval: c.syncInterval, Salvage: c.salvage, Logger: c.logger})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			b.close(5 * time.Second)
		}
	}()
	// Every message a push accepts fits one pop reply over TCP (and so over
	// HTTP, which has no frame limit).
	ecfg := engine.Config{EncryptionKey: c.encryptionKey, EncryptionOldKeys: c.oldKeys, EncryptionLostKeys: c.lostKeys,
		Logger: c.logger, MaxPopBytes: tcp.PopBytesFor(protocol.DefaultMaxFrame)}
	if b.e, err = engine.New(ecfg, b.j); err != nil {
		return b, err
	}
	stats := func() netserver.JournalStats {
		s := b.j.Stats()
		return netserver.JournalStats{
			Fsyncs: s.Fsyncs, FsyncNanosTotal: s.FsyncNanosTotal, LastFsyncNanos: s.LastFsyncNanos,
			FsyncBuckets: log.FsyncBuckets[:], FsyncHistogram: s.FsyncHistogram[:],
			Entries: s.Entries, Records: s.Records, LastBatchRecords: s.LastBatchRecords,
			BytesWritten: s.BytesWritten, DiskBytes: b.j.DiskBytes(),
		}
	}
	if b.tcp, err = tcp.New(tcp.Config{Addr: c.tcpAddr, JournalStats: stats, Logger: c.logger, MaxConns: c.tcpMaxConns,
		Auth: c.security.auth}, b.e); err != nil {
		return b, err
	}
	if err = b.tcp.Start(); err != nil {
		b.tcp = nil
		return b, err
	}
	if b.http, err = httpapi.New(httpapi.Config{Addr: c.httpAddr, JournalStats: stats, Version: version, MaxConns: c.httpMaxConns,
		TCPConnections: b.tcp.Connections, TCPHealth: b.tcp.Healthy, Logger: c.logger, Auth: c.security.auth}, b.e); err != nil {
		return b, err
	}
	if b.httpLn, err = net.Listen("tcp", c.httpAddr); err != nil {
		return b, fmt.Errorf("http: %w", err)
	}
	b.httpLn = c.security.listener(b.httpLn)
	go func() { b.httpErr <- b.http.Serve(b.httpLn) }()
	return b, nil
}

// close shuts down in order: stop taking requests and answer those in
// flight (their commits finish and their replies go out), then stop the
// engine (a snapshot) and close the journal (a final fsync).
func (b *broker) close(grace time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	var errs []error
	if b.http != nil && b.httpLn != nil {
		if err := b.http.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http: %w", err))
		}
	}
	if b.tcp != nil {
		if err := b.tcp.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("tcp: %w", err))
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

func init() {
	// Secrets: --help must not print what the environment holds.
	hiddenSettings["encryption-key"] = true
	hiddenSettings["encryption-old-keys"] = true
}
