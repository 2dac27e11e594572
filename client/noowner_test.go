package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
)

// fakeReplicated is one broker of a replicated cluster, faked: its map
// names no owner of any shard until it has been asked for it unknownFor
// times (an election under way, or a broker that has just started and has
// not heard the leaders yet), then names itself for all; a pop gets no
// messages.
type fakeReplicated struct {
	ln         net.Listener
	unknownFor int64
	asked      atomic.Int64
	pops       atomic.Int64
	wg         sync.WaitGroup
	// deposed, when set and true, answers every push not_leader, as a
	// leader deposed while it held it does (and the next leader may
	// commit it).
	deposed *atomic.Bool
	// answers, when set, answers the n-th push with answers[n] (an error
	// code; CodeOK: queued), and the pushes after them queued.
	answers []protocol.Code
	pushes  atomic.Int64
	// ackAnswers does for acks what answers does for pushes, and
	// popAnswers for pops.
	ackAnswers []protocol.Code
	acks       atomic.Int64
	popAnswers []protocol.Code
	// owners, when set, is the map's owners once known, and brokers its
	// brokers.
	owners  []int32
	brokers []protocol.MetadataBroker
	// mapOf, when set, gives the map's node, owners and brokers at each
	// request for it.
	mapOf func() (node string, owners []int32, brokers []protocol.MetadataBroker)
	// frozen, when set and true, leaves every request after the Hello
	// unanswered, as a process stopped with SIGSTOP does (its
	// connections stay open).
	frozen *atomic.Bool
	// ackDelay holds each ack's answer back that long.
	ackDelay time.Duration
}

func startFakeReplicated(t *testing.T, unknownFor int64) *fakeReplicated {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeReplicated{ln: ln, unknownFor: unknownFor}
	t.Cleanup(func() { ln.Close(); f.wg.Wait() })
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				defer nc.Close()
				f.serve(nc)
			}()
		}
	}()
	return f
}

// dialFake dials f with one connection; ctx ends after d (both go at the
// test's end).
func dialFake(t *testing.T, f *fakeReplicated, d time.Duration) (*client.Client, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	c, err := client.Dial(ctx, f.ln.Addr().String(), client.WithConns(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, ctx
}

func (f *fakeReplicated) serve(nc net.Conn) {
	rd := protocol.NewReader(nc, 0)
	for {
		fr, err := rd.Next()
		if err != nil {
			return
		}
		var out []byte
		if f.frozen != nil && f.frozen.Load() && fr.Op != protocol.OpHello {
			continue
		}
		switch fr.Op {
		case protocol.OpHello:
			out = protocol.AppendHelloReply(nil, fr.ID, &protocol.HelloReply{Major: protocol.VersionMajor, Minor: protocol.VersionMinor,
				ServerName: "fake", MaxFrame: protocol.DefaultMaxFrame, MaxInFlight: 8})
		case protocol.OpMetadata:
			owner := int32(0)
			if f.asked.Add(1) <= f.unknownFor {
				owner = -1
			}
			md := &protocol.MetadataReply{Cluster: "fake", Node: "b1", Epoch: 1, Seed: 7, Shards: 4,
				Owners:  []int32{owner, owner, owner, owner},
				Brokers: []protocol.MetadataBroker{{ID: "b1", TCP: f.ln.Addr().String(), Live: true}}}
			if f.owners != nil {
				md.Owners, md.Brokers = f.owners, f.brokers
			}
			if f.mapOf != nil {
				md.Node, md.Owners, md.Brokers = f.mapOf()
			}
			out = protocol.AppendMetadataReply(nil, fr.ID, md)
		case protocol.OpPush:
			var req protocol.PushRequest
			if err := req.Decode(fr.Body); err != nil {
				return
			}
			if f.deposed != nil && f.deposed.Load() {
				out = protocol.AppendError(nil, fr.Op, fr.ID, protocol.CodeNotLeader, "deposed while it held the request")
				break
			}
			if n := f.pushes.Add(1) - 1; n < int64(len(f.answers)) && f.answers[n] != protocol.CodeOK {
				out = protocol.AppendError(nil, fr.Op, fr.ID, f.answers[n], "scripted answer")
				break
			}
			reply := &protocol.PushReply{}
			for range req.Items {
				reply.Items = append(reply.Items, protocol.PushResult{Status: protocol.PushQueued})
			}
			out = protocol.AppendPushReply(nil, fr.ID, reply)
		case protocol.OpAck:
			var req protocol.AckRequest
			if err := req.Decode(fr.Body); err != nil {
				return
			}
			time.Sleep(f.ackDelay)
			if n := f.acks.Add(1) - 1; n < int64(len(f.ackAnswers)) && f.ackAnswers[n] != protocol.CodeOK {
				out = protocol.AppendError(nil, fr.Op, fr.ID, f.ackAnswers[n], "scripted answer")
				break
			}
			out = protocol.AppendAckReply(nil, fr.ID, &protocol.AckReply{Items: make([]protocol.AckResult, len(req.Items))})
		case protocol.OpPop:
			if n := f.pops.Add(1) - 1; n < int64(len(f.popAnswers)) && f.popAnswers[n] != protocol.CodeOK {
				out = protocol.AppendError(nil, fr.Op, fr.ID, f.popAnswers[n], "scripted answer")
				break
			}
			out = protocol.AppendPopReply(nil, fr.ID, &protocol.PopReply{})
		default:
			out = protocol.AppendError(nil, fr.Op, fr.ID, protocol.CodeUnknownOp, "not faked")
		}
		if _, err := nc.Write(out); err != nil {
			return
		}
	}
}

// TestNoOwnerYetWaitsForTheMap: a request for a shard the map names no
// owner of asks for the map again, with pauses, and goes to the owner once
// one is named, instead of failing at once (the kill -9 checker's checks
// failed so, asking a broker that had just started).
func TestNoOwnerYetWaitsForTheMap(t *testing.T) {
	f := startFakeReplicated(t, 4)
	c, ctx := dialFake(t, f, 10*time.Second)
	if _, err := c.Pop(ctx, client.PopRequest{Queue: "q", Partition: "p", Group: "g"}); err != nil {
		t.Fatalf("pop while the map named no owner for a while: %v", err)
	}
	if f.pops.Load() != 1 || f.asked.Load() <= 4 {
		t.Fatalf("%d pops reached the broker after %d maps, want 1 after more than 4", f.pops.Load(), f.asked.Load())
	}
}

// TestNoOwnerAtAllIsUnavailable: a shard that keeps no owner is answered
// unavailable, once the wait for one is over, not held for ever.
func TestNoOwnerAtAllIsUnavailable(t *testing.T) {
	f := startFakeReplicated(t, 1<<40)
	c, ctx := dialFake(t, f, 30*time.Second)
	start := time.Now()
	_, err := c.Pop(ctx, client.PopRequest{Queue: "q", Partition: "p", Group: "g"})
	if protocol.CodeOf(err) != protocol.CodeUnavailable {
		t.Fatalf("pop with no owner ever: %v, want unavailable", err)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("unavailable came after %v", took)
	}
	if f.pops.Load() != 0 {
		t.Fatal("a pop reached a broker the map never named")
	}
}

// TestNotLeaderIsNoRefusal: a part of a push that its broker keeps
// answering not_leader (a leader deposed while it held it: the next one
// may store it) is not reported failed, item by item, beside the parts
// stored: the call fails, as a lost connection's would, and a resend with
// transactionIds is deduplicated.
func TestNotLeaderIsNoRefusal(t *testing.T) {
	bad := startFakeReplicated(t, 0)
	bad.deposed = new(atomic.Bool)
	bad.deposed.Store(true)
	res, err := pushToEveryShard(t, bad)
	if protocol.CodeOf(err) != protocol.CodeNotLeader {
		for _, r := range res {
			if r.Status == client.PushFailed {
				t.Fatalf("an item answered not_leader was reported failed (%v): it may be stored", r.Err)
			}
		}
		t.Fatalf("push across a deposed leader: %v, want the call to fail with not_leader", err)
	}
}

// pushToEveryShard pushes one item to each of the 4 shards of a cluster of
// two faked brokers (everyShard).
func pushToEveryShard(t *testing.T, bad *fakeReplicated) (client.PushResults, error) {
	t.Helper()
	c, parts := everyShard(t, bad)
	var items []client.Item
	for _, p := range parts {
		items = append(items, client.Item{Queue: "q", Partition: p, TransactionID: p, Payload: []byte(p)})
	}
	// Shorter than misroutedWait: a part answered not_leader for ever
	// ends the call with its answer when ctx ends.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return c.Push(ctx, items...)
}

// everyShard dials a cluster of two faked brokers, a good one and bad,
// which own two of its 4 shards each, and returns a partition of queue q
// in each shard.
func everyShard(t *testing.T, bad *fakeReplicated) (*client.Client, []string) {
	t.Helper()
	good := startFakeReplicated(t, 0)
	brokers := []protocol.MetadataBroker{{ID: "b1", TCP: good.ln.Addr().String(), Live: true}, {ID: "b2", TCP: bad.ln.Addr().String(), Live: true}}
	for _, f := range []*fakeReplicated{good, bad} {
		f.owners, f.brokers = []int32{0, 1, 0, 1}, brokers
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, good.ln.Addr().String(), client.WithConns(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	m, err := c.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	seen := map[int]bool{}
	for i := 0; len(seen) < 4; i++ {
		p := fmt.Sprint("p", i)
		if s := m.ShardOf("q", p); !seen[s] {
			seen[s] = true
			parts = append(parts, p)
		}
	}
	return c, parts
}

// TestARefusalAfterNotLeaderIsNoRefusal: a part answered not_leader and
// sent again is not reported failed when the resend is refused: the first
// send may be stored by the next leader (the kill -9 checker found such an
// item stored). The call fails instead, and a resend with transactionIds
// is deduplicated.
func TestARefusalAfterNotLeaderIsNoRefusal(t *testing.T) {
	bad := startFakeReplicated(t, 0)
	bad.answers = []protocol.Code{protocol.CodeNotLeader, protocol.CodeQueueFull}
	res, err := pushToEveryShard(t, bad)
	if bad.pushes.Load() < 2 {
		t.Fatalf("the deposed broker got %d pushes; the test needs the resend", bad.pushes.Load())
	}
	if err == nil {
		for _, r := range res {
			if r.Status == client.PushFailed {
				t.Fatalf("an item answered not_leader, then refused when sent again, was reported failed (%v): the first send may be stored", r.Err)
			}
		}
		t.Fatal("the push succeeded although the deposed broker never stored its part")
	}
}

// TestAnAckRefusedAfterNotLeaderIsNoRefusal: acks follow the push's rule
// (TestARefusalAfterNotLeaderIsNoRefusal): an item answered not_leader,
// then refused when sent again, may have been applied by the next leader,
// so the call fails rather than answer the item failed.
func TestAnAckRefusedAfterNotLeaderIsNoRefusal(t *testing.T) {
	bad := startFakeReplicated(t, 0)
	bad.ackAnswers = []protocol.Code{protocol.CodeNotLeader, protocol.CodeLeaseInvalid}
	c, parts := everyShard(t, bad)
	var msgs []client.Message
	for i, p := range parts {
		msgs = append(msgs, client.Message{Queue: "q", Partition: p, Group: "g", ID: client.ID{byte(i + 1)}, PartitionID: client.ID{9, byte(i)}, LeaseID: client.ID{7, byte(i)}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.Ack(ctx, msgs, client.Completed, client.AckOptions{})
	if bad.acks.Load() < 2 {
		t.Fatalf("the deposed broker got %d acks; the test needs the resend", bad.acks.Load())
	}
	if err == nil {
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("an ack answered not_leader, then refused when sent again, was reported failed (%v): the first send may be applied", r.Err)
			}
		}
		t.Fatal("the ack succeeded although the deposed broker never took its part")
	}
}

// TestANewLeaderStillBuildingIsWaitedFor: a broker that leads a shard but
// is still building its engine answers not_leader "ask again" (the map
// already names it). Pops, pushes and acks are sent again, after pauses,
// until it serves, instead of failing after four sendings in a few
// milliseconds (CI saw a pop fail so right after a lead was handed back).
func TestANewLeaderStillBuildingIsWaitedFor(t *testing.T) {
	building := make([]protocol.Code, 7)
	for i := range building {
		building[i] = protocol.CodeNotLeader
	}
	f := startFakeReplicated(t, 0)
	f.popAnswers, f.answers, f.ackAnswers = building, building, building
	c, ctx := dialFake(t, f, 30*time.Second)
	start := time.Now()
	if _, err := c.Pop(ctx, client.PopRequest{Queue: "q", Partition: "p", Group: "g"}); err != nil {
		t.Fatalf("pop while the leader built its engine: %v", err)
	}
	if got := f.pops.Load(); got != int64(len(building))+1 {
		t.Fatalf("%d pops reached the broker, want %d", got, len(building)+1)
	}
	// The pauses after the first four sendings: 25+50+100+200 ms.
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("the pop was sent %d times in %v: no pauses", f.pops.Load(), took)
	}
	res, err := c.Push(ctx, client.Item{Queue: "q", Partition: "p", Payload: []byte("x")})
	if err != nil || res.FirstErr() != nil {
		t.Fatalf("push while the leader built its engine: %v %v", res, err)
	}
	msg := client.Message{Queue: "q", Partition: "p", Group: "g", ID: client.ID{1}, PartitionID: client.ID{9}, LeaseID: client.ID{7}}
	ack, err := c.Ack(ctx, []client.Message{msg}, client.Completed, client.AckOptions{})
	if err != nil || ack[0].Err != nil {
		t.Fatalf("ack while the leader built its engine: %v %v", ack, err)
	}
	if f.pushes.Load() != int64(len(building))+1 || f.acks.Load() != int64(len(building))+1 {
		t.Fatalf("%d pushes and %d acks reached the broker, want %d each", f.pushes.Load(), f.acks.Load(), len(building)+1)
	}
}

// TestAStoppedLeaderIsGivenUp: a push, a pop, an ack and a transaction
// sent to a shard's leader that then stops without closing its connections
// (SIGSTOP) are given up once the map names the shard's new leader,
// instead of waiting for the old one to come back or for ctx: the push,
// the ack and the transaction fail with ErrLeadMoved (which wraps
// ErrConnLost: their fate is unknown), the pop goes to the new leader.
func TestAStoppedLeaderIsGivenUp(t *testing.T) {
	old := startFakeReplicated(t, 0)
	next := startFakeReplicated(t, 0)
	old.frozen = new(atomic.Bool)
	var moved atomic.Bool
	brokers := []protocol.MetadataBroker{{ID: "old", TCP: old.ln.Addr().String(), Live: true}, {ID: "next", TCP: next.ln.Addr().String(), Live: true}}
	mapOf := func(node string) func() (string, []int32, []protocol.MetadataBroker) {
		return func() (string, []int32, []protocol.MetadataBroker) {
			lead := int32(0)
			if moved.Load() {
				lead = 1
			}
			return node, []int32{lead, lead, lead, lead}, brokers
		}
	}
	old.mapOf, next.mapOf = mapOf("old"), mapOf("next")
	c, ctx := dialFake(t, next, 20*time.Second)
	old.frozen.Store(true)
	time.AfterFunc(300*time.Millisecond, func() { moved.Store(true) })

	type result struct {
		what string
		err  error
		took time.Duration
	}
	results := make(chan result, 4)
	start := time.Now()
	go func() {
		_, err := c.Transaction().Push(client.Item{Queue: "q", Partition: "p", Payload: []byte("t")}).Commit(ctx)
		results <- result{"transaction", err, time.Since(start)}
	}()
	go func() {
		_, err := c.Push(ctx, client.Item{Queue: "q", Partition: "p", Payload: []byte("x")})
		results <- result{"push", err, time.Since(start)}
	}()
	go func() {
		msg := client.Message{Queue: "q", Partition: "p", Group: "g", ID: client.ID{1}, PartitionID: client.ID{9}, LeaseID: client.ID{7}}
		_, err := c.Ack(ctx, []client.Message{msg}, client.Completed, client.AckOptions{})
		results <- result{"ack", err, time.Since(start)}
	}()
	go func() {
		_, err := c.Pop(ctx, client.PopRequest{Queue: "q", Partition: "p", Group: "g"})
		results <- result{"pop", err, time.Since(start)}
	}()
	for range 4 {
		r := <-results
		t.Logf("%s: %v after %v", r.what, r.err, r.took.Round(time.Millisecond))
		if r.took > 5*time.Second {
			t.Fatalf("the %s waited %v at the stopped leader", r.what, r.took)
		}
		switch r.what {
		case "pop":
			if r.err != nil {
				t.Fatalf("the pop was not sent to the new leader: %v", r.err)
			}
		default:
			if !errors.Is(r.err, client.ErrLeadMoved) || !errors.Is(r.err, client.ErrConnLost) {
				t.Fatalf("the %s: %v, want ErrLeadMoved (a lost connection's kind)", r.what, r.err)
			}
		}
	}
	if next.pops.Load() != 1 || next.pushes.Load() != 0 || next.acks.Load() != 0 {
		t.Fatalf("the new leader got %d pops, %d pushes, %d acks; want the pop alone", next.pops.Load(), next.pushes.Load(), next.acks.Load())
	}
}

// TestANamelessAckIsNotGivenUp: an ack of a message with no queue or
// partition (built by hand) goes to the broker dialled, whatever the map
// says; the lead watch leaves it be, however long it takes, though the map
// names another broker for the shard its empty names hash to.
func TestANamelessAckIsNotGivenUp(t *testing.T) {
	other := startFakeReplicated(t, 0)
	dialled := startFakeReplicated(t, 0)
	// The dialled broker's one connection is held by the ack: the map
	// comes from the other, within the ack's wait.
	dialled.ackDelay = 2500 * time.Millisecond
	brokers := []protocol.MetadataBroker{{ID: "other", TCP: other.ln.Addr().String(), Live: true}, {ID: "dialled", TCP: dialled.ln.Addr().String(), Live: true}}
	mapOf := func(node string) func() (string, []int32, []protocol.MetadataBroker) {
		return func() (string, []int32, []protocol.MetadataBroker) { return node, []int32{0, 0, 0, 0}, brokers }
	}
	other.mapOf, dialled.mapOf = mapOf("other"), mapOf("dialled")
	c, ctx := dialFake(t, dialled, 20*time.Second)
	msg := client.Message{ID: client.ID{1}, PartitionID: client.ID{9}, LeaseID: client.ID{7}}
	res, err := c.Ack(ctx, []client.Message{msg}, client.Completed, client.AckOptions{})
	if err != nil || res[0].Err != nil {
		t.Fatalf("a nameless ack answered after 2.5 s: %v %v", res, err)
	}
	if dialled.acks.Load() != 1 {
		t.Fatalf("the dialled broker got %d acks, want 1", dialled.acks.Load())
	}
}

// TestNoAddressYetWaitsForTheMap: a shard whose owner the map names live
// but with no address yet (its first map was written before its record,
// and its session is already up) is waited for as a shard with no owner
// is, not answered unavailable at once (CI saw TestClusterSemantics's
// first push fail so, right after three brokers started).
func TestNoAddressYetWaitsForTheMap(t *testing.T) {
	f := startFakeReplicated(t, 0)
	var asked atomic.Int64
	f.mapOf = func() (string, []int32, []protocol.MetadataBroker) {
		b := protocol.MetadataBroker{ID: "b1", Live: true}
		if asked.Add(1) > 4 {
			b.TCP = f.ln.Addr().String()
		}
		return "b1", []int32{0, 0, 0, 0}, []protocol.MetadataBroker{b}
	}
	c, ctx := dialFake(t, f, 10*time.Second)
	res, err := c.Push(ctx, client.Item{Queue: "q", Partition: "p", Payload: []byte("x")})
	if err != nil || res.FirstErr() != nil {
		t.Fatalf("push while the owner had no address for a while: %v %v", res, err)
	}
	if _, err := c.Pop(ctx, client.PopRequest{Queue: "q", Partition: "p", Group: "g"}); err != nil {
		t.Fatalf("pop: %v", err)
	}
	if f.pushes.Load() != 1 || asked.Load() <= 4 {
		t.Fatalf("%d pushes reached the broker after %d maps, want 1 after more than 4", f.pushes.Load(), asked.Load())
	}
}
