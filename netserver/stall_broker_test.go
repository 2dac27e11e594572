package netserver_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
	"github.com/regentmq/regent/netserver/internal/testhooks"
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
	// stallCloseTimeout bounds the broker's shutdown after a run.
	stallCloseTimeout = 30 * time.Second
)

// stallTimeout is how long the watchdog lets pass without a push or an ack
// answered before it calls the broker stalled: 15 s, ten times that under
// the race detector, where 60 pushes of 1 MiB (each checksummed, compressed
// and copied under its instrumentation) took more than 15 s on a loaded
// two-core machine with nothing stuck.
var stallTimeout = testhooks.Patience(15 * time.Second)

// stallBroker is a whole broker (the journal, with fsync on every group,
// in dir; both doors on 127.0.0.1:0), the journal as the engine sees it
// (counting snapshots and truncations) and the logs' counter. It is built
// with broker.New, not brokertest.Start: runs happen in child processes
// without a *testing.T of their own, and a stalled broker must be left as
// it is, not stopped by a cleanup that would hang too.
type stallBroker struct {
	b    *broker.Broker
	j    *countingJournal
	e    *engine.Engine
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
// closed (by broker.New or Main).
func startStallBroker(dir string) (*stallBroker, error) {
	b := &stallBroker{logs: &logCounter{}}
	bb, err := broker.New(broker.Options{
		Journal: log.Config{Dir: dir, Sync: log.SyncAlways, SegmentBytes: stallSegmentBytes},
		Engine:  engine.Config{SnapshotEveryBytes: stallSnapshotBytes},
		WrapJournal: func(l *log.Log) engine.Journal {
			b.j = &countingJournal{Log: l}
			return b.j
		},
		TCPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		ShutdownTimeout: stallCloseTimeout,
		Logger:          slog.New(b.logs),
	})
	if err != nil {
		return nil, err
	}
	if err := bb.Main(); err != nil {
		return nil, err
	}
	b.b, b.e, b.url = bb, bb.Engine(), "http://"+bb.HTTPAddr().String()
	return b, nil
}

// close stops the broker (broker.Exit: the doors drain within
// stallCloseTimeout, then the engine and the journal close) and reports an
// error with the broker's goroutines still running, such as when that takes
// longer than stallCloseTimeout and broker.ShutdownMargin (a broker stuck
// inside: it is left as is).
func (b *stallBroker) close() error {
	if err := b.b.Exit(); err != nil {
		return fmt.Errorf("%w; the broker's goroutines still running:\n%s", err, regentStacks(b.marks()...))
	}
	return nil
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

// marks are the addresses of b's broker, journal and engine as they
// appear in a goroutine profile's arguments: they tell b's goroutines from
// those of a broker an earlier run left stuck. (The doors' servers are the
// broker's own and have no accessor: a door goroutine is kept when it
// names the engine, as every request handler that waits on it does.)
func (b *stallBroker) marks() []string {
	return []string{fmt.Sprintf("%p", b.b), fmt.Sprintf("%p", b.j.Log), fmt.Sprintf("%p", b.e)}
}

// regentStacks is the goroutine profile (debug=2) trimmed to the goroutines
// inside the engine, the journal, the doors or the broker (with marks, only
// those whose frames name one of them): identical stacks are told once with their
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
			!strings.Contains(g, "regentmq/regent/netserver") && !strings.Contains(g, "regentmq/regent/broker.") {
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
