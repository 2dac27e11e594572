package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// Get returns a TCP port on 127.0.0.1 that was free a moment ago.
func Get() (int, error) {
	lo, _ := ephemeralRange()
	for range 1000 {
		port := 10000 + rand.IntN(max(lo-10000, 1))
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		return port, nil
	}
	return 0, errors.New("freeport: no free port below the ephemeral range")
}

// Addr is Get as "127.0.0.1:port".
func Addr() (string, error) {
	p, err := Get()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", p), nil
}

// ephemeralRange is the kernel's range of ports for port 0 and outgoing
// connections (Linux's default where it cannot be read).
func ephemeralRange() (lo, hi int) {
	lo, hi = 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			l, err1 := strconv.Atoi(f[0])
			h, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && l > 10001 {
				lo, hi = l, h
			}
		}
	}
	return lo, hi
}
