package main

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/log"
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
	logger, err := newLogger(stderr, s.get("log-format"), s.get("log-level"))
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
	if c.sec, err = securityFrom(s, logger); err != nil {
		return usage(err)
	}
	o.Auth, o.TLS = c.sec.auth, c.sec.tls
	return c, exitOK, true
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
