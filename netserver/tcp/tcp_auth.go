package tcp

import (
	"fmt"
	"strings"
	"time"

	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/protocol"
)

// Authentication on the binary protocol (protocol 1.2, see protocol/doc.go):
// the client sends its token in an Auth frame after Hello; the server
// verifies it once (signature and claims) and keeps what it allows on the
// connection. Each request is then checked against the level of its opcode
// (netserver's access table) and the token's expiry: two comparisons, no cryptography.

// connAuth is what a connection's accepted token allows. The event loop
// alone reads and writes it.
type connAuth struct {
	ok      bool            // an Auth was accepted (and none refused since)
	lv      netserver.Level // the token's role
	expires int64           // Unix nanoseconds past which the token authorizes nothing (0: never)
	sub     string          // the token's subject, stamped on pushes as producerSub
}

// authorize reports whether the connection may run op now. When it may
// not, the request has been answered: unauthenticated (no token, a refused
// one, or one expired since) or forbidden (a role below the op's level).
// The connection stays open.
func (tc *tcpConn) authorize(op protocol.Op, id uint64) bool {
	a := tc.s.auth
	if a == nil {
		return true
	}
	lv, listed := netserver.OpLevel(op)
	if !listed && op.Known() {
		lv = netserver.LevelAdmin // an opcode without a row (TestEveryOperationHasALevel forbids it) is not open
	}
	if lv == netserver.LevelPublic {
		return true
	}
	ca := &tc.auth
	switch {
	case !ca.ok:
		tc.send(errReply{op, id, protocol.NewError(protocol.CodeUnauthenticated,
			"this broker requires a token: send one (Auth) after Hello")})
		return false
	case ca.expires != 0 && a.Now().UnixNano() > ca.expires:
		tc.send(errReply{op, id, protocol.NewError(protocol.CodeUnauthenticated,
			"the token expired at "+time.Unix(0, ca.expires).UTC().Format(time.RFC3339)+": send a new one (Auth)")})
		return false
	case ca.lv < lv:
		tc.send(errReply{op, id, protocol.NewError(protocol.CodeForbidden,
			fmt.Sprintf("the token's role (%s) does not allow %s, which needs %s", ca.lv.Role(), op, lv))})
		return false
	}
	return true
}

// authenticate serves an Auth request: it verifies the token and keeps
// what it allows, replacing what the connection had; a refused token
// leaves the connection unauthenticated. A malformed body closes the
// connection, as for any request.
func (tc *tcpConn) authenticate(id uint64, body []byte) bool {
	var req protocol.AuthRequest
	if err := req.Decode(body); err != nil {
		tc.send(errReply{protocol.OpAuth, id, err})
		return false
	}
	a := tc.s.auth
	if a == nil {
		tc.send(bodyReply{id, &protocol.AuthReply{}})
		return true
	}
	tc.auth = connAuth{}
	c, err := a.Verify(strings.TrimSpace(req.Token))
	if err != nil {
		tc.send(errReply{protocol.OpAuth, id, protocol.NewError(protocol.CodeUnauthenticated, "invalid token: "+err.Error())})
		return true
	}
	tc.auth = connAuth{ok: true, lv: c.Level(), sub: c.Subject}
	if !c.Expires.IsZero() {
		tc.auth.expires = c.Expires.UnixNano()
	}
	tc.send(bodyReply{id, &protocol.AuthReply{Enforced: true, Role: c.Level().Role(), Expires: tc.auth.expires, Subject: c.Subject}})
	return true
}

// producerSub is the subject stamped on the connection's pushes: the
// token's when auth is on ("" otherwise; the binary protocol carries no
// producerSub of its own, so none can be forged).
func (tc *tcpConn) producerSub() string { return tc.auth.sub }
