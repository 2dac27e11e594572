package engine

import (
	"errors"
	"testing"
	"time"
)

// With Config.JournalLeases a lease outlives the engine that granted it:
// the next engine over the same journal (a replicated shard's next leader)
// knows it, accepts its acks, refuses acks under a lease it does not know,
// never hands a completed message out again, and ends the lease when it
// expires, not before.
func TestJournaledLeasesSurviveARestart(t *testing.T) {
	for _, snap := range []bool{false, true} {
		name := "replay"
		if snap {
			name = "snapshot"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.JournalLeases = true })
			f.configure("q", func(o *QueueOptions) { o.LeaseTime = time.Minute })
			f.push("q", "p", "a", "b", "c", "d")
			ms := f.pop(PopRequest{Queue: "q", Partition: "p", Group: "g", Batch: 3})
			if payloads(ms) != "a,b,c" {
				t.Fatalf("popped %s", payloads(ms))
			}
			// b completed out of order: the cursor stays at a.
			if r := f.ackMsgs(ms[1:2], Completed); r[0].Err != nil {
				t.Fatal(r[0].Err)
			}
			if snap {
				if err := f.e.Snapshot(); err != nil {
					t.Fatal(err)
				}
			}
			f.advance(20 * time.Second)
			f.restart()

			// The lease is live: the rest of the group's messages wait.
			if got := f.pop(PopRequest{Queue: "q", Partition: "p", Group: "g", Batch: 10}); payloads(got) != "" {
				t.Fatalf("a pop during the lease got %s", payloads(got))
			}
			// An ack under a lease the engine never granted is refused.
			bogus := ackOf(ms[0], Completed)
			bogus.LeaseID = UUID{1, 2, 3}
			if r := f.ack(bogus); !errors.Is(r[0].Err, ErrLeaseInvalid) {
				t.Fatalf("an ack under an unknown lease: %v", r[0].Err)
			}
			// b's ack repeated answers as the first did; a is accepted.
			if r := f.ackMsgs(ms[1:2], Completed); r[0].Err != nil {
				t.Fatalf("b's ack repeated: %v", r[0].Err)
			}
			if r := f.ackMsgs(ms[0:1], Completed); r[0].Err != nil {
				t.Fatalf("a's ack after the restart: %v", r[0].Err)
			}
			// Expiry comes at the lease's time: 40 s after the restart,
			// not before.
			f.advance(39 * time.Second)
			if got := f.pop(PopRequest{Queue: "q", Partition: "p", Group: "g", Batch: 10}); payloads(got) != "" {
				t.Fatalf("a pop before the lease expired got %s", payloads(got))
			}
			f.advance(2 * time.Second)
			// c comes back; b and a, completed, do not.
			if got := f.pop(PopRequest{Queue: "q", Partition: "p", Group: "g", Batch: 10}); payloads(got) != "c,d" {
				t.Fatalf("after the lease expired a pop got %s, want c,d", payloads(got))
			}
		})
	}
}

// Without Config.JournalLeases a restart forgets leases, as before: their
// messages come back at once.
func TestUnjournaledLeasesEndWithTheEngine(t *testing.T) {
	f := newFixture(t)
	f.push("q", "p", "a", "b")
	ms := f.pop(PopRequest{Queue: "q", Partition: "p", Group: "g", Batch: 2})
	if len(ms) != 2 {
		t.Fatalf("popped %d", len(ms))
	}
	f.restart()
	if got := f.pop(PopRequest{Queue: "q", Partition: "p", Group: "g", Batch: 10}); payloads(got) != "a,b" {
		t.Fatalf("after a restart a pop got %s", payloads(got))
	}
	if r := f.ackMsgs(ms[:1], Completed); !errors.Is(r[0].Err, ErrLeaseInvalid) {
		t.Fatalf("an ack under the forgotten lease: %v", r[0].Err)
	}
}

// A leased pop is answered only once its grant is durable, and a grant the
// journal refuses leaves nothing leased.
func TestJournaledGrantAnswersAfterItIsDurable(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.JournalLeases = true })
	f.push("q", "p", "a")
	hold := make(chan struct{})
	f.j.mu.Lock()
	f.j.hold = hold
	f.j.mu.Unlock()
	got := make(chan []Message, 1)
	f.e.PopAsync(PopRequest{Queue: "q", Partition: "p", Group: "g"}, func(ms []Message, _ bool, err error) {
		if err != nil {
			t.Error(err)
		}
		got <- ms
	})
	select {
	case ms := <-got:
		t.Fatalf("the pop was answered (%d messages) before its grant was durable", len(ms))
	case <-time.After(50 * time.Millisecond):
	}
	f.j.mu.Lock()
	f.j.hold = nil
	f.j.mu.Unlock()
	close(hold)
	if ms := <-got; len(ms) != 1 {
		t.Fatalf("the pop got %d messages", len(ms))
	}

	f.push("q", "p2", "x")
	f.j.mu.Lock()
	f.j.appendErr = errors.New("disk gone")
	f.j.mu.Unlock()
	if _, err := f.e.Pop(t.Context(), PopRequest{Queue: "q", Partition: "p2", Group: "g"}); err == nil {
		t.Fatal("a pop whose grant the journal refused succeeded")
	}
	f.j.mu.Lock()
	f.j.appendErr = nil
	f.j.mu.Unlock()
	if ms := f.pop(PopRequest{Queue: "q", Partition: "p2", Group: "g"}); payloads(ms) != "x" {
		t.Fatalf("after the refused grant a pop got %s, want x (nothing stayed leased)", payloads(ms))
	}
}

// With Config.JournalLeases a lease's extension is a record too: after a
// restart the lease lives until the extended time, not the granted one.
func TestJournaledExtensionSurvivesARestart(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.JournalLeases = true })
	f.configure("q", func(o *QueueOptions) { o.LeaseTime = time.Minute })
	f.push("q", "p", "a")
	ms := f.pop(PopRequest{Queue: "q", Partition: "p", Group: "g"})
	f.advance(50 * time.Second)
	if _, err := f.e.ExtendLease(ms[0].LeaseID, time.Minute); err != nil {
		t.Fatal(err)
	}
	f.restart()
	f.advance(59 * time.Second) // 109 s after the pop: past the grant's expiry, before the extension's
	if got := f.pop(PopRequest{Queue: "q", Partition: "p", Group: "g"}); len(got) != 0 {
		t.Fatalf("the extended lease ended at its granted time: a pop got %s", payloads(got))
	}
	if r := f.ackMsgs(ms, Completed); r[0].Err != nil {
		t.Fatalf("an ack under the extended lease after the restart: %v", r[0].Err)
	}
}
