package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"
	"testing/iotest"
)

// header builds a raw frame header.
func header(length uint32, op Op, flags Flags, id uint64) []byte {
	b := binary.BigEndian.AppendUint32(nil, length)
	b = append(b, byte(op), byte(flags))
	return binary.BigEndian.AppendUint64(b, id)
}

func TestParseHeader(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrShort},
		{"13 bytes", header(10, OpPing, 0, 1)[:13], ErrShort},
		{"ping", header(10, OpPing, 0, 1), nil},
		{"reply", header(10, OpPing, FlagReply, 1), nil},
		{"error reply", header(13, OpPing, FlagReply|FlagError, 1), nil},
		{"length below header", header(9, OpPing, 0, 1), ErrMalformed},
		{"undefined flag", header(10, OpPing, 4, 1), ErrMalformed},
		{"error without reply", header(10, OpPing, FlagError, 1), ErrMalformed},
		{"unknown op", header(10, 0x7f, 0, 1), ErrUnknownOp},
		{"op zero", header(10, 0, 0, 1), ErrUnknownOp},
		// ParseHeader does not know the cap: the length is the caller's check.
		{"huge", header(0xFFFFFFFF, OpPush, 0, 1), nil},
	}
	for _, c := range cases {
		h, err := ParseHeader(c.in)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
		if err == nil && (h.ID != 1 || h.Length != binary.BigEndian.Uint32(c.in)) {
			t.Errorf("%s: header %+v", c.name, h)
		}
	}
}

func TestReadFrameTooLarge(t *testing.T) {
	hdr := header(0xFFFFFFFF, OpPush, 0, 77)
	f, n, err := ReadFrame(hdr, DefaultMaxFrame)
	if !errors.Is(err, ErrTooLarge) || n != 0 || f.ID != 77 {
		t.Fatalf("f=%+v n=%d err=%v", f.Header, n, err)
	}
	if CodeOf(err) != CodeFrameTooLarge {
		t.Fatalf("code %v", CodeOf(err))
	}
	if !raceEnabled {
		if a := testing.AllocsPerRun(100, func() { _, _, _ = ReadFrame(hdr[:HeaderSize-1], DefaultMaxFrame) }); a != 0 {
			t.Errorf("short header: %v allocs", a)
		}
	}
	// Exactly at the cap passes, one byte above does not.
	at := header(DefaultMaxFrame-4, OpPush, 0, 1)
	if _, _, err := ReadFrame(at, 0); err != ErrShort {
		t.Errorf("frame of exactly the cap: %v", err)
	}
	above := header(DefaultMaxFrame-3, OpPush, 0, 1)
	if _, _, err := ReadFrame(above, 0); !errors.Is(err, ErrTooLarge) {
		t.Errorf("frame one above the cap: %v", err)
	}
	// A caller's cap, and one below the floor.
	small := header(100, OpPush, 0, 1)
	if _, _, err := ReadFrame(small, MinMaxFrame); err != ErrShort {
		t.Errorf("small frame under MinMaxFrame: %v", err)
	}
	if _, _, err := ReadFrame(header(MinMaxFrame, OpPush, 0, 1), 10); !errors.Is(err, ErrTooLarge) {
		t.Errorf("cap below MinMaxFrame is raised to it: %v", err)
	}
	// Too large wins over unknown opcode.
	if _, _, err := ReadFrame(header(0xFFFFFFFF, 0x7f, 0, 1), 0); !errors.Is(err, ErrTooLarge) {
		t.Errorf("too large with unknown op: %v", err)
	}
}

func TestReadFrameShortAtEveryPoint(t *testing.T) {
	frame := frameOf(&PushRequest{Items: []PushItem{{Queue: "q", Payload: []byte("hello")}}})
	for i := 0; i < len(frame); i++ {
		if _, n, err := ReadFrame(frame[:i], 0); err != ErrShort || n != 0 {
			t.Fatalf("prefix %d: n=%d err=%v", i, n, err)
		}
	}
	f, n, err := ReadFrame(append(frame, 0xAA), 0)
	if err != nil || n != len(frame) || f.Op != OpPush {
		t.Fatalf("whole: n=%d err=%v", n, err)
	}
	if cap(f.Body) != len(f.Body) {
		t.Error("body's capacity reaches into the next frame")
	}
}

func TestReadFrameUnknownOpIsSkippable(t *testing.T) {
	var b []byte
	b = append(b, header(13, 0x7f, 0, 5)...)
	b = append(b, 1, 2, 3)
	b = AppendPingRequest(b, 6)
	f, n, err := ReadFrame(b, 0)
	if !errors.Is(err, ErrUnknownOp) || n != 17 || f.ID != 5 || !bytes.Equal(f.Body, []byte{1, 2, 3}) {
		t.Fatalf("unknown op: %+v n=%d err=%v", f, n, err)
	}
	// Not before the whole frame is there.
	if _, n, err := ReadFrame(b[:16], 0); err != ErrShort || n != 0 {
		t.Fatalf("partial unknown op frame: n=%d err=%v", n, err)
	}
	f, _, err = ReadFrame(b[n:], 0)
	if err != nil || f.Op != OpPing || f.ID != 6 {
		t.Fatalf("next frame: %+v %v", f.Header, err)
	}
}

func TestFramerChunks(t *testing.T) {
	var stream []byte
	for i := range 20 {
		stream = AppendPushRequest(stream, uint64(i), &PushRequest{Items: []PushItem{{Queue: "q", Payload: bytes.Repeat([]byte{byte(i)}, i*50)}}})
	}
	for _, chunk := range []int{1, 2, 3, 7, 13, 100, 1000, len(stream)} {
		var fr Framer
		got := 0
		for off := 0; off < len(stream); off += chunk {
			fr.Feed(stream[off:min(off+chunk, len(stream))])
			for {
				f, err := fr.Next()
				if err == ErrShort {
					break
				}
				if err != nil {
					t.Fatalf("chunk %d: %v", chunk, err)
				}
				var r PushRequest
				if err := r.Decode(f.Body); err != nil || f.ID != uint64(got) || len(r.Items[0].Payload) != got*50 {
					t.Fatalf("chunk %d: frame %d: id %d err %v", chunk, got, f.ID, err)
				}
				got++
			}
		}
		if got != 20 || fr.Buffered() != 0 {
			t.Fatalf("chunk %d: %d frames, %d bytes left", chunk, got, fr.Buffered())
		}
	}
}

func TestFramerTooLargeIsSticky(t *testing.T) {
	fr := Framer{MaxFrame: MinMaxFrame}
	fr.Feed(header(MinMaxFrame, OpPush, 0, 3))
	f, err := fr.Next()
	if !errors.Is(err, ErrTooLarge) || f.ID != 3 {
		t.Fatalf("%+v %v", f.Header, err)
	}
	fr.Feed(make([]byte, 100))
	if _, err := fr.Next(); !errors.Is(err, ErrTooLarge) || fr.Buffered() != 0 {
		t.Fatalf("not sticky: %v, %d buffered", err, fr.Buffered())
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestReader(t *testing.T) {
	var stream []byte
	stream = AppendPingRequest(stream, 1)
	stream = append(stream, header(11, 0x7f, 0, 2)...)
	stream = append(stream, 9)
	big := bytes.Repeat([]byte("z"), 300<<10)
	stream = AppendPushRequest(stream, 3, &PushRequest{Items: []PushItem{{Queue: "q", Payload: big}}})
	for _, name := range []string{"whole", "one byte", "half"} {
		var src io.Reader = bytes.NewReader(stream)
		switch name {
		case "one byte":
			src = iotest.OneByteReader(src)
		case "half":
			src = iotest.HalfReader(src)
		}
		r := NewReader(src, 0)
		f, err := r.Next()
		if err != nil || f.Op != OpPing || f.ID != 1 {
			t.Fatalf("%s: ping: %+v %v", name, f.Header, err)
		}
		f, err = r.Next()
		if !errors.Is(err, ErrUnknownOp) || f.ID != 2 || !bytes.Equal(f.Body, []byte{9}) {
			t.Fatalf("%s: unknown op: %+v %v", name, f, err)
		}
		f, err = r.Next()
		var p PushRequest
		if err != nil || p.Decode(f.Body) != nil || !bytes.Equal(p.Items[0].Payload, big) {
			t.Fatalf("%s: push: %+v %v", name, f.Header, err)
		}
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("%s: end: %v", name, err)
		}
	}
}

func TestReaderErrors(t *testing.T) {
	// Too large: stops after the header, reads nothing more.
	src := &countingReader{r: bytes.NewReader(append(header(0xFFFFFFFF, OpPush, 0, 4), make([]byte, 1000)...))}
	r := NewReader(src, 0)
	f, err := r.Next()
	if !errors.Is(err, ErrTooLarge) || f.ID != 4 || src.n != HeaderSize {
		t.Fatalf("too large: %+v %v, read %d", f.Header, err, src.n)
	}
	if _, err := r.Next(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("not sticky: %v", err)
	}
	// A claimed 16 MiB frame that sends 10 bytes: the buffer stays small.
	r = NewReader(bytes.NewReader(append(header(DefaultMaxFrame-4, OpPush, 0, 1), make([]byte, 10)...)), 0)
	if _, err := r.Next(); err != io.ErrUnexpectedEOF {
		t.Fatalf("truncated body: %v", err)
	}
	if cap(r.buf) > 64<<10 {
		t.Fatalf("buffer grew to %d for 10 bytes", cap(r.buf))
	}
	// A truncated header.
	r = NewReader(bytes.NewReader(header(10, OpPing, 0, 1)[:5]), 0)
	if _, err := r.Next(); err != io.ErrUnexpectedEOF {
		t.Fatalf("truncated header: %v", err)
	}
	// A malformed header.
	r = NewReader(bytes.NewReader(header(10, OpPing, 0x80, 1)), 0)
	if _, err := r.Next(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("bad flags: %v", err)
	}
}

func TestErrorReply(t *testing.T) {
	b := AppendError(nil, OpAck, 12, CodeLeaseInvalid, "lease expired")
	f, _, err := ReadFrame(b, 0)
	if err != nil || !f.IsReply() || !f.IsError() || f.Op != OpAck || f.ID != 12 {
		t.Fatalf("%+v %v", f.Header, err)
	}
	var r ErrorReply
	if err := r.Decode(f.Body); err != nil {
		t.Fatal(err)
	}
	e := r.Err()
	if e.Code != CodeLeaseInvalid || e.Msg != "lease expired" {
		t.Fatalf("%+v", e)
	}
	if !bytes.Equal(AppendErr(nil, OpAck, 12, e), b) {
		t.Error("AppendErr of an *Error")
	}
	b = AppendErr(nil, OpAck, 12, fmt.Errorf("ack: %w", e))
	f, _, _ = ReadFrame(b, 0)
	if err := r.Decode(f.Body); err != nil || r.Code != CodeLeaseInvalid || r.Message != "ack: lease_invalid: lease expired" {
		t.Errorf("AppendErr of a wrapped *Error: %+v %v", r, err)
	}
	b = AppendErr(nil, OpAck, 12, io.EOF)
	f, _, _ = ReadFrame(b, 0)
	if err := r.Decode(f.Body); err != nil || r.Code != CodeInternal || r.Message != "EOF" {
		t.Errorf("AppendErr of a plain error: %+v %v", r, err)
	}
	if err := r.Decode([]byte{0}); !errors.Is(err, ErrMalformed) {
		t.Errorf("short error body: %v", err)
	}
}

func TestPatchLength(t *testing.T) {
	b := AppendHeader([]byte("xy"), OpPing, 0, 1)
	b = append(b, 1, 2, 3)
	PatchLength(b, 2)
	if binary.BigEndian.Uint32(b[2:]) != 13 {
		t.Fatal("PatchLength")
	}
}
