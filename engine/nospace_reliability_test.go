package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
)

func (j *memJournal) setErr(err error) {
	j.mu.Lock()
	j.failErr = err
	j.mu.Unlock()
}

// TestDiskFullIsRefusedThenAccepted: while the journal reports a full disk
// (an error matching syscall.ENOSPC, as the log's ErrNoSpace does) every
// change is refused with ErrJournal wrapping it, nothing that was stored
// goes, and once the journal writes again changes are accepted again.
func TestDiskFullIsRefusedThenAccepted(t *testing.T) {
	f := newFixture(t)
	f.push("q", "", "a", "b")
	msgs := f.pop(PopRequest{Queue: "q", Batch: 1})
	full := fmt.Errorf("log: no space left on the journal's device: appends are refused until space is freed: %w",
		&os.PathError{Op: "write", Path: "seg", Err: syscall.ENOSPC})
	f.j.setErr(full)

	_, err := f.e.Push(context.Background(), []PushItem{{Queue: "q", Payload: []byte("c")}})
	if !errors.Is(err, ErrJournal) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("push while the disk is full: %v, want ErrJournal wrapping ENOSPC", err)
	}
	if _, err := f.e.Ack(context.Background(), []AckItem{ackOf(msgs[0], Completed)}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("ack while the disk is full: %v", err)
	}
	if err := f.e.Healthy(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Healthy while the disk is full: %v", err)
	}
	// A change that passed check before the disk filled and reached Append:
	// refused, not sticky.
	f.j.mu.Lock()
	f.j.failErr = nil
	f.j.mu.Unlock()
	if _, err := f.e.append([]byte{recBarrier}, nil); err != nil {
		t.Fatal(err)
	}
	f.j.setErr(full)
	if _, err := f.e.append([]byte{recBarrier}, nil); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append: %v", err)
	}
	if f.e.failErr.Load() != nil {
		t.Fatal("a full disk made the engine fail for good")
	}

	f.j.setErr(nil) // space is back
	if err := f.e.Healthy(); err != nil {
		t.Fatalf("Healthy after space returned: %v", err)
	}
	res := f.push("q", "", "c")
	if res[0].Status != Queued {
		t.Fatalf("push after space returned: %+v", res[0])
	}
	if r := f.ack(ackOf(msgs[0], Completed)); r[0].Err != nil {
		t.Fatalf("ack after space returned: %v", r[0].Err)
	}
	wantPayloads(t, f.pop(PopRequest{Queue: "q", Batch: 10}), "b,c")
	f.restart()
	wantPayloads(t, f.pop(PopRequest{Queue: "q", Batch: 10}), "b,c")
}

// TestMaxSizeRoomComesBackAfterARefusedAppend: a push that reserved room
// under maxSize and then had its append refused (disk full) gives the room
// back, so the queue does not shrink by every refused push.
func TestMaxSizeRoomComesBackAfterARefusedAppend(t *testing.T) {
	f := newFixture(t)
	f.configure("small", func(o *QueueOptions) { o.MaxSize = 3 })
	f.push("small", "", "a", "b")
	f.j.mu.Lock()
	f.j.appendErr = fmt.Errorf("log: no space left: %w", syscall.ENOSPC)
	f.j.mu.Unlock()
	for i := 0; i < 3; i++ {
		res, err := f.e.Push(context.Background(), []PushItem{{Queue: "small", Payload: []byte("x")}})
		if err == nil && res[0].Status != Failed {
			t.Fatalf("push while appends are refused: %+v", res[0])
		}
	}
	f.j.mu.Lock()
	f.j.appendErr = nil
	f.j.mu.Unlock()
	if d, _ := f.e.Depth("small"); d != 2 {
		t.Fatalf("depth after refused appends = %d, want 2", d)
	}
	res := f.push("small", "", "c", "d")
	if res[0].Status != Queued || res[1].Status != Failed || !errors.Is(res[1].Err, ErrQueueFull) {
		t.Fatalf("after space returned: %+v", res)
	}
}

// TestOtherJournalErrorsAreSticky: any other journal failure stops changes
// until a restart, even when the journal no longer reports it.
func TestOtherJournalErrorsAreSticky(t *testing.T) {
	f := newFixture(t)
	f.push("q", "", "a")
	f.j.setErr(errors.New("log: fsync: input/output error"))
	if _, err := f.e.Push(context.Background(), []PushItem{{Queue: "q", Payload: []byte("b")}}); !errors.Is(err, ErrJournal) {
		t.Fatalf("push after a journal failure: %v", err)
	}
	f.j.setErr(nil)
	if err := f.e.Healthy(); !errors.Is(err, ErrJournal) {
		t.Fatalf("Healthy after a journal failure went away: %v, want it sticky", err)
	}
}
