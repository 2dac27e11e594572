package protocol

import "strconv"

// Role is what a token lets a connection do, from the least to the most:
// each role may do what the roles below it may. The numbers travel in
// AuthReply.
type Role uint8

const (
	// RoleNone: a valid token that names none of the broker's roles (it
	// may say Hello, Ping and Auth, nothing else).
	RoleNone Role = 0
	// RoleReadOnly: reads (queue lists and descriptions, the dead-letter
	// queue, stats).
	RoleReadOnly Role = 1
	// RoleReadWrite: push, pop, ack, lease extension, transactions,
	// configure, seek, dead-letter redrive.
	RoleReadWrite Role = 2
	// RoleAdmin: deletes and purges.
	RoleAdmin Role = 3
)

var roleNames = [...]string{"none", "read-only", "read-write", "admin"}

// String returns the role's name ("read-write"), or "role(N)".
func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return "role(" + strconv.Itoa(int(r)) + ")"
}

// AuthRequest (1.2) gives the connection a bearer token, a JWT, the one an
// HTTP client sends as "Authorization: Bearer <token>". It may be sent at
// any time after Hello, again and again: each one replaces what the
// connection had, so a client renews its token before it expires without a
// new connection. A refused one leaves the connection unauthenticated.
//
//	str token
type AuthRequest struct {
	Token string
	arena
}

// AuthReply answers an accepted AuthRequest.
//
//	bool enforced | u8 role | i64 expires | str subject
type AuthReply struct {
	// Enforced is false when the server does not check tokens (auth is
	// off): the connection may do everything, and the other fields are
	// zero.
	Enforced bool
	// Role is what the token lets the connection do.
	Role Role
	// Expires is when the token stops authorizing new requests (Unix
	// nanoseconds, the exp claim plus the server's clock skew; 0: never).
	Expires int64
	// Subject is the token's sub claim, which the server stamps on the
	// messages the connection pushes (producerSub).
	Subject string
	arena
}

func (*AuthRequest) Op() Op        { return OpAuth }
func (*AuthRequest) IsReply() bool { return false }
func (*AuthReply) Op() Op          { return OpAuth }
func (*AuthReply) IsReply() bool   { return true }

func (r *AuthRequest) AppendBody(dst []byte) []byte { return appendStr(dst, r.Token) }

func (r *AuthRequest) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Token = d.str()
	return d.finish("auth request")
}

func (r *AuthReply) AppendBody(dst []byte) []byte {
	dst = appendBool(dst, r.Enforced)
	dst = append(dst, byte(r.Role))
	dst = appendI64(dst, r.Expires)
	return appendStr(dst, r.Subject)
}

func (r *AuthReply) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Enforced = d.bool()
	r.Role = Role(d.u8())
	r.Expires = d.i64()
	r.Subject = d.str()
	return d.finish("auth reply")
}

// AppendAuthRequest appends a whole Auth request frame.
func AppendAuthRequest(dst []byte, id uint64, r *AuthRequest) []byte { return AppendFrame(dst, id, r) }

// AppendAuthReply appends a whole Auth reply frame.
func AppendAuthReply(dst []byte, id uint64, r *AuthReply) []byte { return AppendFrame(dst, id, r) }
