package protocol

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// fuzzMax is the frame cap used by FuzzReadFrame: small, so that the fuzzer
// reaches the too-large path easily.
const fuzzMax = MinMaxFrame

// frameEvent is one thing a frame reader reported.
type frameEvent struct {
	h    Header
	body string
	err  string
}

func eventOf(f Frame, err error) frameEvent {
	e := frameEvent{h: f.Header, body: string(f.Body)}
	if err != nil {
		e.err = err.Error()
	}
	return e
}

// framesWhole cuts data with ReadFrame over the whole buffer. end is
// "fatal", or "short" with the count of bytes left over.
func framesWhole(data []byte) (evs []frameEvent, end string, left int) {
	b := data
	for {
		f, n, err := ReadFrame(b, fuzzMax)
		if err == ErrShort {
			return evs, "short", len(b)
		}
		evs = append(evs, eventOf(f, err))
		if fatal(err) {
			return evs, "fatal", len(b)
		}
		if n <= 0 || n > len(b) {
			panic(fmt.Sprintf("ReadFrame consumed %d of %d bytes", n, len(b)))
		}
		b = b[n:]
	}
}

// framesChunked feeds data to a Framer in the given chunks.
func framesChunked(data []byte, cuts []int) (evs []frameEvent, end string, left int) {
	fr := Framer{MaxFrame: fuzzMax}
	prev := 0
	for _, c := range append(cuts, len(data)) {
		fr.Feed(data[prev:c])
		prev = c
		for {
			f, err := fr.Next()
			if err == ErrShort {
				break
			}
			evs = append(evs, eventOf(f, err))
			if fatal(err) {
				return evs, "fatal", -1
			}
		}
	}
	return evs, "short", fr.Buffered()
}

// framesReader reads data through a Reader over src.
func framesReader(src io.Reader) (evs []frameEvent, end string) {
	r := NewReader(src, fuzzMax)
	for {
		f, err := r.Next()
		switch {
		case err == io.EOF:
			return evs, "short:0"
		case err == io.ErrUnexpectedEOF:
			return evs, "short:partial"
		}
		evs = append(evs, eventOf(f, err))
		if fatal(err) {
			return evs, "fatal"
		}
	}
}

func sameEvents(a, b []frameEvent) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// chunkReader returns reads of the sizes in sizes, cycling.
type chunkReader struct {
	data  []byte
	sizes []int
	i     int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.data), c.sizes[c.i%len(c.sizes)])
	c.i++
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// frameSeeds are streams of frames for FuzzReadFrame.
func frameSeeds() [][]byte {
	var all []byte
	var seeds [][]byte
	for i, s := range samples() {
		if strings.HasSuffix(s.name, "/random1") && len(all) < 600 {
			all = AppendFrame(all, uint64(i), s.body)
		}
	}
	seeds = append(seeds, all)
	seeds = append(seeds, AppendPingRequest(AppendPingReply(nil, 1), 2))
	seeds = append(seeds, append(header(13, 0x7f, 0, 5), 1, 2, 3))
	seeds = append(seeds, AppendError(nil, OpPush, 3, CodeQueueFull, "full"))
	seeds = append(seeds, append(AppendPingRequest(nil, 1), header(fuzzMax, OpPush, 0, 2)...))
	return seeds
}

// FuzzReadFrame checks that the frame readers never panic and agree:
// ReadFrame over the whole input, a Framer fed the input split at every
// point and in random chunks, and a Reader reading it in random chunks.
func FuzzReadFrame(f *testing.F) {
	for _, s := range frameSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, wantEnd, wantLeft := framesWhole(data)
		check := func(how string, evs []frameEvent, end string, left int) {
			if !sameEvents(evs, want) || end != wantEnd || (end == "short" && left != wantLeft) {
				t.Fatalf("%s: %d events, end %s (%d left); whole buffer: %d events, end %s (%d left)",
					how, len(evs), end, left, len(want), wantEnd, wantLeft)
			}
		}
		// Split in two at every point (at most 128 points for long inputs,
		// so that executions stay cheap enough for the fuzzer to minimise).
		step := max(1, len(data)/128)
		for i := 0; i <= len(data); i += step {
			evs, end, left := framesChunked(data, []int{i})
			check("split at "+strconv.Itoa(i), evs, end, left)
		}
		// Random chunks, seeded by the input.
		h := fnv.New64a()
		h.Write(data)
		rnd := rand.New(rand.NewPCG(h.Sum64(), 1))
		var cuts []int
		for c := 0; c < len(data); c += 1 + rnd.IntN(40) {
			cuts = append(cuts, c)
		}
		evs, end, left := framesChunked(data, cuts)
		check("random chunks", evs, end, left)
		// One byte at a time.
		if len(data) <= 1024 {
			cuts = cuts[:0]
			for c := 1; c < len(data); c++ {
				cuts = append(cuts, c)
			}
			evs, end, left = framesChunked(data, cuts)
			check("byte by byte", evs, end, left)
		}

		// The Reader, whose end is io.EOF or io.ErrUnexpectedEOF.
		readerEnd := wantEnd
		if wantEnd == "short" {
			readerEnd = "short:0"
			if wantLeft > 0 {
				readerEnd = "short:partial"
			}
		}
		sizes := []int{1 + rnd.IntN(7), 1 + rnd.IntN(100), 1 + rnd.IntN(3)}
		for _, src := range []io.Reader{
			bytes.NewReader(data),
			iotest.OneByteReader(bytes.NewReader(data)),
			&chunkReader{data: data, sizes: sizes},
		} {
			evs, end := framesReader(src)
			if !sameEvents(evs, want) || end != readerEnd {
				t.Fatalf("reader: %d events, end %s; whole buffer: %d events, end %s", len(evs), end, len(want), readerEnd)
			}
		}
	})
}

// fuzzBody fuzzes the decoder of proto's type: seeded with valid encodings,
// it must never panic; whatever decodes must re-encode and decode to the
// same value, and decoding into a reused value must agree with a fresh one.
func fuzzBody(f *testing.F, proto Body) {
	var maxSample Body
	for _, s := range samples() {
		if bodyName(s.body) == bodyName(proto) {
			f.Add(bodyOf(s.body))
			if strings.HasSuffix(s.name, "/max") {
				maxSample = s.body
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v := newLike(proto)
		err := v.Decode(data)
		// The same bytes into a value that held a large one before.
		reused := newLike(proto)
		if derr := reused.Decode(bodyOf(maxSample)); derr != nil {
			t.Fatal(derr)
		}
		rerr := reused.Decode(data)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("fresh decode: %v; reused decode: %v", err, rerr)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("decode error %v is not ErrMalformed", err)
			}
			return
		}
		if d := equal(v, reused); d != "" {
			t.Fatalf("reused decode differs: %s", d)
		}
		checkReencode(t, v)
	})
}

func FuzzHelloRequest(f *testing.F)         { fuzzBody(f, &HelloRequest{}) }
func FuzzHelloReply(f *testing.F)           { fuzzBody(f, &HelloReply{}) }
func FuzzPingRequest(f *testing.F)          { fuzzBody(f, &PingRequest{}) }
func FuzzPingReply(f *testing.F)            { fuzzBody(f, &PingReply{}) }
func FuzzAuthRequest(f *testing.F)          { fuzzBody(f, &AuthRequest{}) }
func FuzzAuthReply(f *testing.F)            { fuzzBody(f, &AuthReply{}) }
func FuzzPushRequest(f *testing.F)          { fuzzBody(f, &PushRequest{}) }
func FuzzPushReply(f *testing.F)            { fuzzBody(f, &PushReply{}) }
func FuzzPopRequest(f *testing.F)           { fuzzBody(f, &PopRequest{}) }
func FuzzPopReply(f *testing.F)             { fuzzBody(f, &PopReply{}) }
func FuzzAckRequest(f *testing.F)           { fuzzBody(f, &AckRequest{}) }
func FuzzAckReply(f *testing.F)             { fuzzBody(f, &AckReply{}) }
func FuzzLeaseExtendRequest(f *testing.F)   { fuzzBody(f, &LeaseExtendRequest{}) }
func FuzzLeaseExtendReply(f *testing.F)     { fuzzBody(f, &LeaseExtendReply{}) }
func FuzzTransactionRequest(f *testing.F)   { fuzzBody(f, &TransactionRequest{}) }
func FuzzTransactionReply(f *testing.F)     { fuzzBody(f, &TransactionReply{}) }
func FuzzConfigureRequest(f *testing.F)     { fuzzBody(f, &ConfigureRequest{}) }
func FuzzConfigureReply(f *testing.F)       { fuzzBody(f, &ConfigureReply{}) }
func FuzzQueueInfoRequest(f *testing.F)     { fuzzBody(f, &QueueInfoRequest{}) }
func FuzzQueueInfoReply(f *testing.F)       { fuzzBody(f, &QueueInfoReply{}) }
func FuzzQueueListRequest(f *testing.F)     { fuzzBody(f, &QueueListRequest{}) }
func FuzzQueueListReply(f *testing.F)       { fuzzBody(f, &QueueListReply{}) }
func FuzzDeleteQueueRequest(f *testing.F)   { fuzzBody(f, &DeleteQueueRequest{}) }
func FuzzDeleteQueueReply(f *testing.F)     { fuzzBody(f, &DeleteQueueReply{}) }
func FuzzSeekRequest(f *testing.F)          { fuzzBody(f, &SeekRequest{}) }
func FuzzSeekReply(f *testing.F)            { fuzzBody(f, &SeekReply{}) }
func FuzzDeleteGroupRequest(f *testing.F)   { fuzzBody(f, &DeleteGroupRequest{}) }
func FuzzDeleteGroupReply(f *testing.F)     { fuzzBody(f, &DeleteGroupReply{}) }
func FuzzDLQListRequest(f *testing.F)       { fuzzBody(f, &DLQListRequest{}) }
func FuzzDLQListReply(f *testing.F)         { fuzzBody(f, &DLQListReply{}) }
func FuzzDLQRedriveRequest(f *testing.F)    { fuzzBody(f, &DLQRedriveRequest{}) }
func FuzzDLQRedriveReply(f *testing.F)      { fuzzBody(f, &DLQRedriveReply{}) }
func FuzzDLQPurgeRequest(f *testing.F)      { fuzzBody(f, &DLQPurgeRequest{}) }
func FuzzDLQPurgeReply(f *testing.F)        { fuzzBody(f, &DLQPurgeReply{}) }
func FuzzStatsRequest(f *testing.F)         { fuzzBody(f, &StatsRequest{}) }
func FuzzStatsReply(f *testing.F)           { fuzzBody(f, &StatsReply{}) }
func FuzzBrowseRequest(f *testing.F)        { fuzzBody(f, &BrowseRequest{}) }
func FuzzBrowseReply(f *testing.F)          { fuzzBody(f, &BrowseReply{}) }
func FuzzQueryRegisterRequest(f *testing.F) { fuzzBody(f, &QueryRegisterRequest{}) }
func FuzzQueryRegisterReply(f *testing.F)   { fuzzBody(f, &QueryRegisterReply{}) }
func FuzzCycleRequest(f *testing.F)         { fuzzBody(f, &CycleRequest{}) }
func FuzzCycleReply(f *testing.F)           { fuzzBody(f, &CycleReply{}) }
func FuzzStateGetRequest(f *testing.F)      { fuzzBody(f, &StateGetRequest{}) }
func FuzzStateGetReply(f *testing.F)        { fuzzBody(f, &StateGetReply{}) }
func FuzzMetadataRequest(f *testing.F)      { fuzzBody(f, &MetadataRequest{}) }
func FuzzMetadataReply(f *testing.F)        { fuzzBody(f, &MetadataReply{}) }
func FuzzRaftRequest(f *testing.F)          { fuzzBody(f, &RaftRequest{}) }
func FuzzRaftReply(f *testing.F)            { fuzzBody(f, &RaftReply{}) }

// FuzzErrorReply fuzzes the error reply body.
func FuzzErrorReply(f *testing.F) {
	f.Add(errBody(&ErrorReply{Code: CodeQueueFull, Message: "queue full"}))
	f.Add(errBody(&ErrorReply{}))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r ErrorReply
		if err := r.Decode(data); err != nil {
			return
		}
		var w ErrorReply
		if err := w.Decode(errBody(&r)); err != nil || w.Code != r.Code || w.Message != r.Message {
			t.Fatalf("re-decode: %+v %+v %v", r, w, err)
		}
	})
}

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the seed corpora under testdata/fuzz")

// corpusSeeds maps each fuzz target to the seeds committed for it.
func corpusSeeds() map[string][][]byte {
	out := map[string][][]byte{"FuzzReadFrame": frameSeeds()}
	for _, s := range samples() {
		if strings.HasSuffix(s.name, "/max") {
			continue // large; the fuzz targets add them with f.Add
		}
		name := "Fuzz" + bodyName(s.body)
		out[name] = append(out[name], bodyOf(s.body))
	}
	out["FuzzErrorReply"] = [][]byte{errBody(&ErrorReply{Code: CodeLeaseInvalid, Message: "lease expired"})}
	return out
}

func corpusFile(data []byte) string {
	return "go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n"
}

// TestSeedCorpus checks that every fuzz target has its seed corpus
// committed under testdata/fuzz, as written by -update-corpus.
func TestSeedCorpus(t *testing.T) {
	for name, seeds := range corpusSeeds() {
		dir := filepath.Join("testdata", "fuzz", name)
		if *updateCorpus {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for i, s := range seeds {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%d", i)), []byte(corpusFile(s)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		for i, s := range seeds {
			b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("seed-%d", i)))
			if err != nil {
				t.Errorf("%s: %v (run go test -run TestSeedCorpus -update-corpus)", name, err)
				continue
			}
			if string(b) != corpusFile(s) {
				t.Errorf("%s/seed-%d is stale (run go test -run TestSeedCorpus -update-corpus)", name, i)
			}
		}
	}
}

func errBody(r *ErrorReply) []byte { return r.AppendBody(nil) }
