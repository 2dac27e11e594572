package protocol

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
	"strconv"
)

// Op is a frame's opcode. A request and its reply carry the same opcode; the
// reply flag tells them apart.
type Op uint8

// The opcodes. Numbers are stable; 0 is never used.
const (
	OpHello       Op = 0x01
	OpPing        Op = 0x02
	OpAuth        Op = 0x03 // 1.2
	OpPush        Op = 0x10
	OpPop         Op = 0x11
	OpAck         Op = 0x12
	OpLeaseExtend Op = 0x13
	OpTransaction Op = 0x14
	OpConfigure   Op = 0x20
	OpQueueInfo   Op = 0x21
	OpQueueList   Op = 0x22
	OpDeleteQueue Op = 0x23
	OpSeek        Op = 0x24
	OpDeleteGroup Op = 0x25
	OpDLQList     Op = 0x26
	OpStats       Op = 0x27
	OpDLQRedrive  Op = 0x28
	OpDLQPurge    Op = 0x29
	OpBrowse      Op = 0x2A // 1.3
	// Streams (1.4).
	OpQueryRegister Op = 0x2B
	OpCycle         Op = 0x2C
	OpStateGet      Op = 0x2D
	// Cluster (1.6).
	OpMetadata Op = 0x2E
	// The link between the replicas of a cluster's shards (1.7).
	OpRaft Op = 0x2F
)

var opNames = [256]string{
	OpHello:         "hello",
	OpPing:          "ping",
	OpAuth:          "auth",
	OpPush:          "push",
	OpPop:           "pop",
	OpAck:           "ack",
	OpLeaseExtend:   "lease_extend",
	OpTransaction:   "transaction",
	OpConfigure:     "configure",
	OpQueueInfo:     "queue_info",
	OpQueueList:     "queue_list",
	OpDeleteQueue:   "delete_queue",
	OpSeek:          "seek",
	OpDeleteGroup:   "delete_group",
	OpDLQList:       "dlq_list",
	OpStats:         "stats",
	OpDLQRedrive:    "dlq_redrive",
	OpDLQPurge:      "dlq_purge",
	OpBrowse:        "browse",
	OpQueryRegister: "query_register",
	OpCycle:         "cycle",
	OpStateGet:      "state_get",
	OpMetadata:      "metadata",
	OpRaft:          "raft",
}

// Known reports whether op is an opcode of this protocol version.
func (op Op) Known() bool { return opNames[op] != "" }

// String returns the opcode's name ("push"), or "op(0xNN)".
func (op Op) String() string {
	if n := opNames[op]; n != "" {
		return n
	}
	return "op(0x" + strconv.FormatUint(uint64(op), 16) + ")"
}

// Ops returns every known opcode, in numeric order.
func Ops() []Op {
	var out []Op
	for i := range opNames {
		if opNames[i] != "" {
			out = append(out, Op(i))
		}
	}
	return out
}

// Flags is a frame's flag byte.
type Flags uint8

const (
	// FlagReply marks a reply (server to client).
	FlagReply Flags = 1 << 0
	// FlagError marks an error reply; it is set only with FlagReply, and
	// the body is an ErrorReply (u16 code | str message).
	FlagError Flags = 1 << 1

	flagsKnown = FlagReply | FlagError
)

// Frame geometry.
const (
	// HeaderSize is the size of a frame header: u32 length | u8 opcode |
	// u8 flags | u64 request id.
	HeaderSize = 14
	// headerAfterLen is the part of the header the length field counts.
	headerAfterLen = HeaderSize - 4
	// DefaultMaxFrame is the default cap on a frame's size (header
	// included): 16 MiB.
	DefaultMaxFrame = 16 << 20
	// MinMaxFrame is the smallest cap ReadFrame accepts; smaller caps are
	// raised to it.
	MinMaxFrame = 4 << 10
)

// Header is a decoded frame header.
type Header struct {
	Length uint32 // bytes after the length field: 10 + body length
	Op     Op
	Flags  Flags
	ID     uint64 // request id, copied by the server into its reply
}

// Size is the size of the whole frame, length field included.
func (h Header) Size() int { return 4 + int(h.Length) }

// BodyLen is the size of the frame's body.
func (h Header) BodyLen() int { return int(h.Length) - headerAfterLen }

// IsReply reports whether the frame is a reply.
func (h Header) IsReply() bool { return h.Flags&FlagReply != 0 }

// IsError reports whether the frame is an error reply.
func (h Header) IsError() bool { return h.Flags&FlagError != 0 }

// CheckSize returns an error matching ErrTooLarge when the frame is above
// maxFrame bytes (maxFrame <= 0 means DefaultMaxFrame).
func (h Header) CheckSize(maxFrame int) error {
	if uint64(h.Size()) > uint64(normMax(maxFrame)) {
		return &Error{Code: CodeFrameTooLarge, Msg: "frame of " + strconv.Itoa(h.Size()) +
			" bytes is above the maximum of " + strconv.Itoa(normMax(maxFrame))}
	}
	return nil
}

func normMax(m int) int {
	switch {
	case m <= 0:
		return DefaultMaxFrame
	case m < MinMaxFrame:
		return MinMaxFrame
	case uint64(m) > math.MaxUint32:
		return math.MaxUint32
	}
	return m
}

// ParseHeader decodes the header at the start of b. It needs HeaderSize
// bytes (else ErrShort) and checks what the header alone can tell: a length
// too small to hold the rest of the header and flags this version does not
// define (ErrMalformed), and an unknown opcode (ErrUnknownOp; the header is
// returned too, so the frame can be answered and skipped). It does not check
// the size cap: see Header.CheckSize and ReadFrame.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, ErrShort
	}
	h := Header{
		Length: binary.BigEndian.Uint32(b),
		Op:     Op(b[4]),
		Flags:  Flags(b[5]),
		ID:     binary.BigEndian.Uint64(b[6:]),
	}
	switch {
	case h.Length < headerAfterLen:
		return h, &Error{Code: CodeMalformed, Msg: "frame length " + strconv.Itoa(int(h.Length)) + " is below the header size"}
	case h.Flags&^flagsKnown != 0:
		return h, &Error{Code: CodeMalformed, Msg: "undefined flag bits 0x" + strconv.FormatUint(uint64(h.Flags), 16)}
	case h.Flags&(FlagReply|FlagError) == FlagError:
		return h, &Error{Code: CodeMalformed, Msg: "error flag without reply flag"}
	case !h.Op.Known():
		return h, &Error{Code: CodeUnknownOp, Msg: "unknown opcode 0x" + strconv.FormatUint(uint64(h.Op), 16)}
	}
	return h, nil
}

// Frame is one frame: its header and its body. Body aliases the buffer the
// frame was read from.
type Frame struct {
	Header
	Body []byte
}

// ReadFrame reads the frame at the start of b, a buffer the caller owns
// (a connection's inbound buffer), without copying and without allocating.
// It returns the frame, the bytes it takes in b, and:
//
//   - nil: a whole, well-formed frame of a known opcode;
//   - ErrShort (n = 0): b does not yet hold the whole frame; when b holds a
//     header, the frame's size is already checked, so the caller may wait
//     for Header.Size() bytes;
//   - ErrTooLarge (n = 0): the header claims more than maxFrame bytes
//     (maxFrame <= 0 means DefaultMaxFrame). Detected from the 14 header
//     bytes alone, before anything is buffered for it. Fatal to the stream:
//     answer with the header's id, then close;
//   - ErrMalformed (n = 0): a header no version of the protocol would send.
//     Fatal to the stream;
//   - ErrUnknownOp (n = frame size): a whole frame with an opcode this
//     version does not know. Not fatal: answer CodeUnknownOp, skip n bytes
//     and go on.
//
// Errors other than ErrShort match with errors.Is and carry details.
func ReadFrame(b []byte, maxFrame int) (Frame, int, error) {
	h, err := ParseHeader(b)
	if err == ErrShort {
		return Frame{}, 0, err
	}
	if serr := h.CheckSize(maxFrame); serr != nil {
		return Frame{Header: h}, 0, serr
	}
	if err != nil && !errors.Is(err, ErrUnknownOp) {
		return Frame{Header: h}, 0, err
	}
	if len(b) < h.Size() {
		return Frame{Header: h}, 0, ErrShort
	}
	n := h.Size()
	return Frame{Header: h, Body: b[HeaderSize:n:n]}, n, err
}

// fatal reports whether a ReadFrame error leaves the stream unusable.
func fatal(err error) bool {
	return err != nil && err != ErrShort && !errors.Is(err, ErrUnknownOp)
}

// Framer cuts frames out of a byte stream that arrives in chunks of any
// size. It keeps the bytes of the frame being assembled in its own buffer,
// which grows only as bytes are fed (never to a claimed length), and checks
// the size cap as soon as a header is complete.
//
// The zero Framer uses DefaultMaxFrame.
type Framer struct {
	MaxFrame int // cap on a frame's size; <= 0 means DefaultMaxFrame

	buf []byte
	off int   // start of unread bytes in buf
	err error // a fatal error, sticky
}

// Feed appends p to the stream. It invalidates the bodies of frames
// returned before.
func (f *Framer) Feed(p []byte) {
	if f.err != nil {
		return
	}
	switch {
	case f.off == len(f.buf):
		f.buf, f.off = f.buf[:0], 0
	case f.off > 0 && len(f.buf)+len(p) > cap(f.buf):
		// Move the unread bytes to the front before growing.
		n := copy(f.buf, f.buf[f.off:])
		f.buf, f.off = f.buf[:n], 0
	}
	f.buf = append(f.buf, p...)
}

// Next returns the next whole frame, or ErrShort when more bytes are
// needed. Errors are those of ReadFrame; fatal ones are sticky. The frame's
// body is valid until the next call to Feed.
func (f *Framer) Next() (Frame, error) {
	if f.err != nil {
		return Frame{}, f.err
	}
	fr, n, err := ReadFrame(f.buf[f.off:], f.MaxFrame)
	if fatal(err) {
		f.err = err
		f.buf, f.off = nil, 0
		return fr, err
	}
	f.off += n
	return fr, err
}

// Buffered is the number of bytes fed but not yet returned as frames.
func (f *Framer) Buffered() int { return len(f.buf) - f.off }

// Reader reads frames from an io.Reader (a client's connection): it reads
// the header, checks the size cap, then reads the body into a buffer it
// reuses. The buffer grows with the bytes that actually arrive (doubling),
// so a peer that claims a large frame and sends nothing costs nothing.
type Reader struct {
	r        io.Reader
	maxFrame int
	hdr      [HeaderSize]byte
	buf      []byte
	err      error
}

// NewReader returns a Reader of r with a frame size cap (<= 0 means
// DefaultMaxFrame).
func NewReader(r io.Reader, maxFrame int) *Reader {
	return &Reader{r: r, maxFrame: maxFrame}
}

// Next reads the next frame. The body is valid until the next call.
// Errors: those of ReadFrame (ErrUnknownOp comes with the whole frame and
// is not sticky), io.EOF at a clean end between frames, and
// io.ErrUnexpectedEOF or the reader's error inside a frame. All errors but
// ErrUnknownOp are sticky.
func (r *Reader) Next() (Frame, error) {
	if r.err != nil {
		return Frame{}, r.err
	}
	fr, err := r.next()
	if err != nil && !errors.Is(err, ErrUnknownOp) {
		r.err = err
	}
	return fr, err
}

func (r *Reader) next() (Frame, error) {
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		return Frame{}, err
	}
	h, err := ParseHeader(r.hdr[:])
	if serr := h.CheckSize(r.maxFrame); serr != nil {
		return Frame{Header: h}, serr
	}
	if err != nil && !errors.Is(err, ErrUnknownOp) {
		return Frame{Header: h}, err
	}
	need := h.BodyLen()
	body := r.buf[:0]
	for len(body) < need {
		chunk := need - len(body)
		if step := max(len(body), 64<<10); chunk > step {
			chunk = step
		}
		if cap(body)-len(body) < chunk {
			nb := make([]byte, len(body), len(body)+chunk)
			copy(nb, body)
			body = nb
		}
		m, rerr := io.ReadFull(r.r, body[len(body):len(body)+chunk])
		body = body[:len(body)+m]
		if rerr != nil {
			r.buf = body
			if rerr == io.EOF {
				rerr = io.ErrUnexpectedEOF
			}
			return Frame{Header: h}, rerr
		}
	}
	r.buf = body
	return Frame{Header: h, Body: body[:need:need]}, err
}

// Body is implemented by every request and reply type: it knows its opcode
// and direction, appends its body, and decodes a body into itself.
type Body interface {
	Op() Op
	IsReply() bool
	// AppendBody appends the encoded body (no header) to dst.
	AppendBody(dst []byte) []byte
	// Decode replaces the value with the body's contents. Strings and byte
	// slices in the result live in the value's own arena and are valid
	// until the next Decode into the same value (or for good after
	// Detach); body itself is not retained. On error the value's contents
	// are unspecified.
	Decode(body []byte) error
}

// AppendHeader appends a frame header with a zero length; PatchLength sets
// it once the body is appended. Most callers use AppendFrame.
func AppendHeader(dst []byte, op Op, flags Flags, id uint64) []byte {
	dst = append(dst, 0, 0, 0, 0, byte(op), byte(flags))
	return binary.BigEndian.AppendUint64(dst, id)
}

// appendCountedStart begins a frame whose body opens with an item count
// (the streaming encoders: push and ack requests).
func appendCountedStart(dst []byte, op Op, id uint64, count int) (out []byte, start int) {
	start = len(dst)
	dst = AppendHeader(dst, op, 0, id)
	return appendUv(dst, uint64(count)), start
}

// PatchLength writes the length of the frame that starts at dst[start:]
// (and runs to the end of dst) into its header. A frame longer than the u32
// length can say gets 0xFFFFFFFF, which every receiver rejects as too large.
func PatchLength(dst []byte, start int) {
	n := uint64(len(dst) - start - 4)
	if n > math.MaxUint32 {
		n = math.MaxUint32
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(n))
}

// AppendFrame appends a whole frame (header, body, patched length) carrying
// b with request id id. The caller checks the result's size against the
// peer's maximum frame size when it may be large.
func AppendFrame(dst []byte, id uint64, b Body) []byte {
	var fl Flags
	if b.IsReply() {
		fl = FlagReply
	}
	start := len(dst)
	dst = AppendHeader(dst, b.Op(), fl, id)
	dst = b.AppendBody(dst)
	PatchLength(dst, start)
	return dst
}

// ErrorReply is the body of an error reply: u16 code | str message. It
// answers a request of any opcode (the reply carries the request's opcode
// and the flags reply|error).
type ErrorReply struct {
	Code    Code
	Message string
	arena
}

// AppendBody appends the body of an error reply.
func (r *ErrorReply) AppendBody(dst []byte) []byte {
	return appendStr(appendU16(dst, uint16(r.Code)), r.Message)
}

// Decode decodes the body of an error reply, as Body.Decode does.
func (r *ErrorReply) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Code = Code(d.u16())
	r.Message = d.str()
	return d.finish("error reply")
}

// Err returns the reply as an *Error (with its own copy of the message).
func (r *ErrorReply) Err() *Error {
	return &Error{Code: r.Code, Msg: string([]byte(r.Message))}
}

// AppendError appends an error reply to a request of opcode op with id.
func AppendError(dst []byte, op Op, id uint64, code Code, msg string) []byte {
	start := len(dst)
	dst = AppendHeader(dst, op, FlagReply|FlagError, id)
	dst = appendStr(appendU16(dst, uint16(code)), msg)
	PatchLength(dst, start)
	return dst
}

// AppendErr appends an error reply for err: the code of the first *Error in
// its chain (CodeOf: CodeInternal when there is none) and its message (an
// *Error's Msg, or the whole text of a wrapping error, context included).
func AppendErr(dst []byte, op Op, id uint64, err error) []byte {
	if e, ok := err.(*Error); ok {
		return AppendError(dst, op, id, e.Code, e.Msg)
	}
	return AppendError(dst, op, id, CodeOf(err), err.Error())
}
