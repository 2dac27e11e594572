package netserver

import (
	"context"
	"errors"
	"strings"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/protocol"
)

// errorCodes is the one table from engine errors to wire codes. Both
// transports use it: the binary protocol sends the code, the HTTP bridge
// answers with the code's HTTP status (HTTPStatus).
var errorCodes = []struct {
	err  error
	code protocol.Code
}{
	// Wrappers first: a transaction abort or a journal failure carries the
	// error that caused it, and the wrapper is what the caller must see.
	{engine.ErrTxnAborted, protocol.CodeTxnAborted},
	{engine.ErrJournal, protocol.CodeJournal},
	{engine.ErrClosed, protocol.CodeClosed},
	{engine.ErrDeposed, protocol.CodeNotLeader}, // a replicated shard's engine whose lead moved
	{engine.ErrInvalid, protocol.CodeInvalid},
	{engine.ErrQueueNotFound, protocol.CodeQueueNotFound},
	{engine.ErrPartitionNotFound, protocol.CodePartitionNotFound},
	{engine.ErrGroupNotFound, protocol.CodeGroupNotFound},
	{engine.ErrMessageNotFound, protocol.CodeMessageNotFound},
	{engine.ErrLeaseInvalid, protocol.CodeLeaseInvalid},
	{engine.ErrLeaseRequired, protocol.CodeLeaseRequired},
	{engine.ErrNotInFlight, protocol.CodeNotInFlight},
	{engine.ErrAlreadyAcked, protocol.CodeAlreadyAcked},
	{engine.ErrTooLarge, protocol.CodeTooLarge},
	{engine.ErrQueueFull, protocol.CodeQueueFull},
	{engine.ErrOverloaded, protocol.CodeOverloaded},
	{engine.ErrEncryption, protocol.CodeEncryption},
	{engine.ErrUnreadable, protocol.CodeDamaged},
	{engine.ErrBadUUID, protocol.CodeInvalid},
	{engine.ErrConflict, protocol.CodeConflict},
	{engine.ErrQueryNotFound, protocol.CodeQueryNotFound},
	{context.DeadlineExceeded, protocol.CodeOverloaded},
}

// CodeOf maps an error from the engine (or a protocol error) to its wire
// code: the code a *protocol.Error carries, else the first row of the table
// err matches (errors.Is), else protocol.CodeInternal; CodeOK for nil.
func CodeOf(err error) protocol.Code {
	if err == nil {
		return protocol.CodeOK
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	for _, ec := range errorCodes {
		if errors.Is(err, ec.err) {
			return ec.code
		}
	}
	return protocol.CodeInternal
}

// MessageOf is err's text as the binary protocol sends it beside its code
// (CodeOf): without the code's name in front, which a *protocol.Error
// wrapped first puts there (fmt.Errorf("%w: shard %d", ErrNotLeader, ...))
// and the receiver puts back (protocol.Error.Error). Sent whole, a client
// read "not_leader: not_leader: this broker does not lead the shard".
func MessageOf(err error) string {
	msg := err.Error()
	if prefix := CodeOf(err).String() + ": "; strings.HasPrefix(msg, prefix) {
		return msg[len(prefix):]
	}
	return msg
}

// HTTPStatus is the HTTP status for err: its code's (protocol.Code.HTTPStatus),
// a plain int so that this package need not import net/http.
func HTTPStatus(err error) int { return CodeOf(err).HTTPStatus() }
