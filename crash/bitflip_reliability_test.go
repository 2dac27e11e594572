package crash

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
)

// journalImage is every file of a journal directory (but the lock).
type journalImage struct {
	paths []string // relative
	data  [][]byte
	bits  int64
}

func readImage(t *testing.T, dir string) *journalImage {
	t.Helper()
	img := &journalImage{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "LOCK" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		img.paths = append(img.paths, rel)
		img.data = append(img.data, b)
		img.bits += int64(len(b)) * 8
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// write puts the image in dir with one bit flipped (bit < img.bits), and
// returns the file it hit.
func (img *journalImage) write(t *testing.T, dir string, bit int64) string {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	hit := ""
	for i, rel := range img.paths {
		b := img.data[i]
		if bit >= 0 && bit < int64(len(b))*8 {
			b = append([]byte(nil), b...)
			b[bit/8] ^= 1 << (bit % 8)
			hit = rel
		}
		bit -= int64(len(img.data[i])) * 8
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	return hit
}

// selfChecked makes a payload that carries a CRC of itself.
func selfChecked(key string, r *rand.Rand) []byte {
	var b strings.Builder
	b.WriteString(key + "|")
	for n := 20 + r.IntN(120); n > 0; n-- {
		b.WriteByte(byte('a' + r.IntN(26)))
	}
	return fmt.Appendf(nil, "%s|%08x", b.String(), crc32.ChecksumIEEE([]byte(b.String())))
}

var quiet = slog.New(slog.NewTextHandler(discard{}, nil))

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// buildFlipJournal makes a journal with several segments, a snapshot,
// records after it (pushes, acks of every kind, dead letters), left as a
// crash leaves it (the engine is not closed). It returns the payloads.
func buildFlipJournal(t *testing.T, dir string) map[string]bool {
	t.Helper()
	j, err := log.Open(log.Config{Dir: dir, SegmentBytes: 8 << 10, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{NoTicker: true, SnapshotEveryBytes: -1, Logger: quiet}, j)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	o := engine.DefaultQueueOptions()
	o.RetryLimit, o.RetryDelay = 1, 0
	if _, err := e.Configure(context.Background(), "bits", o); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 7))
	pushed := map[string]bool{}
	n := 0
	round := func(msgs int) {
		for k := 0; k < msgs; k += 10 {
			var items []engine.PushItem
			for i := 0; i < 10; i++ {
				pl := selfChecked(fmt.Sprint("m", n), r)
				n++
				pushed[string(pl)] = true
				items = append(items, engine.PushItem{Queue: "bits", Partition: fmt.Sprint("p", n%3), TransactionID: fmt.Sprint("m", n), Payload: pl})
			}
			if _, err := e.Push(ctx, items); err != nil {
				t.Fatal(err)
			}
		}
		for {
			ms, err := e.Pop(ctx, engine.PopRequest{Queue: "bits", Group: "g", Batch: 7})
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) == 0 {
				return
			}
			var acks []engine.AckItem
			for i, m := range ms {
				st := engine.Completed
				switch (i + int(m.Offset)) % 9 {
				case 3:
					st = engine.DLQ
				case 5:
					st = engine.FailedAck
				}
				acks = append(acks, engine.AckItem{PartitionID: m.PartitionID, HasOffset: true, Offset: m.Offset, LeaseID: m.LeaseID, Group: "g", Status: st, Error: "flip"})
			}
			if _, err := e.Ack(ctx, acks); err != nil {
				t.Fatal(err)
			}
		}
	}
	round(200)
	if err := e.Snapshot(); err != nil {
		t.Fatal(err)
	}
	round(100)
	if err := j.Close(); err != nil { // no e.Close: no snapshot at the end
		t.Fatal(err)
	}
	return pushed
}

// flipOutcome is what one flipped bit led to.
type flipOutcome int

const (
	flipRefusedOpen  flipOutcome = iota // Open or recovery refused
	flipReadErrors                      // started; some reads refused
	flipAllDelivered                    // started; everything read back
)

// TestBitFlipsNeverDeliverCorruptPayloads flips one random bit of a
// journal's files (segments and snapshots) per round, then opens it
// (alternately with Salvage) and reads every message and dead-letter entry
// back through a fresh group with a tiny cache, so reads go to the journal.
// A corrupt payload is never delivered: the broker refuses to start, or
// refuses the read, or delivers exactly what was pushed. A few hundred
// rounds by default, 10,000 with REGENT_LONG=1 (or REGENT_BITFLIPS).
func TestBitFlipsNeverDeliverCorruptPayloads(t *testing.T) {
	rounds := 200
	if long() {
		rounds = 10000
	}
	if v := os.Getenv("REGENT_BITFLIPS"); v != "" {
		fmt.Sscan(v, &rounds)
	}
	base := filepath.Join(t.TempDir(), "base")
	pushed := buildFlipJournal(t, base)
	img := readImage(t, base)
	var snaps int
	for _, p := range img.paths {
		if strings.HasSuffix(p, ".rsnap") {
			snaps++
		}
	}
	if snaps == 0 || len(img.paths) < 4 {
		t.Fatalf("journal image too simple: %v", img.paths)
	}
	dir := filepath.Join(t.TempDir(), "flipped")
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	counts := map[flipOutcome]int{}
	delivered := 0
	start := time.Now()
	for round := 0; round < rounds; round++ {
		bit := r.Int64N(img.bits)
		hit := img.write(t, dir, bit)
		salvage := round%2 == 1
		out, n, bad := openAndReadAll(dir, salvage, pushed)
		if bad != "" {
			t.Fatalf("round %d: bit %d (in %s, salvage %v): %s", round, bit, hit, salvage, bad)
		}
		counts[out]++
		delivered += n
	}
	t.Logf("%d bit flips over %d files (%d bytes) in %v: refused at start %d, started with reads refused %d, started and read all %d; %d payloads delivered, 0 corrupt",
		rounds, len(img.paths), img.bits/8, time.Since(start).Round(time.Millisecond),
		counts[flipRefusedOpen], counts[flipReadErrors], counts[flipAllDelivered], delivered)
}

// openAndReadAll opens dir and reads everything; bad describes a corrupt
// delivery ("" if none).
func openAndReadAll(dir string, salvage bool, pushed map[string]bool) (out flipOutcome, delivered int, bad string) {
	j, err := log.Open(log.Config{Dir: dir, SegmentBytes: 8 << 10, Salvage: salvage, Logger: quiet})
	if err != nil {
		return flipRefusedOpen, 0, ""
	}
	defer j.Close()
	e, err := engine.New(engine.Config{NoTicker: true, SnapshotEveryBytes: -1, CacheBytes: 1, Logger: quiet}, j)
	if err != nil {
		return flipRefusedOpen, 0, ""
	}
	defer e.Close()
	check := func(where string, pl []byte) string {
		if !pushed[string(pl)] {
			return fmt.Sprintf("%s delivered a payload that was never pushed: %.60q", where, pl)
		}
		return ""
	}
	out = flipAllDelivered
	ctx := context.Background()
	for p := 0; p < 3; p++ {
		seen := map[string]bool{}
		for {
			ms, err := e.Pop(ctx, engine.PopRequest{Queue: "bits", Partition: fmt.Sprint("p", p), Group: "reader", Batch: 1000, AutoAck: true})
			if err != nil {
				if errors.Is(err, engine.ErrQueueNotFound) || errors.Is(err, engine.ErrPartitionNotFound) {
					break
				}
				out = flipReadErrors
				break
			}
			if len(ms) == 0 {
				break
			}
			for _, m := range ms {
				if b := check("pop", m.Payload); b != "" {
					return out, delivered, b
				}
				if seen[string(m.Payload)] {
					return out, delivered, fmt.Sprintf("partition p%d delivered %.20q twice", p, m.Payload)
				}
				seen[string(m.Payload)] = true
				delivered++
			}
		}
	}
	entries, _, err := e.DLQ(engine.DLQFilter{Queue: "bits", Limit: 10000})
	if err != nil {
		out = flipReadErrors
	}
	for _, en := range entries {
		if b := check("DLQ", en.Message.Payload); b != "" {
			return out, delivered, b
		}
		delivered++
	}
	return out, delivered, ""
}
