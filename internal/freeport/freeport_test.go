package freeport

import (
	"net"
	"testing"
)

// TestGetIsFreeAndBelowTheEphemeralRange: a port from Get can be listened
// on, and lies below the range port 0 draws from.
func TestGetIsFreeAndBelowTheEphemeralRange(t *testing.T) {
	lo, _ := ephemeralRange()
	for range 20 {
		addr, err := Addr()
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port < 10000 || port >= lo {
			t.Fatalf("port %d is outside 10000..%d", port, lo)
		}
	}
}
