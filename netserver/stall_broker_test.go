package netserver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
	"github.com/regentmq/regent/netserver/httpapi"
	"github.com/regentmq/regent/netserver/tcp"
)

// The stall tests (stall_test.go, stall_reliability_test.go) push large
// messages concurrently into a whole broker in-process and watch that every
// push and ack is answered. This file holds their broker, tuned so that
// snapshots and journal compaction happen during a run, and the watchdog
// that reports a stall with the goroutines of the broker.

const (
	// stallSegmentBytes is the journal's segment size: small, so that a run
	// fills several segments that snapshots drop or compact, and yet twice
	// the journal's 4 MiB group, so that compacting the oldest segment of
	// 1 MiB messages copies more than one group can take in a row.
	stallSegmentBytes = 8 << 20
	// stallSnapshotBytes makes the engine snapshot every 8 MiB journaled.
	stallSnapshotBytes = 8 << 20
	// stallTimeout is how long the watchdog lets pass without a push or an
	// ack answered before it calls the broker stalled.
	stallTimeout = 15 * time.Second
	// stallCloseTimeout bounds the broker's shutdown after a run.
	stallCloseTimeout = 30 * time.Second
)

// stallBroker is a whole broker: the journal (fsync on every group) in dir,
// the engine, the TCP server and the HTTP bridge, both on 127.0.0.1:0.
type stallBroker struct {
	j    *countingJournal
	e    *engine.Engine
	tcp  *tcp.Server
	http *httpapi.Server
	url  string
	logs *logCounter
}

// countingJournal is the real journal, counting the snapshots written and
// the truncations of old segments that followed them. Every other method
// (and any the Journal interface gains) is the journal's own.
type countingJournal struct {
	*log.Log
	snapshots   atomic.Int64
	truncations atomic.Int64
}

func (c *countingJournal) WriteSnapshot(pos uint64, data []byte) error {
	err := c.Log.WriteSnapshot(pos, data)
	if err == nil {
		c.snapshots.Add(1)
	}
	return err
}

func (c *countingJournal) Release(covered, live uint64) error {
	first := c.Log.FirstIndex()
	err := c.Log.Release(covered, live)
	if err == nil && c.Log.FirstIndex() != first {
		c.truncations.Add(1)
	}
	return err
}

// logCounter is the broker's logger: it keeps the error lines and counts
// the records that journal compaction copied forward (the engine logs
// "journal compaction: ..." with a records attribute), and drops the rest.
type logCounter struct {
	moved atomic.Int64
	mu    sync.Mutex
	errs  []string
}

func (h *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCounter) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logCounter) WithGroup(string) slog.Handler            { return h }

func (h *logCounter) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "journal compaction") {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "records" && a.Value.Kind() == slog.KindInt64 {
				h.moved.Add(a.Value.Int64())
			}
			return true
		})
	}
	if r.Level >= slog.LevelError {
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
			return true
		})
		h.mu.Lock()
		if len(h.errs) < 20 {
			h.errs = append(h.errs, b.String())
		}
		h.mu.Unlock()
	}
	return nil
}

func (h *logCounter) errors() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.errs...)
}

// startStallBroker starts a broker on dir. On error, what was started is
// closed.
func startStallBroker(dir string) (b *stallBroker, err error) {
	b = &stallBroker{logs: &logCounter{}}
	logger := slog.New(b.logs)
	l, err := log.Open(log.Config{Dir: dir, Sync: log.SyncAlways, SegmentBytes: stallSegmentBytes, Logger: logger})
	if err != nil {
		return nil, err
	}
	b.j = &countingJournal{Log: l}
	defer func() {
		if err != nil {
			b.close(5 * time.Second)
		}
	}()
	if b.e, err = engine.New(engine.Config{SnapshotEveryBytes: stallSnapshotBytes, Logger: logger}, b.j); err != nil {
		return b, err
	}
	if b.tcp, err = tcp.New(tcp.Config{Addr: "127.0.0.1:0", Logger: logger}, b.e); err != nil {
		return b, err
	}
	if err = b.tcp.Start(); err != nil {
		b.tcp = nil
		return b, err
	}
	if b.http, err = httpapi.New(httpapi.Config{Addr: "127.0.0.1:0", Logger: logger}, b.e); err != nil {
		return b, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.http = nil
		return b, err
	}
	b.url = "http://" + ln.Addr().String()
	go b.http.Serve(ln)
	return b, nil
}

// close shuts the broker down in serve's order and reports an error if
// that takes longer than timeout (a broker stuck inside: it is left as is).
func (b *stallBroker) close(timeout time.Duration) error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		var errs []error
		if b.http != nil {
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
				errs = append(errs, fmt.Errorf("engine: %w", err))
			}
		}
		if err := b.j.Close(); err != nil {
			errs = append(errs, fmt.Errorf("journal: %w", err))
		}
		done <- errors.Join(errs...)
	}()
	t := time.NewTimer(timeout + 5*time.Second)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("the broker did not close within %v:\n%s", timeout, regentStacks(b.marks()...))
	}
}

// watchdog calls a run stalled when nothing it waits for was answered for
// stallTimeout: it then takes the broker's goroutines and cancels the run.
type watchdog struct {
	last    atomic.Int64 // unix nanoseconds of the latest answer
	stalled atomic.Bool
	dump    string // the trimmed goroutine dump, set before stop closes
	stop    chan struct{}
	stopped chan struct{}
}

// startWatchdog watches a run on b; cancel ends the run.
func startWatchdog(b *stallBroker, cancel context.CancelFunc) *watchdog {
	w := &watchdog{stop: make(chan struct{}), stopped: make(chan struct{})}
	w.progress()
	go func() {
		defer close(w.stopped)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
				if time.Since(time.Unix(0, w.last.Load())) < stallTimeout {
					continue
				}
				w.dump = regentStacks(b.marks()...)
				if f := os.Getenv("REGENT_STALL_DUMP"); f != "" {
					// The whole dump, untrimmed, for whoever asked for it.
					var full bytes.Buffer
					pprof.Lookup("goroutine").WriteTo(&full, 2)
					os.WriteFile(f, full.Bytes(), 0o644)
				}
				w.stalled.Store(true)
				cancel()
				return
			}
		}
	}()
	return w
}

// progress notes an answer: a push queued or an ack applied.
func (w *watchdog) progress() { w.last.Store(time.Now().UnixNano()) }

// finish stops the watchdog and reports whether it found a stall.
func (w *watchdog) finish() bool {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.stopped
	return w.stalled.Load()
}

// marks are the addresses of b's journal, engine and servers as they
// appear in a goroutine profile's arguments: they tell b's goroutines from
// those of a broker an earlier run left stuck.
func (b *stallBroker) marks() []string {
	m := []string{fmt.Sprintf("%p", b.j.Log)}
	if b.e != nil {
		m = append(m, fmt.Sprintf("%p", b.e))
	}
	if b.tcp != nil {
		m = append(m, fmt.Sprintf("%p", b.tcp))
	}
	if b.http != nil {
		m = append(m, fmt.Sprintf("%p", b.http))
	}
	return m
}

// regentStacks is the goroutine profile (debug=2) trimmed to the goroutines
// inside the engine, the journal or the servers (with marks, only those
// whose frames name one of them): identical stacks are told once with their
// count, each frame as function and file:line, runtime internals left out
// except channel and lock waits. A lock's address is kept, so that the
// goroutines waiting for the same lock can be seen.
func regentStacks(marks ...string) string {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 2); err != nil {
		return "goroutine profile: " + err.Error()
	}
	return trimStacks(buf.String(), marks)
}

func trimStacks(dump string, marks []string) string {
	type stack struct {
		state string
		text  string
		n     int
	}
	var order []*stack
	seen := map[string]*stack{}
	for _, g := range strings.Split(dump, "\n\n") {
		if !strings.Contains(g, "regentmq/regent/engine.") && !strings.Contains(g, "regentmq/regent/log.") &&
			!strings.Contains(g, "regentmq/regent/netserver.") {
			continue
		}
		if len(marks) > 0 && !containsAny(g, marks) {
			continue
		}
		lines := strings.Split(strings.TrimSpace(g), "\n")
		state := lines[0]
		if i, j := strings.IndexByte(state, '['), strings.IndexByte(state, ']'); i >= 0 && j > i {
			state = state[i+1 : j]
			if k := strings.IndexByte(state, ','); k >= 0 {
				state = state[:k] // drop "N minutes"
			}
		}
		var b strings.Builder
		for i := 1; i+1 < len(lines); i += 2 {
			fn, loc := lines[i], strings.TrimSpace(lines[i+1])
			if !keepFrame(fn) {
				continue
			}
			if strings.HasSuffix(fn, ")") && !strings.Contains(fn, "Mutex).lockSlow(") && !strings.Contains(fn, "RWMutex).RLock(") {
				if k := strings.LastIndexByte(fn, '('); k > 0 {
					fn = fn[:k]
				}
			}
			if k := strings.LastIndex(loc, " +0x"); k >= 0 {
				loc = loc[:k]
			}
			fmt.Fprintf(&b, "    %s (%s)\n", strings.ReplaceAll(fn, "github.com/regentmq/regent/", ""), filepath.Base(loc))
		}
		key := state + "\n" + b.String()
		if s := seen[key]; s != nil {
			s.n++
			continue
		}
		s := &stack{state: state, text: b.String(), n: 1}
		seen[key] = s
		order = append(order, s)
	}
	var out strings.Builder
	for _, s := range order {
		fmt.Fprintf(&out, "%d goroutine(s) [%s]:\n%s", s.n, s.state, s.text)
	}
	return out.String()
}

// keepFrame tells the frames worth reading in a stall: the broker's own,
// lock and channel waits, and where the goroutine was started.
func keepFrame(fn string) bool {
	for _, p := range []string{"github.com/regentmq/regent/", "sync.", "internal/sync.", "runtime.chansend",
		"runtime.chanrecv", "runtime.selectgo", "created by "} {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
