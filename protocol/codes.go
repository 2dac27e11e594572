package protocol

import (
	"errors"
	"strconv"
)

// Code is a stable numeric error code. It travels in error replies, in the
// per-item results of Push, Ack and Transaction, and in the abort code of a
// Transaction. Numbers are never reused or renumbered; new codes are added
// at the end.
type Code uint16

// The error codes. Each has a name (String) and the HTTP status the HTTP
// bridge answers with (HTTPStatus); both come from the table below.
const (
	CodeOK                Code = 0  // success
	CodeInvalid           Code = 1  // a request the broker cannot act on (bad name, bad option, bad value)
	CodeQueueNotFound     Code = 2  // the named queue does not exist
	CodePartitionNotFound Code = 3  // the named partition does not exist
	CodeGroupNotFound     Code = 4  // the consumer group has never read the queue
	CodeMessageNotFound   Code = 5  // no message with that id, offset or transactionId
	CodeLeaseInvalid      Code = 6  // the lease is not the live lease of that (group, partition)
	CodeLeaseRequired     Code = 7  // an ack without a lease id on a server that checks leases
	CodeNotInFlight       Code = 8  // the message is not in flight for that group
	CodeAlreadyAcked      Code = 9  // the message already took a different ack in this lease
	CodeTooLarge          Code = 10 // a payload or request above the broker's limits
	CodeQueueFull         Code = 11 // the queue is at its maxSize
	CodeClosed            Code = 12 // the broker is shutting down
	CodeJournal           Code = 13 // the journal cannot take changes (failed: until restarted; disk full: until space is freed)
	CodeTxnAborted        Code = 14 // a transaction was not applied because one of its operations was refused
	CodeUnknownOp         Code = 15 // the frame's opcode is not one this server knows
	CodeFrameTooLarge     Code = 16 // the frame is above the maximum frame size
	CodeMalformed         Code = 17 // the frame or its body does not follow the wire format
	CodeOverloaded        Code = 18 // too many requests in flight on this connection or server
	CodeVersionMismatch   Code = 19 // the client's major protocol version differs from the server's
	CodeInternal          Code = 20 // a bug or an unexpected failure in the server
	CodeEncryption        Code = 21 // a sealed payload cannot be sealed or opened (no key, or another key)
	CodeUnauthenticated   Code = 22 // no valid token: none given, expired, or refused (1.2)
	CodeForbidden         Code = 23 // the token's role does not allow the operation (1.2)
	CodeDamaged           Code = 24 // a message cannot be read back: its stored data went bad (that partition only; 1.2)
	CodeConflict          Code = 25 // the request contradicts what is there: a streams query's config hash changed (1.4)
	CodeQueryNotFound     Code = 26 // no streams query is registered with that id (1.4)
	CodeNotOwner          Code = 27 // a cluster's broker that does not own the partition's shard: ask Metadata and go to its owner (1.6)
	CodeUnavailable       Code = 28 // the shard's owner is down or cannot be reached; its partitions wait for it (1.6)
	CodeNotLeader         Code = 29 // a replicated shard's replica that does not lead it: ask Metadata, or the leader the message names, and go there (1.8)
)

// codeInfo is one row of the code table.
type codeInfo struct {
	name string
	http int
}

// codeTable is THE table of error codes: name and HTTP status, indexed by
// code. The HTTP bridge answers with HTTPStatus, except where its own API
// says otherwise (refused acks are per-item answers inside a 200 reply).
//
// QueueFull is 429 Too Many Requests rather than 507 Insufficient Storage:
// a full queue is a consumer-side backlog that drains as consumers ack, so
// the right client behaviour is to back off and try again, which is what
// 429 tells HTTP clients and proxies; 507 is a WebDAV status that clients
// treat as a server fault, and the server's storage is not what ran out.
var codeTable = [...]codeInfo{
	CodeOK:                {"ok", 200},
	CodeInvalid:           {"invalid", 400},
	CodeQueueNotFound:     {"queue_not_found", 404},
	CodePartitionNotFound: {"partition_not_found", 404},
	CodeGroupNotFound:     {"group_not_found", 404},
	CodeMessageNotFound:   {"message_not_found", 404},
	CodeLeaseInvalid:      {"lease_invalid", 409},
	CodeLeaseRequired:     {"lease_required", 400},
	CodeNotInFlight:       {"not_in_flight", 409},
	CodeAlreadyAcked:      {"already_acked", 409},
	CodeTooLarge:          {"too_large", 413},
	CodeQueueFull:         {"queue_full", 429},
	CodeClosed:            {"closed", 503},
	CodeJournal:           {"journal", 503},
	CodeTxnAborted:        {"txn_aborted", 409},
	CodeUnknownOp:         {"unknown_op", 400},
	CodeFrameTooLarge:     {"frame_too_large", 413},
	CodeMalformed:         {"malformed", 400},
	CodeOverloaded:        {"overloaded", 429},
	CodeVersionMismatch:   {"version_mismatch", 400},
	CodeInternal:          {"internal", 500},
	CodeEncryption:        {"encryption", 500},
	CodeUnauthenticated:   {"unauthenticated", 401},
	CodeForbidden:         {"forbidden", 403},
	CodeDamaged:           {"damaged", 500},
	CodeConflict:          {"conflict", 409},
	CodeQueryNotFound:     {"query_not_found", 404},
	CodeNotOwner:          {"not_owner", 421},
	CodeUnavailable:       {"unavailable", 503},
	CodeNotLeader:         {"not_leader", 421},
}

// Known reports whether c is in the code table.
func (c Code) Known() bool { return int(c) < len(codeTable) }

// String returns the code's stable name ("queue_not_found"), or "code(N)"
// for a code this version does not know.
func (c Code) String() string {
	if c.Known() {
		return codeTable[c].name
	}
	return "code(" + strconv.Itoa(int(c)) + ")"
}

// HTTPStatus returns the HTTP status for c; 500 for an unknown code.
func (c Code) HTTPStatus() int {
	if c.Known() {
		return codeTable[c].http
	}
	return 500
}

// Codes returns every known code, in numeric order.
func Codes() []Code {
	out := make([]Code, len(codeTable))
	for i := range out {
		out[i] = Code(i)
	}
	return out
}

// ParseCode returns the code with the given name.
func ParseCode(name string) (Code, bool) {
	for i := range codeTable {
		if codeTable[i].name == name {
			return Code(i), true
		}
	}
	return 0, false
}

// Error is an error with a wire code. Two *Error values match under
// errors.Is when their codes are equal, whatever their messages, so the
// sentinels below (and NewError(code, "")) can be used as targets.
type Error struct {
	Code Code
	Msg  string
}

// NewError returns an *Error.
func NewError(c Code, msg string) *Error { return &Error{Code: c, Msg: msg} }

func (e *Error) Error() string {
	if e.Msg == "" {
		return e.Code.String()
	}
	return e.Code.String() + ": " + e.Msg
}

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// CodeOf returns the code of the first *Error in err's chain: CodeOK for a
// nil error and CodeInternal for an error without a code.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// Sentinels for the errors this package returns itself. Compare with
// errors.Is: the errors returned carry more specific messages.
var (
	// ErrShort: the buffer does not yet hold a whole frame (not a wire
	// error: read more and try again).
	ErrShort = errors.New("protocol: short buffer")
	// ErrTooLarge: the frame's length is above the maximum frame size. The
	// stream cannot be resynchronised: answer (if the header was read) and
	// close the connection.
	ErrTooLarge = &Error{Code: CodeFrameTooLarge}
	// ErrUnknownOp: the frame's opcode is unknown. The frame is well-formed
	// and can be skipped: answer CodeUnknownOp and go on.
	ErrUnknownOp = &Error{Code: CodeUnknownOp}
	// ErrMalformed: a header or body that does not follow the wire format.
	ErrMalformed = &Error{Code: CodeMalformed}
	// ErrVersionMismatch: a Hello with a different major version.
	ErrVersionMismatch = &Error{Code: CodeVersionMismatch}
)
