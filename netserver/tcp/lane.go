package tcp

import (
	"errors"
	"net"
	"syscall"
	"time"

	"github.com/regentmq/regent/protocol"
)

// The links' lane. On a broker of a replicated cluster the Raft messages of
// every shard come from the other brokers over their links, and a leader
// that does not hear its followers within an election timeout steps down
// (CheckQuorum). On the event loops that serve clients, a link's frames
// waited behind the clients' work: under 50 clients pushing 15 MiB
// batches, a loop spent seconds decoding and compressing pushes between
// two reads of a link, heartbeats and append responses waited as long, and
// leaders stepped down dozens of times a minute with no broker down. So a
// link gets an event loop of its own: the accept loop looks at a new
// connection's first frame without taking it from the socket (MSG_PEEK),
// and a Hello that names protocol.LinkClientName is enrolled on the lane.
//
// The lane has a P of its own (reserveProcs), and only then is there one:
// where the Ps are fixed (the GOMAXPROCS environment variable,
// Config.FixedProcs), its loop would wait for the clients' loops' Ps at
// every frame of a link, and links are served with the clients as before.
// Three replicated brokers on two cores with GOMAXPROCS=1 each pushed a
// quarter to a third less with a lane than without (266,495 to 291,262
// msgs/s against 385,980 to 413,153: regent bench push, three alternated
// runs each), while with the Ps reserved the two were alike.
//
// Everything else about the connection is as on any loop (its Hello,
// authentication, every opcode); a client that names itself so gains a
// loop shared with the links, nothing more.

// lanePeekTimeout is how long the accept loop waits for a new connection's
// first frame before it enrolls the connection with the clients'.
const lanePeekTimeout = 200 * time.Millisecond

// peekLink reports whether nc's first frame, when it comes within
// lanePeekTimeout, is a Hello that names protocol.LinkClientName. It reads
// nothing off the socket.
func peekLink(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	deadline := time.Now().Add(lanePeekTimeout)
	if nc.SetReadDeadline(deadline) != nil {
		return false
	}
	defer nc.SetReadDeadline(time.Time{})
	buf := make([]byte, protocol.MinMaxFrame)
	for {
		var n int
		var perr error
		err := rc.Read(func(fd uintptr) bool {
			n, perr = peekSocket(fd, buf)
			return !errors.Is(perr, syscall.EAGAIN)
		})
		if err != nil || perr != nil || n == 0 {
			return false // the deadline, or the peer closed or failed
		}
		f, _, ferr := protocol.ReadFrame(buf[:n], len(buf))
		switch {
		case ferr == nil:
			if f.Header.Op != protocol.OpHello {
				return false
			}
			var h protocol.HelloRequest
			return h.Decode(f.Body) == nil && h.ClientName == protocol.LinkClientName
		case errors.Is(ferr, protocol.ErrShort) && n < len(buf) && time.Now().Before(deadline):
			// The frame is not all there yet: a peek would find the same
			// bytes at once, so give the rest a moment to come.
			time.Sleep(time.Millisecond)
		default:
			return false
		}
	}
}
