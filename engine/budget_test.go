package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
)

// popCut pops and also returns whether the byte budget cut the answer.
func (f *fixture) popCut(req PopRequest) ([]Message, bool) {
	f.t.Helper()
	type answer struct {
		m   []Message
		cut bool
		err error
	}
	ch := make(chan answer, 1)
	f.e.PopAsync(req, func(m []Message, cut bool, err error) { ch <- answer{m, cut, err} })
	a := <-ch
	if a.err != nil {
		f.t.Fatalf("pop: %v", a.err)
	}
	return a.m, a.cut
}

// TestPopByteBudget: a pop fills its answer up to its byte budget, never
// past it but always with one message at least; leases and autoAck cover
// exactly what was answered, so 30 messages of 1 MiB popped with batch 30
// all arrive, in order, over several pops, none lost.
func TestPopByteBudget(t *testing.T) {
	for _, autoAck := range []bool{false, true} {
		t.Run(fmt.Sprintf("autoAck=%v", autoAck), func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.MaxPopBytes = 8 << 20; c.CacheBytes = 4 << 20 })
			payload := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, 1<<20) }
			for i := 0; i < 30; i++ {
				f.pushItems(PushItem{Queue: "big", Partition: "p", TransactionID: fmt.Sprint("m", i), Payload: payload(i)})
			}
			next := 0
			pops := 0
			for next < 30 {
				msgs, cut := f.popCut(PopRequest{Queue: "big", Group: "g", Batch: 30, AutoAck: autoAck})
				pops++
				if len(msgs) == 0 {
					t.Fatalf("pop %d answered nothing with messages %d.. waiting", pops, next)
				}
				sum := 0
				for _, m := range msgs {
					sum += MessageBytes(len(m.Payload), m.TransactionID, m.TraceID, m.Partition, m.ProducerSub)
					if m.Offset != uint64(next) || !bytes.Equal(m.Payload, payload(next)) {
						t.Fatalf("pop %d: offset %d, want %d (or its payload differs)", pops, m.Offset, next)
					}
					next++
				}
				if sum > 8<<20 {
					t.Fatalf("pop %d answered %d bytes with a budget of %d", pops, sum, 8<<20)
				}
				if cut != (next < 30) {
					t.Fatalf("pop %d: cut=%v with %d of 30 answered", pops, cut, next)
				}
				if !autoAck {
					f.ackMsgs(msgs, Completed) // every message of the lease acks: the lease covers exactly them
				}
			}
			if pops < 4 {
				t.Fatalf("30 MiB answered in %d pops with a budget of 8 MiB", pops)
			}
			if m := f.pop(PopRequest{Queue: "big", Group: "g", Batch: 30}); len(m) != 0 {
				t.Fatalf("%d messages left after all 30 were answered", len(m))
			}
		})
	}
}

// TestPopBudgetTooSmallForOneMessage: a message larger than a pop's whole
// budget (a client with small frames) is not taken: a pop of its partition
// answers ErrTooLarge and leases nothing, a pop of any partition answers the
// others' messages (and puts it behind them), and a pop whose budget holds
// it takes it; a budget that holds one message answers one, cut.
func TestPopBudgetTooSmallForOneMessage(t *testing.T) {
	f := newFixture(t)
	big := string(bytes.Repeat([]byte{'A'}, 400))
	f.push("q", "a", big, "a2")
	f.push("q", "b", "b1")
	ctx := context.Background()
	if m, err := f.e.Pop(ctx, PopRequest{Queue: "q", Partition: "a", Group: "g", MaxBytes: 300}); !errors.Is(err, ErrTooLarge) || len(m) != 0 {
		t.Fatalf("a 300-byte budget for a 400-byte message: %d messages, %v (want ErrTooLarge)", len(m), err)
	}
	msgs, cut := f.popCut(PopRequest{Queue: "q", Group: "g", Batch: 10, Partitions: 2, MaxBytes: 300})
	if payloads(msgs) != "b1" || cut {
		t.Fatalf("any partition with a 300-byte budget: %s cut=%v (want b1)", payloads(msgs), cut)
	}
	f.ackMsgs(msgs, Completed)
	one := MessageBytes(len(big), "", "", "a", "")
	msgs, cut = f.popCut(PopRequest{Queue: "q", Group: "g", Batch: 10, Partitions: 2, MaxBytes: one + 10})
	if len(msgs) != 1 || string(msgs[0].Payload) != big || !cut {
		t.Fatalf("a budget for one message: %d messages, cut=%v", len(msgs), cut)
	}
	f.ackMsgs(msgs, Completed)
	if got := payloads(f.pop(PopRequest{Queue: "q", Group: "g", Batch: 10, Partitions: 2})); got != "a2" {
		t.Fatalf("then: %s", got)
	}
}

// TestPopBudgetReadsBackOnlyWhatFits: messages no longer in memory are read
// back from the journal up to the pop's budget, not a whole batch's worth.
func TestPopBudgetReadsBackOnlyWhatFits(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.CacheBytes = 1 << 20; c.MaxPopBytes = 2 << 20 })
	for i := 0; i < 40; i++ {
		f.pushItems(PushItem{Queue: "cold", Partition: "p", Payload: bytes.Repeat([]byte{'x'}, 512<<10)})
	}
	f.restart() // nothing in memory
	before := f.e.Stats().CacheBytes
	msgs, cut := f.popCut(PopRequest{Queue: "cold", Group: "g", Batch: 40})
	if len(msgs) != 3 || !cut {
		t.Fatalf("a 2 MiB budget over 512 KiB messages answered %d, cut=%v (want 3, cut)", len(msgs), cut)
	}
	if grew := f.e.Stats().CacheBytes - before; grew > 4<<20 {
		t.Fatalf("the cache grew by %d bytes for a pop of 1.5 MiB", grew)
	}
}

// TestLaggingGroupKeepsTheCacheWithinBudget: a group reading a backlog that
// is no longer in memory reads it back pop by pop, and what it read leaves
// memory again once taken when the cache is over its budget, even while
// another group has finished none of it: the cache does not grow with the
// backlog (it grew by the whole backlog before).
//
// With new pushes: while the group reads the backlog back, pushes fill the
// tail; they still drop the older half of what is in memory once the cache
// is over its budget, though the chunks in front of the tail (the backlog)
// are all out of memory (without skipping those, the cache held five to
// seven times its budget).
func TestLaggingGroupKeepsTheCacheWithinBudget(t *testing.T) {
	for _, tc := range []struct {
		name          string
		backlog, size int
		pushes        int // pushed after each pop
	}{
		{"backlog", 40, 256 << 10, 0},
		{"with new pushes", 400, 64 << 10, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const budget = 1 << 20
			f := newFixture(t, func(c *Config) { c.CacheBytes = budget })
			item := PushItem{Queue: "lag", Partition: "p", Payload: bytes.Repeat([]byte{'x'}, tc.size)}
			for i := 0; i < tc.backlog; i++ {
				f.pushItems(item)
			}
			f.restart()
			f.pop(PopRequest{Queue: "lag", Group: "slow"}) // a group that holds every message back
			peak := int64(0)
			for n := 0; n < min(tc.backlog, 200); {
				msgs := f.pop(PopRequest{Queue: "lag", Group: "g", Batch: 4, AutoAck: true})
				if len(msgs) == 0 {
					t.Fatalf("nothing popped after %d of %d", n, tc.backlog)
				}
				n += len(msgs)
				for range tc.pushes {
					f.pushItems(item)
				}
				peak = max(peak, f.e.Stats().CacheBytes)
			}
			if peak > 2*budget {
				t.Fatalf("the cache held %d bytes with a budget of %d while a group read a backlog back", peak, budget)
			}
		})
	}
}
