package log

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/tidwall/wal"
)

// frameRecords frames records as a group body.
func frameRecords(recs ...string) []byte {
	var b []byte
	for _, r := range recs {
		b = appendRecord(b, []byte(r))
	}
	return b
}

// craftEntry builds an entry with arbitrary header fields and a valid CRC.
func craftEntry(index uint64, codec byte, count, rawLen uint32, body []byte) []byte {
	b := make([]byte, entryHeaderLen, entryHeaderLen+len(body))
	copy(b, entryMagic)
	b[entryVersionOff] = entryVersion
	b[entryCodecOff] = codec
	binary.LittleEndian.PutUint32(b[entryCountOff:], count)
	binary.LittleEndian.PutUint32(b[entryRawLenOff:], rawLen)
	binary.LittleEndian.PutUint64(b[entryIndexOff:], index)
	b = append(b, body...)
	binary.LittleEndian.PutUint32(b[entryCRCOff:], crc32c(b[entryCRCOff+4:]))
	return b
}

// records makes n records of a 16-byte fixed header (like a push's framing
// and ids) followed by 140 bytes of payload (text or random).
func records(n int, text bool) []string {
	r := rand.New(rand.NewPCG(5, 5))
	recs := make([]string, n)
	for i := range recs {
		recs[i] = "push-header-0123" + string(payload(r, 140, text))
	}
	return recs
}

func TestEntryRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name  string
		recs  []string
		codec byte
	}{
		{"one-empty", []string{""}, codecRaw},
		{"tiny", []string{"a", "bc"}, codecRaw},
		{"compressible", []string{string(bytes.Repeat([]byte("queue "), 100)), "x", ""}, codecZstd},
		{"random", []string{string(payload(rand.New(rand.NewPCG(9, 9)), 500, false))}, codecRaw},
		// Like a group of encrypted pushes: framing and ids shrink, the sealed
		// payloads do not; the whole saves too little to be worth zstd.
		{"mostly-random", records(200, false), codecRaw},
		{"mostly-text", records(200, true), codecZstd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := frameRecords(tc.recs...)
			e := encodeEntry(nil, 42, len(tc.recs), raw)
			if e[entryCodecOff] != tc.codec {
				t.Fatalf("codec %d, want %d", e[entryCodecOff], tc.codec)
			}
			var d decoded
			if err := decodeEntry(&d, e, 42, 1<<20); err != nil {
				t.Fatal(err)
			}
			if len(d.spans) != len(tc.recs) {
				t.Fatalf("%d records", len(d.spans))
			}
			for i, r := range tc.recs {
				if string(d.record(i)) != r {
					t.Fatalf("record %d differs", i)
				}
			}
			if err := decodeEntry(&d, e, 43, 1<<20); !isErr(err, ErrCorrupt) {
				t.Fatalf("decoded at the wrong index: %v", err)
			}
		})
	}
}

// TestZstdBomb: entries that claim, or expand to, more than allowed are
// refused without allocating what they claim.
func TestZstdBomb(t *testing.T) {
	const maxRaw = 1 << 20
	zeros := make([]byte, 64<<20)
	small := mustCodecs().enc.EncodeAll(zeros, nil) // 64 MiB of zeros, a few KiB
	var stream bytes.Buffer                         // a frame without a content size
	zw, _ := zstd.NewWriter(&stream)
	zw.Write(zeros)
	zw.Close()
	for _, tc := range []struct {
		name    string
		entry   []byte
		tooLarg bool
	}{
		{"claims 1 GiB", craftEntry(1, codecZstd, 1, 1<<30, small), true},
		{"claims 2 MiB", craftEntry(1, codecZstd, 1, 2<<20, small), true},
		{"claims 1000, expands to 64 MiB", craftEntry(1, codecZstd, 1, 1000, small), false},
		{"no content size, claims 1000", craftEntry(1, codecZstd, 1, 1000, stream.Bytes()), false},
		{"raw claims more than it has", craftEntry(1, codecRaw, 1, 1000, []byte{3, 'a', 'b', 'c'}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d decoded
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := decodeEntry(&d, tc.entry, 1, maxRaw)
			runtime.ReadMemStats(&after)
			if !isErr(err, ErrCorrupt) || isErr(err, ErrTooLarge) != tc.tooLarg {
				t.Fatalf("err = %v (want ErrCorrupt, ErrTooLarge=%v)", err, tc.tooLarg)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
				t.Fatalf("decoding allocated %d bytes", grew)
			}
		})
	}
}

// TestBombInJournal: a CRC-valid entry claiming a huge size, planted in the
// WAL, survives repair (its CRC holds) but Read and Replay refuse it.
func TestBombInJournal(t *testing.T) {
	dir := t.TempDir()
	buildJournal(t, dir, 2, randRec(10))
	w, err := wal.Open(filepath.Join(dir, walDirName), &wal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	small := mustCodecs().enc.EncodeAll(make([]byte, 8<<20), nil)
	if err := w.Write(3, craftEntry(3, codecZstd, 1, 8<<20, small)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	l, _ := openT(t, dir, func(c *Config) { c.MaxEntryBytes = 1 << 20 })
	if _, err := l.Read(MakePos(3, 0)); !isErr(err, ErrTooLarge) || !isErr(err, ErrCorrupt) {
		t.Fatalf("Read of the bomb: %v", err)
	}
	n := 0
	if err := l.Replay(0, func(uint64, []byte) error { n++; return nil }); !isErr(err, ErrTooLarge) || n != 2 {
		t.Fatalf("Replay: %d records then %v", n, err)
	}
}

// FuzzDecodeEntry feeds arbitrary bytes to the entry decoder: it must never
// panic, must fail only with ErrCorrupt, and what it accepts must survive a
// re-encode.
func FuzzDecodeEntry(f *testing.F) {
	f.Add(encodeEntry(nil, 1, 1, frameRecords("hello")))
	f.Add(encodeEntry(nil, 7, 3, frameRecords(string(bytes.Repeat([]byte("ab"), 200)), "", "z")))
	f.Add(craftEntry(1, codecZstd, 1, 1<<30, []byte{0x28, 0xb5, 0x2f, 0xfd}))
	f.Add([]byte("RGN1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzDecode(t, data)
		// Random bytes rarely pass the CRC: also decode a copy with the CRC
		// recomputed, so the checks behind it (sizes, zstd, framing) get
		// fuzzed too.
		if len(data) >= entryHeaderLen {
			fixed := bytes.Clone(data)
			binary.LittleEndian.PutUint32(fixed[entryCRCOff:], crc32c(fixed[entryCRCOff+4:]))
			fuzzDecode(t, fixed)
		}
	})
}

func fuzzDecode(t *testing.T, data []byte) {
	index := uint64(1)
	if len(data) >= entryHeaderLen {
		index = binary.LittleEndian.Uint64(data[entryIndexOff:])
	}
	var d decoded
	err := decodeEntry(&d, data, index, 1<<20)
	if err != nil {
		if !isErr(err, ErrCorrupt) {
			t.Fatalf("error does not wrap ErrCorrupt: %v", err)
		}
		return
	}
	var raw []byte
	for i := range d.spans {
		raw = appendRecord(raw, d.record(i))
	}
	again := encodeEntry(nil, index, len(d.spans), raw)
	var d2 decoded
	if err := decodeEntry(&d2, again, index, 1<<20); err != nil {
		t.Fatalf("re-encoded entry does not decode: %v", err)
	}
	if len(d2.spans) != len(d.spans) {
		t.Fatalf("%d records, then %d", len(d.spans), len(d2.spans))
	}
	for i := range d.spans {
		if !bytes.Equal(d.record(i), d2.record(i)) {
			t.Fatalf("record %d changed", i)
		}
	}
}

// TestWriteFuzzSeeds regenerates the committed seed corpus when
// REGENT_WRITE_FUZZ_SEEDS is set.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("REGENT_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set REGENT_WRITE_FUZZ_SEEDS=1 to regenerate testdata/fuzz/FuzzDecodeEntry")
	}
	good := encodeEntry(nil, 3, 2, frameRecords("first record", "second"))
	zst := encodeEntry(nil, 9, 4, frameRecords(string(bytes.Repeat([]byte("partition "), 50)), "a", "", "b"))
	flipped := bytes.Clone(zst)
	flipped[len(flipped)-3] ^= 1
	seeds := map[string][]byte{
		"valid-raw":           good,
		"valid-zstd":          zst,
		"bad-crc":             flipped,
		"truncated":           good[:len(good)-2],
		"header-only":         good[:entryHeaderLen],
		"bomb-rawlen":         craftEntry(1, codecZstd, 1, 1<<30, mustCodecs().enc.EncodeAll(make([]byte, 1<<16), nil)),
		"count-mismatch":      craftEntry(1, codecRaw, 3, 6, frameRecords("ab", "c")),
		"record-past-body":    craftEntry(1, codecRaw, 1, 2, []byte{5, 'x'}),
		"unknown-codec":       craftEntry(1, 7, 1, 2, []byte{1, 'x'}),
		"zstd-wrong-rawlen":   craftEntry(1, codecZstd, 1, 10, mustCodecs().enc.EncodeAll(frameRecords("0123456789abc"), nil)),
		"stray-after-records": craftEntry(1, codecRaw, 1, 4, []byte{1, 'x', 0, 0}),
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzDecodeEntry")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range seeds {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A record compressed once (CompressRecord) comes back whole, and only
// at the length it was compressed at; what does not shrink is left alone.
func TestCompressRecordRoundTrip(t *testing.T) {
	rec := bytes.Repeat([]byte(`{"order":1234,"status":"paid","items":["a","b"]}`), 200)
	packed, ok := CompressRecord([]byte("hdr"), rec)
	if !ok || !bytes.HasPrefix(packed, []byte("hdr")) || len(packed) >= len(rec)/4 {
		t.Fatalf("CompressRecord: ok %v, %d bytes from %d", ok, len(packed), len(rec))
	}
	got, err := DecompressRecord([]byte("x"), packed[3:], len(rec))
	if err != nil || !bytes.Equal(got, append([]byte("x"), rec...)) {
		t.Fatalf("DecompressRecord: %v, %d bytes", err, len(got))
	}
	// A length other than the record's is an error, and decodes no more
	// than it allows.
	if _, err := DecompressRecord(nil, packed[3:], len(rec)-1); err == nil {
		t.Fatal("a record one byte longer than its stated length was accepted")
	}
	if _, err := DecompressRecord(nil, packed[3:], len(rec)+1); err == nil {
		t.Fatal("a record one byte shorter than its stated length was accepted")
	}
	if _, err := DecompressRecord(nil, []byte("not a zstd frame"), len(rec)); err == nil {
		t.Fatal("bytes that are no zstd frame were accepted")
	}
	// Random bytes do not shrink: dst comes back as it was.
	r := rand.New(rand.NewPCG(7, 7))
	dense := make([]byte, 64<<10)
	for i := range dense {
		dense[i] = byte(r.Uint32())
	}
	if out, ok := CompressRecord([]byte("hdr"), dense); ok || string(out) != "hdr" {
		t.Fatalf("incompressible data: ok %v, %d bytes back", ok, len(out))
	}
	if out, ok := CompressRecord(nil, []byte("tiny")); ok || len(out) != 0 {
		t.Fatalf("a 4-byte record: ok %v, %d bytes back", ok, len(out))
	}
}

// A record packed with S2 (Pack) comes back whole; a length past the
// caller's limit is refused before decoding, and what does not shrink is
// left alone, with the next records stored without trying.
func TestPackRecordRoundTrip(t *testing.T) {
	rec := bytes.Repeat([]byte(`{"order":1234,"status":"paid","items":["a","b"]}`), 200)
	var g Compressor
	packed, ok := g.Pack([]byte("hdr"), rec)
	if !ok || !bytes.HasPrefix(packed, []byte("hdr")) || len(packed) >= len(rec)/4 {
		t.Fatalf("Pack: ok %v, %d bytes from %d", ok, len(packed), len(rec))
	}
	got, err := UnpackRecord([]byte("x"), packed[3:], len(rec))
	if err != nil || !bytes.Equal(got, append([]byte("x"), rec...)) {
		t.Fatalf("UnpackRecord: %v, %d bytes", err, len(got))
	}
	if _, err := UnpackRecord(nil, packed[3:], len(rec)-1); err == nil {
		t.Fatal("a record one byte past the limit was unpacked")
	}
	for cut := 1; cut < len(packed)-3; cut += 7 {
		if out, err := UnpackRecord(nil, packed[3:3+cut], len(rec)); err == nil {
			t.Fatalf("a block cut to %d bytes unpacked to %d", cut, len(out))
		}
	}
	if _, err := UnpackRecord(nil, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, len(rec)); err == nil {
		t.Fatal("a malformed length was accepted")
	}

	r := rand.New(rand.NewPCG(9, 9))
	dense := make([]byte, 8<<10)
	for i := range dense {
		dense[i] = byte(r.Uint32())
	}
	if out, ok := g.Pack([]byte("hdr"), dense); ok || string(out) != "hdr" {
		t.Fatalf("incompressible data: ok %v, %d bytes back", ok, len(out))
	}
	// The guess: the next denseSkip records are stored without trying,
	// compressible or not; then Pack tries again.
	for i := 0; i < denseSkip; i++ {
		if _, ok := g.Pack(nil, rec); ok {
			t.Fatalf("record %d after a dense one was compressed", i)
		}
	}
	if _, ok := g.Pack(nil, rec); !ok {
		t.Fatal("Pack did not try again after the skip")
	}
	if out, ok := (*Compressor)(nil).Pack(nil, []byte("tiny")); ok || len(out) != 0 {
		t.Fatalf("a 4-byte record: ok %v, %d bytes back", ok, len(out))
	}
}

// A group between 2 and 16 KiB is probed too: one of records compressed
// before (a replicated shard's) is written as it is, one of clear records
// is compressed.
func TestCompressibleProbesMidSizedGroups(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	dense := make([]byte, 8<<10)
	for i := range dense {
		dense[i] = byte(r.Uint32())
	}
	if compressible(dense) {
		t.Fatal("an 8 KiB group of random bytes would be compressed")
	}
	var clear []byte
	for i := 0; len(clear) < 8<<10; i++ {
		clear = appendRecord(clear, fmt.Appendf(nil, `{"order":%d,"status":"paid","customer":"c%d@example.com"}`, i, i%17))
	}
	if !compressible(clear) {
		t.Fatal("an 8 KiB group of JSON records would be written raw")
	}
	if !compressible(dense[:1000]) {
		t.Fatal("a group under 2 KiB is not probed: it is tried")
	}
}

// A Compressor guesses from the bodies it saw last: after one that saved a
// fifth or more it compresses the next at once; after one the probe found
// dense it stores the next denseSkip as they are, without trying, then
// probes again; a body compressed at once that saves less than a fifth
// has the next probed. What it returns always decodes to the body.
func TestCompressorGuesses(t *testing.T) {
	clear := bytes.Repeat([]byte(`{"t":1733150000123456789,"p":"xxxxxxxxxxxx"}`), 200)
	dense := make([]byte, len(clear))
	r := rand.New(rand.NewPCG(1, 2))
	for i := range dense {
		dense[i] = byte(r.Uint32())
	}
	var c Compressor
	try := func(body []byte, want bool, guess int32) {
		t.Helper()
		out, ok := c.Compress([]byte("hdr"), body)
		if ok != want {
			t.Fatalf("Compress of a %d-byte body: compressed %v, want %v (guess %d)", len(body), ok, want, c.guess.Load())
		}
		if g := c.guess.Load(); g != guess {
			t.Fatalf("the guess after a %d-byte body is %d, want %d", len(body), g, guess)
		}
		if !ok {
			if string(out) != "hdr" {
				t.Fatalf("a body left as it is changed dst: %q", out)
			}
			return
		}
		if got, err := DecompressRecord(nil, out[3:], len(body)); err != nil || !bytes.Equal(got, body) {
			t.Fatalf("a compressed body does not decode to itself: %v", err)
		}
	}
	try(clear, true, guessCompress)
	try(dense, false, guessProbe) // compressed in vain, without the probe
	try(dense, false, denseSkip)  // the probe's verdict starts a skip
	for k := range denseSkip {
		try(clear, false, int32(denseSkip-1-k)) // skipped, though it would compress
	}
	try(clear, true, guessCompress) // probed, and compressed
	// A body that saves less than a fifth (sealed payloads and their
	// framing) is kept compressed when that is smaller, and the next is
	// probed.
	slight := append(append([]byte(nil), dense...), make([]byte, len(dense)/10)...)
	try(slight, true, guessProbe)
	// A body too small to probe says nothing of the next.
	var small Compressor
	if _, ok := small.Compress(nil, []byte("tiny")); ok || small.guess.Load() != guessProbe {
		t.Fatalf("a tiny body: compressed %v, guess %d", ok, small.guess.Load())
	}
}

// Bodies compressed by many goroutines at once through one Compressor
// (the engine's stripes append to one replicated shard) all decode.
func TestCompressorConcurrent(t *testing.T) {
	var c Compressor
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range 200 {
				body := bytes.Repeat([]byte(fmt.Sprintf("record %d of %d ", i, w)), 100)
				if i%3 == 0 {
					for k := range body {
						body[k] = byte(r.Uint32())
					}
				}
				out, ok := c.Compress(nil, body)
				if !ok {
					continue
				}
				if got, err := DecompressRecord(nil, out, len(body)); err != nil || !bytes.Equal(got, body) {
					t.Errorf("a body does not decode to itself: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
