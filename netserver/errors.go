package netserver

import (
	"context"
	"errors"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/protocol"
)

// errorCodes is the one table from engine errors to wire codes. Both
// transports use it: the binary protocol sends the code, the HTTP bridge
// answers with the code's HTTP status (protocol.Code.HTTPStatus).
var errorCodes = []struct {
	err  error
	code protocol.Code
}{
	// Wrappers first: a transaction abort or a journal failure carries the
	// error that caused it, and the wrapper is what the caller must see.
	{engine.ErrTxnAborted, protocol.CodeTxnAborted},
	{engine.ErrJournal, protocol.CodeJournal},
	{engine.ErrClosed, protocol.CodeClosed},
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
	{context.DeadlineExceeded, protocol.CodeOverloaded},
}

// codeOf maps an error from the engine (or a protocol error) to its code.
func codeOf(err error) protocol.Code {
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

// httpStatus is the HTTP status for err.
func httpStatus(err error) int { return codeOf(err).HTTPStatus() }
