package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
)

var serveSettings = []setting{
	{"data", "REGENT_DATA", "./regent-data", "data directory (journal, snapshots)"},
	{"sync", "REGENT_SYNC", "always", "fsync policy: always, interval:10ms, or none"},
	{"log-format", "REGENT_LOG_FORMAT", "text", "log format: text or json"},
	{"log-level", "REGENT_LOG_LEVEL", "info", "log level: debug, info, warn or error"},
}

func cmdServe(args []string, stdout, stderr io.Writer) int {
	s := newSettings("regent serve", stderr, serveSettings)
	s.fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: regent serve [flags]\n\nRuns the broker until SIGINT or SIGTERM (a second signal exits at once).\n\n")
		s.fs.PrintDefaults()
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := startBroker(brokerConfig{dir: s.get("data"), sync: pol, syncInterval: interval, logger: logger})
	if err != nil {
		logger.Error("cannot start", "err", err)
		return exitFailure
	}
	abs, _ := filepath.Abs(s.get("data"))
	fmt.Fprintf(stdout, "regent %s: data in %s (sync %s)\n", version, abs, s.get("sync"))
	<-ctx.Done()
	stop() // a second signal now kills the process the default way
	logger.Info("shutting down")
	if err := b.close(); err != nil {
		logger.Error("shutdown", "err", err)
		return exitFailure
	}
	return exitOK
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

// broker is a running Regent: the journal, the engine and the transports.
type broker struct {
	j *log.Log
	e *engine.Engine
}

type brokerConfig struct {
	dir          string
	sync         log.SyncPolicy
	syncInterval time.Duration
	logger       *slog.Logger
}

func startBroker(c brokerConfig) (*broker, error) {
	j, err := log.Open(log.Config{Dir: c.dir, Sync: c.sync, SyncInterval: c.syncInterval, Logger: c.logger})
	if err != nil {
		return nil, err
	}
	e, err := engine.New(engine.Config{Logger: c.logger}, j)
	if err != nil {
		j.Close()
		return nil, err
	}
	return &broker{j: j, e: e}, nil
}

// close stops the engine and closes the journal (which writes and syncs
// whatever it holds).
func (b *broker) close() error {
	err := b.e.Close()
	if jerr := b.j.Close(); err == nil {
		err = jerr
	}
	return err
}
