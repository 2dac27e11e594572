package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
)

// cmdServe runs a broker (package broker builds, starts and stops it) until
// SIGINT or SIGTERM, or until a door dies. Its settings (and --pprof's
// listener) are in serve_settings.go, its security in serve_auth.go, its
// cluster in serve_cluster.go, its descriptor limit in fds.go.
func cmdServe(args []string, stdout, stderr io.Writer) int {
	c, code, ok := parseServe(args, stderr)
	if !ok {
		return code
	}
	logger := c.opts.Logger
	// The soft limit makes the collector work harder as the heap nears it,
	// instead of letting it grow to twice the live set.
	debug.SetMemoryLimit(c.memoryLimit)
	nofile, err := raiseNoFile()
	if err != nil {
		fmt.Fprintln(stderr, "regent serve:", err)
		return exitFailure
	}
	if c.opts.TCPMaxConns, c.opts.HTTPMaxConns, err = connCaps(nofile); err != nil {
		fmt.Fprintln(stderr, "regent serve:", err)
		return exitFailure
	}
	logger.Info("descriptors", "limit", nofile, "tcp_max_conns", c.opts.TCPMaxConns, "http_max_conns", c.opts.HTTPMaxConns)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := broker.New(c.opts)
	if err == nil {
		err = b.Main()
	}
	if err != nil {
		logger.Error("cannot start", "err", err)
		if errors.Is(err, log.ErrCorrupt) && !c.opts.Journal.Salvage {
			fmt.Fprintln(stderr, "regent serve: the journal is damaged. Keep a copy of the data directory, then --salvage starts by skipping the damaged entries: every other entry is kept, the messages lost are logged (queue, partition, offsets) and passed over by consumers.")
		}
		if errors.Is(err, engine.ErrEncryption) {
			fmt.Fprintln(stderr, keysHint)
		}
		return exitFailure
	}
	pprofAddr := ""
	if c.pprof != "" {
		ln, err := listenPprof(c.pprof)
		if err != nil {
			logger.Error("cannot serve --pprof", "err", err)
			_ = b.Exit()
			fmt.Fprintln(stderr, "regent serve: --pprof:", err)
			return exitFailure
		}
		defer ln.Close()
		pprofAddr = ln.Addr().String()
	}
	if err := c.banner(stdout, b, pprofAddr); err != nil {
		logger.Warn("cannot print the banner", "err", err)
	}
	failed := false
	select {
	case <-ctx.Done():
	case err := <-b.Died():
		// A broker with one door dead does not limp on: it stops, says why,
		// and exits non-zero for its supervisor to restart it.
		var de *broker.DoorError
		if errors.As(err, &de) && de.Door == "http" {
			logger.Error("http server stopped", "err", err)
		} else {
			logger.Error("stopping: a door died", "err", err)
		}
		failed = true
	}
	stop() // a second signal now kills the process the default way
	logger.Info("shutting down: finishing requests in flight")
	// Exit returns within --shutdown-timeout and shutdownMargin, even with
	// the disk stuck (an error then).
	if err := b.Exit(); err != nil {
		logger.Error("shutdown", "err", err)
		return exitFailure
	}
	logger.Info("stopped")
	if failed {
		return exitFailure
	}
	return exitOK
}
