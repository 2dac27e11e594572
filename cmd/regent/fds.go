package main

import (
	"fmt"
	"syscall"
)

// Descriptors: a broker holds one per connection of either door, and a few
// of its own (the journal's segment, directory and lock, snapshots being
// written, listeners, the event loops' pollers, refused connections being
// answered). Running out of them failed the journal (and, before the TCP
// door accepted on its own listener, stopped that door for good), so serve
// raises the soft limit to the hard one at start, as NATS, etcd and nginx
// do, and sizes the doors' connection caps below it. The doors still pause
// and retry if an accept runs out.

// fdReserve is what the broker keeps beside its connections: its own files,
// sockets and pollers, and the 64 connections each door may be answering
// "too many connections" at once.
const fdReserve = 256

// defaultMaxConns is each door's cap when descriptors are plenty.
const defaultMaxConns = 10000

// raiseNoFile raises the soft limit on open descriptors to the hard limit and
// returns the limit now in force.
func raiseNoFile() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("reading the descriptor limit: %w", err)
	}
	if rl.Cur < rl.Max {
		raised := rl
		raised.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err == nil {
			rl = raised
		}
	}
	return rl.Cur, nil
}

// connCaps splits the descriptors a limit leaves beside fdReserve between
// the two doors: each gets half, and at most defaultMaxConns.
func connCaps(limit uint64) (tcp, http int, err error) {
	if limit < fdReserve+32 {
		return 0, 0, fmt.Errorf("the descriptor limit is %d: a broker needs at least %d (raise it with ulimit -n)", limit, fdReserve+32)
	}
	avail := min(limit-fdReserve, 2*defaultMaxConns)
	tcp = int(avail / 2)
	return tcp, int(avail) - tcp, nil
}
