package tcp_test

import (
	"errors"
	"net"
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

// A link's frames do not wait behind the clients' work (lane.go): while
// the clients' one event loop is held in a request, a Raft request that
// came over a link (a Hello naming protocol.LinkClientName) is taken at
// once, and a client's that came after the held one still waits. (The
// lane needs its P reserved: not with the Ps fixed by GOMAXPROCS.)
func TestTCPLinkHasALoopOfItsOwn(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	took := make(chan uint64, 4)
	entered, release := make(chan struct{}), make(chan struct{})
	f := newTCP(t, func(c *tcp.Config) {
		c.Loops = 1
		c.Raft = func(from uint64, _ []protocol.RaftMessage) error {
			if from == 1 {
				close(entered)
				select { // the clients' loop, busy
				case <-release:
				case <-time.After(10 * time.Second):
				}
			}
			took <- from
			return nil
		}
	})
	defer close(release)
	speakAs := func(name string) *speaker {
		nc, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		s := &speaker{t: t, nc: nc, rd: protocol.NewReader(nc, protocol.DefaultMaxFrame)}
		nc.Write(protocol.AppendHelloRequest(nil, 0, &protocol.HelloRequest{Major: protocol.VersionMajor, Minor: protocol.VersionMinor, ClientName: name}))
		s.next(nil)
		return s
	}
	raft := func(s *speaker, from uint64) {
		if _, err := s.nc.Write(protocol.AppendRaftRequest(nil, 1, &protocol.RaftRequest{From: from, Msgs: []protocol.RaftMessage{{Shard: 1, Data: []byte("m")}}})); err != nil {
			t.Fatal(err)
		}
	}
	busy, other := speakAs("a client"), speakAs("another client")
	link := speakAs(protocol.LinkClientName)
	raft(busy, 1)
	<-entered
	raft(other, 3)
	raft(link, 2)
	select {
	case from := <-took:
		if from != 2 {
			t.Fatalf("the request from %d was taken first, want the link's (2)", from)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the link's Raft request waited behind the clients' busy loop")
	}
	select {
	case from := <-took:
		t.Fatalf("the request from %d was taken while the clients' loop was held", from)
	case <-time.After(100 * time.Millisecond):
	}
}
