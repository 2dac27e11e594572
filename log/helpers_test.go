package log

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// logSink is a slog.Handler that keeps the records, so tests can check what
// the package warned about.
type logSink struct {
	mu   sync.Mutex
	recs []string
}

func (s *logSink) Enabled(context.Context, slog.Level) bool { return true }
func (s *logSink) WithAttrs([]slog.Attr) slog.Handler       { return s }
func (s *logSink) WithGroup(string) slog.Handler            { return s }
func (s *logSink) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	s.mu.Lock()
	s.recs = append(s.recs, b.String())
	s.mu.Unlock()
	return nil
}

// find returns the first record containing every one of subs.
func (s *logSink) find(subs ...string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
next:
	for _, r := range s.recs {
		for _, sub := range subs {
			if !strings.Contains(r, sub) {
				continue next
			}
		}
		return r, true
	}
	return "", false
}

func (s *logSink) all() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.recs, "\n")
}

// openT opens a log in dir with a capturing logger; mods adjust the config.
func openT(t testing.TB, dir string, mods ...func(*Config)) (*Log, *logSink) {
	t.Helper()
	l, sink, err := tryOpen(dir, mods...)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { l.Close() })
	return l, sink
}

func tryOpen(dir string, mods ...func(*Config)) (*Log, *logSink, error) {
	sink := &logSink{}
	cfg := Config{Dir: dir, Logger: slog.New(sink)}
	for _, m := range mods {
		m(&cfg)
	}
	l, err := Open(cfg)
	return l, sink, err
}

func withSync(p SyncPolicy) func(*Config) { return func(c *Config) { c.Sync = p } }
func withSegment(n int) func(*Config)     { return func(c *Config) { c.SegmentBytes = n } }
func withSalvage() func(*Config)          { return func(c *Config) { c.Salvage = true } }
func withMaxBatch(n int) func(*Config)    { return func(c *Config) { c.MaxBatchBytes = n } }
func withInterval(d time.Duration) func(*Config) {
	return func(c *Config) { c.Sync, c.SyncInterval = SyncInterval, d }
}

// appendWait appends rec and waits for its done.
func appendWait(t testing.TB, l *Log, rec []byte) uint64 {
	t.Helper()
	ch := make(chan error, 1)
	pos, err := l.Append(rec, func(err error) { ch <- err })
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("done: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("done not called within 10s")
	}
	return pos
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

type posRec struct {
	pos uint64
	rec string
}

// replayAll replays the whole log (after after) into a slice.
func replayAll(l *Log, after uint64) ([]posRec, error) {
	var out []posRec
	err := l.Replay(after, func(pos uint64, rec []byte) error {
		out = append(out, posRec{pos, string(rec)})
		return nil
	})
	return out, err
}

// payload makes a record of n bytes: compressible text when text is set,
// random bytes otherwise.
func payload(r *rand.Rand, n int, text bool) []byte {
	b := make([]byte, n)
	if text {
		const words = "queue partition lease ack retry dead letter consumer group offset "
		for i := range b {
			b[i] = words[(i+r.IntN(3))%len(words)]
		}
		return b
	}
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// segmentFiles lists the WAL segment files of a journal directory.
func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, walDirName))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if _, ok := segmentIndex(e.Name()); ok {
			out = append(out, filepath.Join(dir, walDirName, e.Name()))
		}
	}
	return out
}

// frames splits a segment file into its entries' frame offsets [start, end).
func frames(t testing.TB, data []byte) [][2]int {
	t.Helper()
	var out [][2]int
	for off := 0; off < len(data); {
		size, n := binary.Uvarint(data[off:])
		if n <= 0 || off+n+int(size) > len(data) {
			t.Fatalf("segment does not parse at offset %d", off)
		}
		out = append(out, [2]int{off, off + n + int(size)})
		off += n + int(size)
	}
	return out
}

func isErr(err, target error) bool { return err != nil && errors.Is(err, target) }
