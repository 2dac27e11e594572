package protocol

import "strconv"

// The protocol version this package speaks. A change of Major is
// incompatible; a change of Minor adds opcodes or fields that a peer uses
// only once Hello showed that the other side has them.
const (
	VersionMajor uint16 = 1
	VersionMinor uint16 = 9
)

// Minor versions and what they added:
//
//	1.0  the first
//	1.1  HelloRequest.MaxFrame; PopReply.Cut (sent only to a client that
//	     said 1.1 or later in its Hello)
//	1.2  the Auth opcode (a bearer token on an open connection), and the
//	     error codes unauthenticated, forbidden and damaged; pages:
//	     QueueInfoRequest.After and Limit, QueueListRequest.After and Limit
//	     (sent only to a server that said 1.2 or later in its Hello reply);
//	     QueueInfoReply.More and QueueListReply.More (sent only to a client
//	     that said 1.2 or later)
//	1.3  the Browse opcode (messages read without a lease; sent only to a
//	     server that said 1.3 or later in its Hello reply: an older one
//	     answers unknown_op and closes the connection)
//	1.4  OptKeepUnset in a Configure's option set: the options not set
//	     keep their values (sent only to a server that said 1.4 or later
//	     in its Hello reply: an older one refuses the bit as malformed);
//	     the streams opcodes QueryRegister, Cycle and StateGet, and the
//	     error codes conflict and query_not_found (sent only to a server
//	     that said 1.4 or later)
//	1.5  PopReply of CompactMessages (sent only to a client that said 1.5
//	     or later in its Hello): a transactionId that is the message's
//	     id, and a partition and a lease that are the previous message's,
//	     are left out
//	1.6  the Metadata opcode (a cluster's shard map), and the error codes
//	     not_owner and unavailable
//	1.7  the Raft opcode: the link between the replicas of a shard (sent
//	     only by a broker of a replicated cluster to another)
//	1.8  the error code not_leader (a broker of a replicated cluster that
//	     does not lead the partition's shard)
//	1.9  a Raft request that is taken is not answered (a 1.7 or 1.8
//	     server answers it with an empty RaftReply, which the link
//	     discards); a refused one is still answered with an error

// LinkClientName is the ClientName of a Hello that opens a Raft link from
// one broker of a replicated cluster to another: the TCP door serves such
// a connection on an event loop apart from its clients'.
const LinkClientName = "regent-link"

// HelloRequest is the first frame a client sends on a connection.
//
//	u16 major | u16 minor | str clientName | [u32 maxFrame]   (1.1)
type HelloRequest struct {
	Major, Minor uint16
	ClientName   string
	// MaxFrame is the largest frame the client reads, header included (0:
	// not said; the server then assumes DefaultMaxFrame). The server keeps
	// every reply within it. A 1.0 server refuses a Hello that carries it:
	// say it only when it differs from DefaultMaxFrame.
	MaxFrame uint32
	arena
}

// HelloReply answers Hello with the server's version and limits.
//
//	u16 major | u16 minor | str serverName | u32 maxFrame | uv maxInFlight
type HelloReply struct {
	Major, Minor uint16
	ServerName   string
	MaxFrame     uint32 // largest frame the server accepts, header included
	MaxInFlight  uint32 // requests a client may have unanswered on one connection
	arena
}

// CheckVersion returns nil when a peer speaking major can talk to this
// package, or an error matching ErrVersionMismatch (the server answers
// Hello with it as an error reply).
func CheckVersion(major, minor uint16) error {
	if major == VersionMajor {
		return nil
	}
	return &Error{Code: CodeVersionMismatch, Msg: "client speaks protocol " + version(major, minor) +
		", server speaks " + version(VersionMajor, VersionMinor)}
}

func version(major, minor uint16) string {
	return strconv.Itoa(int(major)) + "." + strconv.Itoa(int(minor))
}

func (*HelloRequest) Op() Op        { return OpHello }
func (*HelloRequest) IsReply() bool { return false }
func (*HelloReply) Op() Op          { return OpHello }
func (*HelloReply) IsReply() bool   { return true }

func (r *HelloRequest) AppendBody(dst []byte) []byte {
	dst = appendU16(dst, r.Major)
	dst = appendU16(dst, r.Minor)
	dst = appendStr(dst, r.ClientName)
	if r.MaxFrame != 0 {
		dst = appendU32(dst, r.MaxFrame)
	}
	return dst
}

func (r *HelloRequest) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Major = d.u16()
	r.Minor = d.u16()
	r.ClientName = d.str()
	r.MaxFrame = 0
	if len(d.b) >= 4 { // 1.1; fewer bytes are trailing
		r.MaxFrame = d.u32()
	}
	return d.finish("hello request")
}

func (r *HelloReply) AppendBody(dst []byte) []byte {
	dst = appendU16(dst, r.Major)
	dst = appendU16(dst, r.Minor)
	dst = appendStr(dst, r.ServerName)
	dst = appendU32(dst, r.MaxFrame)
	return appendUv(dst, uint64(r.MaxInFlight))
}

func (r *HelloReply) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Major = d.u16()
	r.Minor = d.u16()
	r.ServerName = d.str()
	r.MaxFrame = d.u32()
	r.MaxInFlight = d.uv32()
	return d.finish("hello reply")
}

// AppendHelloRequest appends a whole Hello request frame.
func AppendHelloRequest(dst []byte, id uint64, r *HelloRequest) []byte {
	return AppendFrame(dst, id, r)
}

// AppendHelloReply appends a whole Hello reply frame.
func AppendHelloReply(dst []byte, id uint64, r *HelloReply) []byte { return AppendFrame(dst, id, r) }

// empty is a body with no fields.
type empty struct{}

func (*empty) AppendBody(dst []byte) []byte { return dst }

func (*empty) Decode(body []byte) error {
	if len(body) != 0 {
		return &Error{Code: CodeMalformed, Msg: "trailing bytes in a body that must be empty"}
	}
	return nil
}

// Detach does nothing: an empty body holds no strings.
func (*empty) Detach() {}

// PingRequest asks the server to answer at once (liveness, round trips).
// Its body is empty.
type PingRequest struct{ empty }

// PingReply answers Ping. Its body is empty.
type PingReply struct{ empty }

func (*PingRequest) Op() Op        { return OpPing }
func (*PingRequest) IsReply() bool { return false }
func (*PingReply) Op() Op          { return OpPing }
func (*PingReply) IsReply() bool   { return true }

// AppendPingRequest appends a whole Ping request frame.
func AppendPingRequest(dst []byte, id uint64) []byte { return AppendFrame(dst, id, &PingRequest{}) }

// AppendPingReply appends a whole Ping reply frame.
func AppendPingReply(dst []byte, id uint64) []byte { return AppendFrame(dst, id, &PingReply{}) }
