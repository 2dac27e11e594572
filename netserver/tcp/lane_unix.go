//go:build unix

package tcp

import "golang.org/x/sys/unix"

// peekSocket reads what fd holds into buf without taking it off the socket.
func peekSocket(fd uintptr, buf []byte) (int, error) {
	n, _, err := unix.Recvfrom(int(fd), buf, unix.MSG_PEEK)
	return n, err
}
