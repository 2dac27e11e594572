package log

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// writeBenchWAL writes a WAL of about total bytes straight to segment files
// of SegmentBytes (16 MiB), in entries of entryBytes of engine-like records
// compressed as the committer would, without going through Append.
func writeBenchWAL(tb testing.TB, dir string, total, entryBytes int) int64 {
	tb.Helper()
	walDir := filepath.Join(dir, walDirName)
	if err := os.MkdirAll(walDir, 0o750); err != nil {
		tb.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	var raw []byte
	count := 0
	for len(raw) < entryBytes {
		raw = appendRecord(raw, benchRecord(r, 64))
		count++
	}
	var written int64
	index := uint64(1)
	var ebuf []byte
	for written < int64(total) {
		start := index
		var seg []byte
		for len(seg) < DefaultSegmentBytes {
			// Vary a few bytes so that no two entries are alike.
			binary.LittleEndian.PutUint64(raw[8:], index)
			ebuf = encodeEntry(ebuf, index, count, raw)
			seg = binary.AppendUvarint(seg, uint64(len(ebuf)))
			seg = append(seg, ebuf...)
			index++
		}
		if err := os.WriteFile(filepath.Join(walDir, segmentName(start)), seg, 0o640); err != nil {
			tb.Fatal(err)
		}
		written += int64(len(seg))
	}
	return written
}

// BenchmarkVerifyWAL measures what Open's full check of the WAL costs (every
// segment read, every entry's framing, CRC-32C and index checked), with the
// files in the page cache. size=1GiB runs only with REGENT_LONG=1 (it writes
// a gigabyte to the temporary directory).
func BenchmarkVerifyWAL(b *testing.B) {
	sizes := []int{64 << 20}
	if os.Getenv("REGENT_LONG") != "" {
		sizes = append(sizes, 1<<30)
	}
	for _, size := range sizes {
		b.Run(fmt.Sprintf("size=%dMiB/entry=1MiB", size>>20), func(b *testing.B) {
			dir := b.TempDir()
			n := writeBenchWAL(b, dir, size, 1<<20)
			logger := slog.New(slog.NewTextHandler(io.Discard, nil))
			b.SetBytes(n)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				holes, err := verifyWAL(dir, filepath.Join(dir, walDirName), false, logger)
				if err != nil || len(holes) != 0 {
					b.Fatal(holes, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N)*float64(1<<30)/float64(n), "ms/GiB")
		})
	}
}
