package log

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// WAL entry layout (little-endian; see doc.go for the table):
//
//	magic "RGN1" | crc32c | version | codec | count | rawLen | index | body
const (
	entryMagic      = "RGN1"
	entryVersion    = 1
	entryHeaderLen  = 26
	entryCRCOff     = 4 // the CRC covers every byte from entryCRCOff+4 to the end
	entryVersionOff = 8
	entryCodecOff   = 9
	entryCountOff   = 10
	entryRawLenOff  = 14
	entryIndexOff   = 18

	codecRaw  = 0
	codecZstd = 1

	// minCompressBytes: smaller groups are stored raw (a zstd frame header
	// alone eats most of what could be saved).
	minCompressBytes = 64

	// zstdMaxDecodedBytes caps what the process-wide decoder will ever produce
	// for one DecodeAll call (entries are further capped by MaxEntryBytes and
	// by the capacity of the destination buffer; snapshots by this).
	zstdMaxDecodedBytes = 4 << 30

	// zstdWindow is how far back the encoder looks for matches. Each of
	// its encoders keeps a history of that size (zstd's default for this
	// level is 8 MiB: 16 MiB of history with two encoders, in a broker
	// whose whole budget may be 128 MiB). Records repeat what is near
	// them (names, ids of one batch), so a short window costs little.
	zstdWindow = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// The process-wide zstd encoder and decoder. EncodeAll and DecodeAll are safe
// for concurrent use; both keep pools of internal state, so one pair serves
// every Log in the process.
var zstdCodecs = sync.OnceValues(func() (*zstdPair, error) {
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderCRC(false), // the entry's CRC32C covers the frame
		zstd.WithWindowSize(zstdWindow),
		// Literals are stored as they are, not Huffman-coded: that takes
		// 37% off the encoder's CPU per message on the harness's records
		// (263 to 166 ns per 128-byte message, same size), and 38% off on
		// hex-text payloads, which it makes 40% larger (61 to 86 bytes per
		// message: 59% of the raw 147). The broker is CPU-bound long
		// before its disk is bandwidth-bound.
		zstd.WithNoEntropyCompression(true),
	)
	if err != nil {
		return nil, fmt.Errorf("log: zstd encoder: %w", err)
	}
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(zstdMaxDecodedBytes),
		zstd.WithDecodeAllCapLimit(true), // never decode past cap(dst)
	)
	if err != nil {
		return nil, fmt.Errorf("log: zstd decoder: %w", err)
	}
	return &zstdPair{enc: enc, dec: dec}, nil
})

type zstdPair struct {
	enc *zstd.Encoder
	dec *zstd.Decoder
}

func mustCodecs() *zstdPair {
	z, err := zstdCodecs()
	if err != nil {
		// Only bad options fail, and the options are constants.
		panic(err)
	}
	return z
}

// appendRecord frames one record into a group body: uvarint(len) | bytes.
func appendRecord(body, rec []byte) []byte {
	body = binary.AppendUvarint(body, uint64(len(rec)))
	return append(body, rec...)
}

// recordFrameLen is how many bytes appendRecord adds for a record of n bytes.
func recordFrameLen(n int) int {
	l := 1
	for x := uint64(n); x >= 0x80; x >>= 7 {
		l++
	}
	return l + n
}

// encodeEntry encodes a group (count records framed in raw) as one WAL entry
// into dst[:0] and returns it. The body is zstd-compressed unless that does
// not make it smaller.
func encodeEntry(dst []byte, index uint64, count int, raw []byte) []byte {
	return encodeEntryGuessing(dst, index, count, raw, nil)
}

// encodeEntryGuessing is encodeEntry with g's guess of whether raw is
// worth compressing (nil: probe it).
func encodeEntryGuessing(dst []byte, index uint64, count int, raw []byte, g *Compressor) []byte {
	dst = append(dst[:0], make([]byte, entryHeaderLen)...)
	codec := byte(codecRaw)
	if out, ok := g.Compress(dst, raw); ok {
		dst, codec = out, codecZstd
	} else {
		dst = append(dst, raw...)
	}
	copy(dst, entryMagic)
	dst[entryVersionOff] = entryVersion
	dst[entryCodecOff] = codec
	binary.LittleEndian.PutUint32(dst[entryCountOff:], uint32(count))
	binary.LittleEndian.PutUint32(dst[entryRawLenOff:], uint32(len(raw)))
	binary.LittleEndian.PutUint64(dst[entryIndexOff:], index)
	binary.LittleEndian.PutUint32(dst[entryCRCOff:], crc32c(dst[entryCRCOff+4:]))
	return dst
}

// A Compressor compresses bodies with the journal's codec, guessing from
// the bodies it saw last whether the next is worth it: a writer's bodies
// tend to be alike (its payloads are in clear, or sealed; a replicated
// shard's journal holds records its leader compressed). After a body that
// saved a fifth or more it compresses the next at once, without the probe
// (compressible: a fifth of the cost of compressing a 12 KiB record);
// after a body the probe found dense it stores the next denseSkip as they
// are, then probes again; otherwise it probes, as CompressRecord does. A
// body that defies the guess is compressed in vain once or stored whole:
// a larger entry, never a wrong one. The zero value is ready; safe for
// concurrent use (the guess is a hint, kept in an atomic).
type Compressor struct {
	// guess: guessProbe, guessCompress, or k > 0: k bodies are still to
	// be stored without trying.
	guess atomic.Int32
}

const (
	guessProbe    = 0
	guessCompress = -1
	// denseSkip is how many bodies a Compressor stores without trying
	// after one that was not worth compressing.
	denseSkip = 15
)

// skip reads g's guess (guessProbe for a nil g) and reports whether the
// next body is one of those to store without trying, counting it off.
func (g *Compressor) skip() (guess int32, skip bool) {
	if g == nil {
		return guessProbe, false
	}
	guess = g.guess.Load()
	if guess > 0 {
		g.guess.CompareAndSwap(guess, guess-1)
		return guess, true
	}
	return guess, false
}

// Compress is CompressRecord with g's guess of whether src is worth
// compressing (see Compressor): it appends src compressed to dst and
// returns it with true when that made it smaller; otherwise dst as it was
// and false. A nil g probes every body, as CompressRecord does.
func (g *Compressor) Compress(dst, src []byte) ([]byte, bool) {
	if len(src) < minCompressBytes {
		return dst, false
	}
	guess, skip := g.skip()
	switch {
	case skip:
		return dst, false
	case guess == guessProbe && !compressible(src):
		if g != nil {
			g.guess.Store(denseSkip)
		}
		return dst, false
	}
	n := len(dst)
	out := mustCodecs().enc.EncodeAll(src, dst)
	saved := len(src) - (len(out) - n)
	if g != nil {
		// The probe's bar: a body that saves a fifth or more has the next
		// compressed at once; one that saves less (sealed payloads and
		// their framing) has the next probed, whose verdict may start a
		// skip.
		if saved >= len(src)/5 {
			if guess != guessCompress {
				g.guess.Store(guessCompress)
			}
		} else if guess == guessCompress {
			g.guess.Store(guessProbe)
		}
	}
	if saved <= 0 {
		return dst[:n], false
	}
	return out, true
}

// probeBytes is the sample compressible looks at; smallProbeBytes its
// sample of a group under 4×probeBytes.
const (
	probeBytes      = 4 << 10
	smallProbeBytes = 1 << 10
)

// compressible tells, from a sample of its start, whether compressing body
// is worth the time: encrypted payloads never compress, and zstd spends a
// third of a push's CPU finding that out on a whole group. The bar is a
// fifth saved: a record of 100 sealed 128-byte payloads still shrinks by
// 8% (its ids and framing), which is not worth zstd's time, while the same
// record in clear (JSON payloads) shrinks to 12%. A group under 16 KiB is
// probed on its first KiB: a replicated shard's journal holds records its
// leader compressed (CompressRecord), and the broker's groups of them,
// mostly under 16 KiB, were compressed in vain (4% of a replicated
// broker's CPU under the harness's push).
func compressible(body []byte) bool {
	n := probeBytes
	switch {
	case len(body) < 2*smallProbeBytes:
		return true // small: just try
	case len(body) < 4*probeBytes:
		n = smallProbeBytes
	}
	sample := body[:n]
	out := mustCodecs().enc.EncodeAll(sample, make([]byte, 0, n+64))
	return len(out) < len(sample)*4/5
}

// entryHeader is the parsed fixed header of an entry.
type entryHeader struct {
	codec  byte
	count  int
	rawLen int
	index  uint64
}

// checkEntry verifies an entry's framing and CRC without decompressing it.
// The error only describes the problem; callers wrap it with ErrCorrupt and
// their context. It does not apply size limits, so that lowering
// MaxEntryBytes never makes repair drop valid entries.
func checkEntry(data []byte) (entryHeader, error) {
	var h entryHeader
	if len(data) < entryHeaderLen {
		return h, fmt.Errorf("entry of %d bytes is shorter than its %d-byte header", len(data), entryHeaderLen)
	}
	if string(data[:4]) != entryMagic {
		return h, fmt.Errorf("bad magic %q", data[:4])
	}
	want := binary.LittleEndian.Uint32(data[entryCRCOff:])
	if got := crc32c(data[entryCRCOff+4:]); got != want {
		return h, fmt.Errorf("checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	if v := data[entryVersionOff]; v != entryVersion {
		return h, fmt.Errorf("unknown version %d", v)
	}
	h.codec = data[entryCodecOff]
	if h.codec != codecRaw && h.codec != codecZstd {
		return h, fmt.Errorf("unknown codec %d", h.codec)
	}
	h.count = int(binary.LittleEndian.Uint32(data[entryCountOff:]))
	h.rawLen = int(binary.LittleEndian.Uint32(data[entryRawLenOff:]))
	h.index = binary.LittleEndian.Uint64(data[entryIndexOff:])
	if h.count == 0 {
		// A hole: the entry a salvage put in place of one lost to damage.
		if h.codec != codecRaw || h.rawLen != 0 || len(data) != entryHeaderLen {
			return h, fmt.Errorf("entry claims 0 records")
		}
		return h, nil
	}
	if h.count > maxRecordsPerEntry {
		return h, fmt.Errorf("entry claims %d records", h.count)
	}
	if h.count > h.rawLen {
		return h, fmt.Errorf("entry claims %d records in %d bytes", h.count, h.rawLen)
	}
	if h.codec == codecRaw && len(data)-entryHeaderLen != h.rawLen {
		return h, fmt.Errorf("raw body is %d bytes, header says %d", len(data)-entryHeaderLen, h.rawLen)
	}
	return h, nil
}

// span locates one record inside a decoded body.
type span struct{ off, n uint32 }

// decoded is a decoded entry. Its buffers are reused from one decode to the
// next, so a decoded value must not be shared while it is being refilled.
type decoded struct {
	index uint64
	body  []byte // the framed records; may alias the input for raw entries
	spans []span // one per record
	buf   []byte // decompression buffer, reused
}

// record returns record number i of the entry (aliasing the body).
func (d *decoded) record(i int) []byte {
	s := d.spans[i]
	return d.body[s.off : s.off+s.n]
}

// decodeEntry checks, decompresses and splits the WAL entry stored at index
// into d. An entry claiming more than maxRaw uncompressed bytes is refused
// before any decompression. Every error wraps ErrCorrupt and names the entry.
func decodeEntry(d *decoded, data []byte, index uint64, maxRaw int) error {
	d.index, d.body, d.spans = 0, nil, d.spans[:0]
	h, err := checkEntry(data)
	if err != nil {
		return fmt.Errorf("%w: entry %d: %v", ErrCorrupt, index, err)
	}
	if h.index != index {
		return fmt.Errorf("%w: entry %d: it carries index %d", ErrCorrupt, index, h.index)
	}
	if h.count == 0 {
		return fmt.Errorf("%w: %w: entry %d (a salvage left a hole in its place)", ErrCorrupt, ErrLost, index)
	}
	if h.rawLen > maxRaw {
		return fmt.Errorf("%w: entry %d: claims %d uncompressed bytes, above the limit of %d (%w)",
			ErrCorrupt, index, h.rawLen, maxRaw, ErrTooLarge)
	}
	body := data[entryHeaderLen:]
	if h.codec == codecZstd {
		if cap(d.buf) < h.rawLen {
			// An eighth more, so that the buffer can serve the next
			// entries, whose sizes vary, too (see entryCache.fill).
			d.buf = make([]byte, 0, h.rawLen+h.rawLen/8)
		}
		// WithDecodeAllCapLimit: the decoder stops at cap(dst), so a frame
		// that expands past rawLen cannot allocate more than we gave it.
		out, err := mustCodecs().dec.DecodeAll(body, d.buf[:0:h.rawLen])
		if err != nil {
			return fmt.Errorf("%w: entry %d: body does not decompress: %v", ErrCorrupt, index, err)
		}
		if len(out) != h.rawLen {
			return fmt.Errorf("%w: entry %d: decompressed to %d bytes, header says %d", ErrCorrupt, index, len(out), h.rawLen)
		}
		body = out
	}
	off := 0
	for i := 0; i < h.count; i++ {
		n, k := binary.Uvarint(body[off:])
		if k <= 0 {
			return fmt.Errorf("%w: entry %d: record %d: bad length prefix", ErrCorrupt, index, i)
		}
		off += k
		if n > uint64(len(body)-off) {
			return fmt.Errorf("%w: entry %d: record %d: length %d runs past the entry body", ErrCorrupt, index, i, n)
		}
		d.spans = append(d.spans, span{uint32(off), uint32(n)})
		off += int(n)
	}
	if off != len(body) {
		return fmt.Errorf("%w: entry %d: %d stray bytes after the last record", ErrCorrupt, index, len(body)-off)
	}
	d.index, d.body = h.index, body
	return nil
}

// CompressRecord appends src, compressed with the journal's codec, to dst
// and returns it with true when that makes it smaller; otherwise it
// returns dst as it was and false. It is for a record that one writer
// compresses once and several journals store (a replicated shard's leader
// compresses each record before its replicas get it): a group of such
// records is found dense by the journal (compressible, and its
// Compressor's guess) and written as it is, so no journal compresses it
// again. CompressRecord probes every record; Compress guesses.
func CompressRecord(dst, src []byte) ([]byte, bool) {
	return (*Compressor)(nil).Compress(dst, src)
}

// Pack appends src, compressed with S2, to dst and returns it with true
// when that saved something; otherwise dst as it was and false. It is for
// the small records one writer compresses once and several journals store
// (a replicated shard's leader packs each engine record before its
// replicas get it; UnpackRecord reads it back). S2, not zstd: a zstd frame
// costs a fixed 1.3 µs or so before its first byte, which on the records a
// leader packs (about 1 KiB: a push's messages for one partition) made
// zstd 13% of a replicated broker's CPU under the harness's push, at 0.3
// µs a message. S2 packs the same records in a sixth of that time to the
// same size (20 bytes a message against zstd's 19 for six 128-byte
// messages; zstd keeps its lead on large groups, which the journal's
// entries are). Like Compress, it guesses from g's last records whether
// the next is worth trying: after one that saved less than a fifth it
// stores the next denseSkip as they are. A nil g tries every record.
func (g *Compressor) Pack(dst, src []byte) ([]byte, bool) {
	if len(src) < minCompressBytes || s2.MaxEncodedLen(len(src)) < 0 {
		return dst, false
	}
	guess, skip := g.skip()
	if skip {
		return dst, false
	}
	n := len(dst)
	dst = slices.Grow(dst, s2.MaxEncodedLen(len(src)))
	out := s2.Encode(dst[n:cap(dst)], src)
	saved := len(src) - len(out)
	if g != nil {
		switch {
		case saved < len(src)/5:
			g.guess.Store(denseSkip)
		case guess != guessCompress:
			g.guess.Store(guessCompress)
		}
	}
	if saved <= 0 {
		return dst[:n], false
	}
	return dst[:n+len(out)], true
}

// UnpackRecord appends the record Pack made src of to dst and returns it.
// A record that would be longer than maxRaw bytes is refused before any
// of it is decoded, as is anything that is no S2 block.
func UnpackRecord(dst, src []byte, maxRaw int) ([]byte, error) {
	rawLen, err := s2.DecodedLen(src)
	if err != nil {
		return dst, fmt.Errorf("log: unpacking a record: %w", err)
	}
	if rawLen > maxRaw {
		return dst, fmt.Errorf("log: a packed record of %d bytes passes the limit of %d", rawLen, maxRaw)
	}
	n := len(dst)
	dst = slices.Grow(dst, rawLen)
	buf := dst[n : n+rawLen]
	out, err := s2.Decode(buf, src)
	if err != nil {
		return dst[:n], fmt.Errorf("log: unpacking a record: %w", err)
	}
	if len(out) != rawLen || (rawLen > 0 && &out[0] != &buf[0]) {
		return dst[:n], fmt.Errorf("log: a packed record of %d bytes decoded to %d", rawLen, len(out))
	}
	return dst[:n+rawLen], nil
}

// DecompressRecord appends what CompressRecord made of a record of rawLen
// bytes to dst and returns it; anything else, or a record of any other
// length, is an error and decodes no further than rawLen bytes.
func DecompressRecord(dst, src []byte, rawLen int) ([]byte, error) {
	n := len(dst)
	if cap(dst)-n < rawLen {
		dst = append(make([]byte, 0, n+rawLen), dst...)
	}
	out, err := mustCodecs().dec.DecodeAll(src, dst[:n:n+rawLen])
	if err != nil {
		return dst[:n], fmt.Errorf("log: decompressing a record: %w", err)
	}
	if len(out)-n != rawLen {
		return dst[:n], fmt.Errorf("log: a compressed record of %d bytes holds %d", rawLen, len(out)-n)
	}
	return out, nil
}
