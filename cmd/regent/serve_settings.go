package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/log"
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
	{"max-message", "REGENT_MAX_MESSAGE", "", fmt.Sprintf("the largest message payload a push accepts, in bytes or with a unit (512KiB, 1MiB, 1MB); default: the largest a pop reply can carry, --max-frame less a message's names and fields (%d bytes with the default frame)", broker.MaxPayloadFor(0))},
	{"max-frame", "REGENT_MAX_FRAME", "16MiB", "the largest binary-protocol frame, header included: a request (a push batch, a transaction) and a pop reply (cut to fit); from 4KiB to 16MiB, the most the Go client reads"},
	{"max-body", "REGENT_MAX_BODY", "64MiB", "the largest HTTP request body (a larger one is refused with 413 before it is read)"},
	{"max-bodies-in-flight", "REGENT_MAX_BODIES_IN_FLIGHT", "", "request bytes held at once, from their arrival until their request is answered, across both doors: HTTP bodies (one that does not fit waits a second, then gets 503) and binary-protocol frames of more than 64KiB (one that does not fit is answered overloaded at once, and clients send it again); at least --max-body; default: a quarter of --memory-limit, or --max-body when that is more"},
	{"memory-limit", "REGENT_MEMORY_LIMIT", "128MiB", "the memory the process aims to stay within (at least 32MiB), in bytes or with a unit (64MiB, 1GiB): the Go runtime's soft limit (as GOMEMLIMIT); a sixteenth of it for the cache of recent messages' payloads (a consumer behind the cache reads from the journal), a sixteenth for journal entries decoded for such reads, a quarter for records waiting for the disk (past it pushes get overloaded), and by default a quarter for requests on their way in (HTTP bodies, binary-protocol frames of more than 64KiB)"},
	{"pprof", "REGENT_PPROF", "", "an address (127.0.0.1:6060) where Go's profiles are served, under /debug/pprof/ (heap, CPU, goroutines), for go tool pprof; off when empty. Anyone who reaches it can read the process's memory layout: keep it on a loopback or private address"},
	{"json", "", "false", "for scripts and log collectors: what serve prints at start is one JSON object on stdout, and the log is JSON unless --log-format says otherwise"},
	{"log-format", "REGENT_LOG_FORMAT", "text", "log format: text or json"},
	{"log-level", "REGENT_LOG_LEVEL", "info", "log level: debug, info, warn or error"},
	{"shutdown-timeout", "REGENT_SHUTDOWN_TIMEOUT", "30s", "how long a stop may take: requests in flight are answered within it, and past it the process exits anyway (status 1), even with its disk stuck"},
	{"unchecked-acks", "REGENT_UNCHECKED_ACKS", "false", "true: take an ack that names no lease for any message in flight for its group, whoever holds it, as Queen does (for clients moving from Queen; a worker whose lease expired can then ack a message now leased to another); false: such an ack is refused (lease_required)"},
}

func init() {
	// Secrets: --help must not print what the environment holds.
	hiddenSettings["encryption-key"] = true
	hiddenSettings["encryption-old-keys"] = true
}

// shutdownMargin is what a stop may take past --shutdown-timeout for the
// engine's last snapshot and the journal's final fsync.
const shutdownMargin = broker.ShutdownMargin

// serveConfig is what serve's settings ask for.
type serveConfig struct {
	opts broker.Options // the logger, journal, engine, doors and security
	sec  security       // serve_auth.go
	sync string         // as given, for the banner
	json bool           // the banner as JSON
	// memoryLimit is the process's soft memory limit (debug.SetMemoryLimit),
	// which serve sets before it starts the broker.
	memoryLimit int64
	// pprof is where Go's profiles are served (--pprof), or "".
	pprof string
}

// parseServe reads serve's flags and environment. When ok is false serve
// exits with code, having said why on stderr (or printed --help).
func parseServe(args []string, stderr io.Writer) (c serveConfig, code int, ok bool) {
	s := newSettings("regent serve", stderr, serveSettings)
	// --help prints the whole usage; a mistake, the flag package's line and
	// where to find the rest.
	s.fs.Usage = func() {}
	if err := s.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "Usage: regent serve [flags]\n\nRuns the broker until SIGINT or SIGTERM (a second signal exits at once).\n\n")
			s.fs.PrintDefaults()
			fmt.Fprint(stderr, queenEnvHelp)
			return c, exitOK, false
		}
		fmt.Fprintln(stderr, "Usage: regent serve [flags] (regent serve --help for more)")
		return c, exitUsage, false
	}
	usage := func(msg ...any) (serveConfig, int, bool) {
		fmt.Fprintln(stderr, append([]any{"regent serve:"}, msg...)...)
		return c, exitUsage, false
	}
	if s.fs.NArg() > 0 {
		return usage(fmt.Sprintf("unexpected argument %q (serve takes flags only: regent serve --help)", s.fs.Arg(0)))
	}
	c.json = s.get("json") == "true"
	format := s.get("log-format")
	if c.json && !s.given("log-format") {
		format = "json"
	}
	logger, err := newLogger(stderr, format, s.get("log-level"))
	if err != nil {
		return usage(err)
	}
	o := &c.opts
	o.Logger, o.Version, o.TCPAddr, o.HTTPAddr = logger, version, s.get("tcp"), s.get("http")
	c.sync = s.get("sync")
	o.Journal.Dir = s.get("data")
	if o.Journal.Sync, o.Journal.SyncInterval, err = log.ParseSync(c.sync); err != nil {
		return usage("--sync:", err)
	}
	if k := s.get("encryption-key"); k != "" {
		if o.Engine.EncryptionKey, err = hex.DecodeString(k); err != nil || len(o.Engine.EncryptionKey) != 32 {
			return usage("--encryption-key: want 64 hex characters (32 bytes)")
		}
	}
	if o.Engine.EncryptionOldKeys, err = parseKeys(s.get("encryption-old-keys")); err != nil {
		return usage("--encryption-old-keys:", err)
	}
	o.Engine.EncryptionLostKeys = splitList(s.get("encryption-lost-keys"))
	if o.Journal.Salvage, err = strconv.ParseBool(s.get("salvage")); err != nil {
		return usage("--salvage: want true or false")
	}
	if o.ShutdownTimeout, err = time.ParseDuration(s.get("shutdown-timeout")); err != nil || o.ShutdownTimeout <= 0 {
		return usage("--shutdown-timeout: want a positive duration such as 30s")
	}
	if o.Engine.UncheckedAcks, err = strconv.ParseBool(s.get("unchecked-acks")); err != nil {
		return usage("--unchecked-acks: want true or false")
	}
	if c.memoryLimit, err = parseLimits(s, o); err != nil {
		return usage(err)
	}
	c.pprof = s.get("pprof")
	if c.sec, err = securityFrom(s, logger); err != nil {
		return usage(err)
	}
	o.Auth, o.TLS = c.sec.auth, c.sec.tls
	if o.Cluster, err = clusterFrom(s, o.Journal.Dir); err != nil {
		return usage(err)
	}
	return c, exitOK, true
}

// The memory limit: the least accepted, and the shares of it (1/n) that
// what the broker holds gets: the cache of recent payloads, the journal's
// entries decoded for reads, the records waiting for the disk, and (unless
// --max-bodies-in-flight says otherwise) requests on their way in (HTTP
// bodies, large binary-protocol frames). The first two
// are full whenever there is traffic; the last two only while the disk or
// the clients are slow. The rest is for what no share bounds (the journal's
// tail segment, the compressor, connections' buffers, the engine's state)
// and the garbage collector's slack, which is as large as the live heap:
// the caches' shares are small so that the heap the collector lets grow
// stays inside the limit (measured in the README's Memory section).
const (
	minMemoryLimit = 32 << 20
	cacheShare     = 16
	readCacheShare = 16
	queuedShare    = 4
	bodiesShare    = 4
)

// parseLimits reads the memory limit and the largest message, frame and
// HTTP bodies.
func parseLimits(s *settings, o *broker.Options) (memoryLimit int64, err error) {
	frame, err := parseSize(s.get("max-frame"))
	if err != nil || frame < protocol.MinMaxFrame || frame > protocol.DefaultMaxFrame {
		return 0, fmt.Errorf("--max-frame %q: want a size from 4KiB to 16MiB", s.get("max-frame"))
	}
	o.MaxFrameBytes = int(frame)
	most := broker.MaxPayloadFor(o.MaxFrameBytes)
	if v := s.get("max-message"); v != "" {
		m, err := parseSize(v)
		if err != nil || m < 1 {
			return 0, fmt.Errorf("--max-message %q: want a size such as 1MiB", v)
		}
		if m > int64(most) {
			return 0, fmt.Errorf("--max-message %s is more than a pop reply of --max-frame %s can carry (%d bytes): such a message could never be popped", v, s.get("max-frame"), most)
		}
		o.Engine.MaxPayloadBytes = int(m)
	}
	mem, err := parseSize(s.get("memory-limit"))
	if err != nil || mem < minMemoryLimit {
		return 0, fmt.Errorf("--memory-limit %q: want a size of at least 32MiB", s.get("memory-limit"))
	}
	o.Engine.CacheBytes = mem / cacheShare
	o.Journal.ReadCacheBytes = int(mem / readCacheShare)
	o.Journal.MaxQueuedBytes = int(mem / queuedShare)
	if o.MaxBodyBytes, err = parseSize(s.get("max-body")); err != nil || o.MaxBodyBytes < 1<<10 {
		return 0, fmt.Errorf("--max-body %q: want a size of at least 1KiB", s.get("max-body"))
	}
	if v := s.get("max-bodies-in-flight"); v == "" {
		o.MaxBodyBytesInFlight = max(mem/bodiesShare, o.MaxBodyBytes)
	} else if o.MaxBodyBytesInFlight, err = parseSize(v); err != nil || o.MaxBodyBytesInFlight < o.MaxBodyBytes {
		return 0, fmt.Errorf("--max-bodies-in-flight %q: want a size of at least --max-body (%s)", v, s.get("max-body"))
	}
	return mem, nil
}

// sizeUnits are the units parseSize reads: binary (KiB, MiB, GiB) and
// decimal (KB, MB, GB).
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1},
}

// parseSize reads a byte count: digits, optionally followed by a unit
// (1048576, 1MiB, 512KiB, 1MB). At most 1 TiB.
func parseSize(v string) (int64, error) {
	num, mult := strings.TrimSpace(v), int64(1)
	for _, u := range sizeUnits {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<40)/mult {
		return 0, fmt.Errorf("size %q: want a number of bytes, optionally with a unit (KiB, MiB, GiB, KB, MB, GB)", v)
	}
	return n * mult, nil
}

// banner is what serve prints once its doors are open: a few lines for a
// person, or with --json one JSON object.
func (c *serveConfig) banner(w io.Writer, b *broker.Broker, pprofAddr string) error {
	dir, err := filepath.Abs(c.opts.Journal.Dir)
	if err != nil {
		dir = c.opts.Journal.Dir
	}
	httpAddr := "not served (a broker of a replicated cluster)"
	if a := b.HTTPAddr(); a != nil {
		httpAddr = a.String()
	}
	if c.json {
		return json.NewEncoder(w).Encode(struct {
			Version              string `json:"version"`
			Data                 string `json:"data"`
			Sync                 string `json:"sync"`
			TCP                  string `json:"tcp"`
			HTTP                 string `json:"http"`
			MaxMessageBytes      int    `json:"maxMessageBytes"`
			MaxFrameBytes        int    `json:"maxFrameBytes"`
			MaxBodyBytes         int64  `json:"maxBodyBytes"`
			MaxBodiesInFlight    int64  `json:"maxBodiesInFlightBytes"`
			Auth                 bool   `json:"auth"`
			TLS                  bool   `json:"tls"`
			MetricsNeedAuthToken bool   `json:"metricsAuth"`
			UncheckedAcks        bool   `json:"uncheckedAcks"`
			MemoryLimit          int64  `json:"memoryLimitBytes"`
			CacheBytes           int64  `json:"cacheBytes"`
			Pprof                string `json:"pprof,omitempty"`
		}{version, dir, c.sync, b.TCPAddr().String(), httpAddr,
			b.MaxPayloadBytes(), c.opts.MaxFrameBytes, c.opts.MaxBodyBytes, c.opts.MaxBodyBytesInFlight,
			c.sec.auth.Enabled, c.sec.tls != nil, c.sec.auth.Enabled && c.sec.auth.MetricsAuth, b.UncheckedAcks(),
			c.memoryLimit, c.opts.Engine.CacheBytes, pprofAddr})
	}
	_, err = fmt.Fprintf(w, "regent %s\n  data    %s (sync %s)\n  tcp     %s (binary protocol)\n  http    %s (Queen HTTP API v1, /metrics, /health)\n"+
		"  memory  %s (cache of recent payloads %s)\n"+
		"  limits  message %s, frame %s, HTTP body %s (%s in flight)\n%s%s%s%s",
		version, dir, c.sync, b.TCPAddr(), httpAddr, sizeText(c.memoryLimit), sizeText(c.opts.Engine.CacheBytes),
		sizeText(int64(b.MaxPayloadBytes())), sizeText(int64(c.opts.MaxFrameBytes)),
		sizeText(c.opts.MaxBodyBytes), sizeText(c.opts.MaxBodyBytesInFlight), c.sec.banner(), acksBanner(b.UncheckedAcks()), pprofBanner(pprofAddr), clusterBanner(c.opts.Cluster))
	return err
}

// pprofBanner is what serve prints of --pprof at start.
func pprofBanner(addr string) string {
	if addr == "" {
		return ""
	}
	return "  pprof   http://" + addr + "/debug/pprof/ (go tool pprof http://" + addr + "/debug/pprof/heap)\n"
}

// acksBanner is what serve prints of its ack check at start.
func acksBanner(unchecked bool) string {
	if unchecked {
		return "  acks    UNCHECKED (--unchecked-acks): an ack naming no lease is taken for any message in flight for its group, whoever holds it (as Queen)\n"
	}
	return "  acks    checked: an ack names the lease its pop returned\n"
}

// sizeText writes a byte count in the largest binary unit that divides it
// (16 MiB), or in bytes.
func sizeText(n int64) string {
	for _, u := range []struct {
		name string
		mult int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + " " + u.name
		}
	}
	return strconv.FormatInt(n, 10) + " bytes"
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

// listenPprof serves Go's profiles (net/http/pprof) on addr until the
// listener is closed. They get their own listener and mux: nothing of them
// reaches the HTTP door, and the HTTP door's auth does not guard them.
func listenPprof(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() { _ = (&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}).Serve(ln) }()
	return ln, nil
}
