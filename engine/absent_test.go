package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// queueNames lists the engine's queues with their groups ("q: g1 g2").
func queueNames(e *Engine) []string {
	var out []string
	for _, q := range e.Queues() {
		gs := slices.Clone(q.Groups)
		slices.Sort(gs)
		out = append(out, fmt.Sprint(q.Name, ": ", gs))
	}
	return out
}

func absentParked(e *Engine) int {
	e.absent.mu.Lock()
	defer e.absent.mu.Unlock()
	return len(e.absent.list)
}

// TestWaitingPopOnMissingQueueCreatesNothing: a long poll, with or without
// a group, on a queue that does not exist leaves no queue and no group,
// neither while it waits nor after its timeout, nor after a restart; a
// pop without Wait answers empty at once; and one that is cancelled
// leaves the waiting list.
func TestWaitingPopOnMissingQueueCreatesNothing(t *testing.T) {
	f := newFixture(t)
	f.push("real", "", "x")
	before := queueNames(f.e)
	ch := make(chan []Message, 4)
	for _, req := range []PopRequest{
		{Queue: "typo", Wait: true, Timeout: 5 * time.Second},
		{Queue: "typo", Group: "billing", Wait: true, Timeout: 5 * time.Second},
		{Queue: "typo", Partition: "p", Group: "g", Subscription: SubNew, Wait: true, Timeout: 5 * time.Second},
		{Queue: "tÿpo-ö🚀", Wait: true, Timeout: 5 * time.Second},
	} {
		f.e.PopAsync(req, func(m []Message, _ bool, err error) {
			if err != nil {
				t.Errorf("pop: %v", err)
			}
			ch <- m
		})
	}
	if got := f.pop(PopRequest{Queue: "typo", Group: "other"}); len(got) != 0 {
		t.Fatalf("pop of a missing queue: %s", payloads(got))
	}
	if got := queueNames(f.e); !slices.Equal(got, before) {
		t.Fatalf("while pops wait on missing queues: queues %q, want %q", got, before)
	}
	if n := absentParked(f.e); n != 4 {
		t.Fatalf("%d pops wait for their queue, want 4", n)
	}
	f.advance(6 * time.Second)
	for range 4 {
		select {
		case m := <-ch:
			if len(m) != 0 {
				t.Fatalf("timed-out poll returned %s", payloads(m))
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a poll on a missing queue never timed out")
		}
	}
	if n := absentParked(f.e); n != 0 {
		t.Fatalf("%d timed-out pops still wait for their queue", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := f.e.Pop(ctx, PopRequest{Queue: "typo", Wait: true, Timeout: time.Minute})
		done <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); absentParked(f.e) != 1; {
		if time.Now().After(deadline) {
			t.Fatal("the pop never parked")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled pop: %v", err)
	}
	if n := absentParked(f.e); n != 0 {
		t.Fatalf("%d cancelled pops still wait for their queue", n)
	}
	f.restart()
	if got := queueNames(f.e); !slices.Equal(got, before) {
		t.Fatalf("after a restart: queues %q, want %q", got, before)
	}
}

// TestWaitingPopsOnMissingQueueServedWhenItAppears: 50 long polls wait on
// a queue that does not exist (half in queue mode, half each in a group of
// its own, one of them with a unicode name); the push that creates the
// queue serves them, each message to one queue-mode pop, every group
// sees its first message, and only the groups that popped exist.
func TestWaitingPopsOnMissingQueueServedWhenItAppears(t *testing.T) {
	f := newFixture(t)
	const n = 50
	queue := "nouvelle-файл-🚀"
	type answer struct {
		group string
		msgs  []Message
		err   error
	}
	ch := make(chan answer, n)
	var start sync.WaitGroup
	for i := range n {
		group := ""
		if i >= n/2 {
			group = fmt.Sprintf("g%02d", i)
		}
		if i == n-1 {
			group = "équipe-ß"
		}
		start.Add(1)
		go func() {
			defer start.Done()
			f.e.PopAsync(PopRequest{Queue: queue, Group: group, Wait: true, Timeout: time.Minute},
				func(m []Message, _ bool, err error) { ch <- answer{group, m, err} })
		}()
	}
	start.Wait()
	if got := queueNames(f.e); len(got) != 0 {
		t.Fatalf("while pops wait: queues %q", got)
	}
	if k := absentParked(f.e); k != n {
		t.Fatalf("%d pops wait for their queue, want %d", k, n)
	}
	items := make([]PushItem, n/2)
	for i := range items {
		items[i] = PushItem{Queue: queue, Partition: fmt.Sprintf("p%02d", i), Payload: []byte(fmt.Sprint(i))}
	}
	for _, r := range f.pushItems(items...) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	seen := map[string]bool{}
	for range n {
		var a answer
		select {
		case a = <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("not every waiting pop was served (%d queue-mode messages seen)", len(seen))
		}
		if a.err != nil {
			t.Fatal(a.err)
		}
		if len(a.msgs) != 1 {
			t.Fatalf("group %q: got %d messages, want 1", a.group, len(a.msgs))
		}
		if a.group == "" {
			if p := string(a.msgs[0].Payload); seen[p] {
				t.Fatalf("message %s delivered twice in queue mode", p)
			} else {
				seen[p] = true
			}
		}
	}
	if k := absentParked(f.e); k != 0 {
		t.Fatalf("%d pops still wait for a queue that exists", k)
	}
	qi, err := f.e.QueueSummary(queue)
	if err != nil {
		t.Fatal(err)
	}
	if len(qi.Groups) != n/2+1 || !slices.Contains(qi.Groups, QueueModeGroup) || !slices.Contains(qi.Groups, "équipe-ß") {
		t.Fatalf("groups %q: want queue mode and the %d groups that popped", qi.Groups, n/2)
	}
}

// TestWaitingPopWithSubNewGetsTheMessageThatCreatesTheQueue: "new" means
// after the consumer started; a consumer that waited for its queue sees
// the push that created it, though its group appears only once the queue
// does.
func TestWaitingPopWithSubNewGetsTheMessageThatCreatesTheQueue(t *testing.T) {
	for i := range 20 {
		f := newFixture(t)
		ch := make(chan []Message, 1)
		f.e.PopAsync(PopRequest{Queue: "later", Group: "fresh", Subscription: SubNew, Wait: true, Timeout: time.Minute},
			func(m []Message, _ bool, err error) { ch <- m })
		f.push("later", "", "first")
		select {
		case m := <-ch:
			wantPayloads(t, m, "first")
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: a new-only consumer that waited for its queue missed the push that created it", i)
		}
	}
}

// TestWaitingPopOnMissingQueueWokenByConfigureAndTxn: the other ways a
// queue comes into being wake the pops that wait for it too.
func TestWaitingPopOnMissingQueueWokenByConfigureAndTxn(t *testing.T) {
	f := newFixture(t)
	wait := func(q string) chan []Message {
		ch := make(chan []Message, 1)
		f.e.PopAsync(PopRequest{Queue: q, Group: "g", Wait: true, Timeout: time.Minute}, func(m []Message, _ bool, err error) { ch <- m })
		return ch
	}
	byConfigure, byTxn := wait("configured"), wait("from-txn")
	f.configure("configured", nil)
	for deadline := time.Now().Add(5 * time.Second); absentParked(f.e) != 1; {
		if time.Now().After(deadline) {
			t.Fatal("configure did not wake the pop waiting for its queue")
		}
		time.Sleep(time.Millisecond)
	}
	f.push("configured", "", "c")
	f.push("src", "", "s")
	m := f.pop(PopRequest{Queue: "src"})
	if _, err := f.e.Transaction(context.Background(), []AckItem{ackOf(m[0], Completed)},
		[]PushItem{{Queue: "from-txn", Payload: []byte("t")}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ch   chan []Message
		want string
	}{{byConfigure, "c"}, {byTxn, "t"}} {
		select {
		case m := <-c.ch:
			wantPayloads(t, m, c.want)
		case <-time.After(5 * time.Second):
			t.Fatalf("pop waiting for %q's queue not served", c.want)
		}
	}
}

// TestCloseAnswersPopsWaitingForTheirQueue: Close answers them ErrClosed.
func TestCloseAnswersPopsWaitingForTheirQueue(t *testing.T) {
	f := newFixture(t)
	ch := make(chan error, 1)
	f.e.PopAsync(PopRequest{Queue: "never", Wait: true, Timeout: time.Minute}, func(_ []Message, _ bool, err error) { ch <- err })
	f.e.Close()
	select {
	case err := <-ch:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("got %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close left a pop waiting for its queue")
	}
}

// TestSeekCreatesNothing: a seek on a missing queue, on a group that never
// read the queue, or on a missing partition fails as not found and leaves
// no trace; on a group that popped it moves the cursor (unicode names).
func TestSeekCreatesNothing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.push("commandes-é", "partie-ü", "a", "b")
	before := queueNames(f.e)
	for _, c := range []struct {
		queue, group, part string
		want               error
	}{
		{"typo", "g", "", ErrQueueNotFound},
		{"commandes-é", "équipe", "", ErrGroupNotFound},
		{"commandes-é", "", "", ErrGroupNotFound}, // queue mode never popped
		{"commandes-é", "équipe", "partie-ü", ErrGroupNotFound},
	} {
		if _, err := f.e.Seek(ctx, c.queue, c.group, c.part, SeekTarget{ToEnd: true}); !errors.Is(err, c.want) {
			t.Errorf("Seek(%q, %q, %q): %v, want %v", c.queue, c.group, c.part, err, c.want)
		}
	}
	if got := queueNames(f.e); !slices.Equal(got, before) {
		t.Fatalf("after seeks that failed: %q, want %q", got, before)
	}
	f.pop(PopRequest{Queue: "commandes-é", Group: "équipe", AutoAck: true})
	if _, err := f.e.Seek(ctx, "commandes-é", "équipe", "nope", SeekTarget{ToEnd: true}); !errors.Is(err, ErrPartitionNotFound) {
		t.Fatalf("seek of a missing partition: %v", err)
	}
	if n, err := f.e.Seek(ctx, "commandes-é", "équipe", "", SeekTarget{Time: t0.Add(-time.Hour)}); err != nil || n != 1 {
		t.Fatalf("seek to the start: %d, %v", n, err)
	}
	wantPayloads(t, f.pop(PopRequest{Queue: "commandes-é", Group: "équipe", Batch: 5}), "a,b")
	f.restart()
	if got := queueNames(f.e); !slices.Equal(got, []string{"commandes-é: [équipe]"}) {
		t.Fatalf("after a restart: %q", got)
	}
}

// TestSeekRacingDelete: seeks race deletions of their queue and of their
// group. Each seek succeeds or answers not found; nothing deleted comes
// back, in memory or after a restart.
func TestSeekRacingDelete(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for round := range 40 {
		q := fmt.Sprintf("q%d-ñ", round)
		f.push(q, "a", "1")
		f.push(q, "b", "2")
		f.pop(PopRequest{Queue: q, Group: "g", Batch: 2, Partitions: 2})
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := f.e.Seek(ctx, q, "g", "", SeekTarget{ToEnd: true})
				if err != nil && !errors.Is(err, ErrQueueNotFound) && !errors.Is(err, ErrGroupNotFound) {
					errs <- err
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if round%2 == 0 {
				_, err = f.e.DeleteQueue(ctx, q)
			} else {
				_, err = f.e.DeleteGroup(ctx, q, "g")
			}
			if err != nil {
				errs <- err
			}
		}()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
		if _, err := f.e.Seek(ctx, q, "g", "", SeekTarget{ToEnd: true}); err == nil {
			t.Fatalf("round %d: seek after the deletion succeeded", round)
		}
	}
	check := func(when string) {
		for _, qi := range f.e.Queues() {
			if len(qi.Groups) != 0 {
				t.Fatalf("%s: %s has groups %q after they were deleted", when, qi.Name, qi.Groups)
			}
		}
		if n := len(f.e.Queues()); n != 20 {
			t.Fatalf("%s: %d queues, want the 20 not deleted", when, n)
		}
	}
	check("in memory")
	f.restart()
	check("after a restart")
}

// TestWaitingPopsRaceTheQueuesCreation: pops that wait for a queue while
// the push that creates it runs are all served: none parks after the
// wake-up it needed.
func TestWaitingPopsRaceTheQueuesCreation(t *testing.T) {
	f := newFixture(t)
	for round := range 30 {
		queue := fmt.Sprintf("race-%d-ø", round)
		const n = 8
		ch := make(chan []Message, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f.e.PopAsync(PopRequest{Queue: queue, Group: fmt.Sprint("g", i), Wait: true, Timeout: time.Minute},
					func(m []Message, _ bool, err error) { ch <- m })
			}()
		}
		f.push(queue, "", "m")
		wg.Wait()
		for i := range n {
			select {
			case m := <-ch:
				wantPayloads(t, m, "m")
			case <-time.After(5 * time.Second):
				t.Fatalf("round %d: %d of %d pops never served", round, n-i, n)
			}
		}
	}
	if k := absentParked(f.e); k != 0 {
		t.Fatalf("%d pops still wait", k)
	}
}
