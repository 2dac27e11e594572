package tcp_test

import (
	"errors"
	"testing"
	"time"

	"github.com/regentmq/regent/netserver/tcp"
	"github.com/regentmq/regent/protocol"
)

// A Raft request the server takes is not answered (1.9): the next frame on
// the connection answers the request after it. One that is refused, or
// that a broker keeping no replicas gets, is answered with an error.
func TestTCPRaftRequestsAreOneWay(t *testing.T) {
	got := make(chan int, 4)
	f := newTCP(t, func(c *tcp.Config) {
		c.Raft = func(from uint64, msgs []protocol.RaftMessage) error {
			if from == 99 {
				return errors.New("not a member (test)")
			}
			got <- len(msgs)
			return nil
		}
	})
	s := speak(t, f, protocol.VersionMinor, protocol.DefaultMaxFrame)
	raft := func(id, from uint64) {
		req := &protocol.RaftRequest{From: from, Msgs: []protocol.RaftMessage{{Shard: 1, Data: []byte("a")}, {Shard: 2, Data: []byte("b")}}}
		if _, err := s.nc.Write(protocol.AppendRaftRequest(nil, id, req)); err != nil {
			t.Fatal(err)
		}
	}
	raft(1, 7)
	if _, err := s.nc.Write(protocol.AppendFrame(nil, 2, &protocol.PingRequest{})); err != nil {
		t.Fatal(err)
	}
	expect := func(id uint64, isErr bool) {
		t.Helper()
		s.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		fr, err := s.rd.Next()
		if err != nil || fr.ID != id || fr.IsError() != isErr {
			t.Fatalf("the next frame: %v, id %d (error %v); want id %d (error %v)", err, fr.ID, fr.IsError(), id, isErr)
		}
	}
	expect(2, false) // the ping's answer: none came for the Raft request
	select {
	case n := <-got:
		if n != 2 {
			t.Fatalf("the server took %d messages, want 2", n)
		}
	default:
		t.Fatal("the Raft request was not taken")
	}
	raft(3, 99)
	expect(3, true)

	plain := speak(t, newTCP(t), protocol.VersionMinor, protocol.DefaultMaxFrame)
	if _, err := plain.nc.Write(protocol.AppendRaftRequest(nil, 4, &protocol.RaftRequest{From: 7})); err != nil {
		t.Fatal(err)
	}
	s = plain
	expect(4, true)
}
