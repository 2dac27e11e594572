package log

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchRecord makes a record like the engine's push of n messages of 128
// bytes: JSON-ish, partly repetitive, with varying ids.
func benchRecord(r *rand.Rand, n int) []byte {
	var b []byte
	for i := 0; i < n; i++ {
		start := len(b)
		b = fmt.Appendf(b, `{"id":"%016x%016x","queue":"orders","partition":%d,"data":{"n":%d,"s":"`,
			r.Uint64(), r.Uint64(), r.IntN(64), r.IntN(1e6))
		for len(b)-start < 126 {
			b = append(b, "abcdefghijklmnopqrstuvwxyz"[r.IntN(26)])
		}
		b = append(b, `"}`...)
		b = b[:start+128]
	}
	return b
}

// BenchmarkAppend measures group commit: writers goroutines each append a
// record and wait for its done, b.N records in all.
func BenchmarkAppend(b *testing.B) {
	for _, policy := range []SyncPolicy{SyncAlways, SyncInterval, SyncNone} {
		for _, writers := range []int{1, 16, 64} {
			for _, msgs := range []int{1, 100} {
				size := msgs * 128
				b.Run(fmt.Sprintf("sync=%s/writers=%d/rec=%d", policy, writers, size), func(b *testing.B) {
					benchAppend(b, policy, writers, msgs)
				})
			}
		}
	}
}

func benchAppend(b *testing.B, policy SyncPolicy, writers, msgs int) {
	l, err := Open(Config{Dir: b.TempDir(), Sync: policy, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	r := rand.New(rand.NewPCG(1, 1))
	recs := make([][]byte, 16)
	for i := range recs {
		recs[i] = benchRecord(r, msgs)
	}
	size := len(recs[0])
	b.SetBytes(int64(size))
	b.ReportAllocs()
	var next atomic.Int64
	var wg sync.WaitGroup
	before := l.Stats()
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch := make(chan error, 1)
			done := func(err error) { ch <- err }
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				if _, err := l.Append(recs[i%int64(len(recs))], done); err != nil {
					b.Error(err)
					return
				}
				if err := <-ch; err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	st := l.Stats()
	entries := st.Entries - before.Entries
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(b.N)*float64(size)/elapsed.Seconds(), "bytes/s")
	if entries > 0 {
		b.ReportMetric(float64(st.Records-before.Records)/float64(entries), "recs/batch")
	}
	if w := st.BytesWritten - before.BytesWritten; w > 0 {
		b.ReportMetric(float64(st.BytesRaw-before.BytesRaw)/float64(w), "ratio")
	}
	if n := st.Fsyncs - before.Fsyncs; n > 0 {
		b.ReportMetric(float64(st.FsyncNanosTotal-before.FsyncNanosTotal)/float64(n)/1e3, "fsync-µs")
	}
}

// BenchmarkReplay measures reading the journal back (recovery).
func BenchmarkReplay(b *testing.B) {
	dir := b.TempDir()
	l, err := Open(Config{Dir: dir, Sync: SyncNone, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	r := rand.New(rand.NewPCG(2, 2))
	rec := benchRecord(r, 10)
	const n = 100000
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		if _, err := l.Append(rec, func(error) { wg.Done() }); err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
	b.SetBytes(int64(n * len(rec)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		count := 0
		if err := l.Replay(0, func(uint64, []byte) error { count++; return nil }); err != nil || count != n {
			b.Fatalf("replayed %d, %v", count, err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
