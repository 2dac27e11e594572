//go:build !unix

package tcp

import "errors"

// peekSocket is not done here: every connection is enrolled with the
// clients' (links included).
func peekSocket(uintptr, []byte) (int, error) { return 0, errors.ErrUnsupported }
