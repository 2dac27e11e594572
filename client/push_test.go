package client_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
)

// TestPushResultsFirstErr: queued and duplicate items are stored; the
// first item that is not names its position, its transactionId and the
// broker's reason, which errors.Is and errors.As still find.
func TestPushResultsFirstErr(t *testing.T) {
	full := protocol.NewError(protocol.CodeQueueFull, "queue q is at its maxSize")
	queued := client.PushResult{Status: client.PushQueued}
	dup := client.PushResult{Status: client.PushDuplicate, TransactionID: "t-0"}
	for _, tc := range []struct {
		name  string
		res   client.PushResults
		index int    // -1: no error
		text  string // the error's text
		code  protocol.Code
	}{
		{name: "none", index: -1},
		{name: "queued-and-duplicate", res: client.PushResults{queued, dup, queued}, index: -1},
		{name: "failed", res: client.PushResults{queued, {Status: client.PushFailed, TransactionID: "t-1", Err: full},
			{Status: client.PushFailed, Err: protocol.NewError(protocol.CodeInvalid, "")}}, index: 1,
			text: `regent client: push item 1 (transactionId "t-1") failed: queue_full: queue q is at its maxSize`, code: protocol.CodeQueueFull},
		{name: "failed-without-reason", res: client.PushResults{dup, {Status: client.PushFailed}}, index: 1,
			text: "regent client: push item 1 failed without a reason", code: protocol.CodeInternal},
		{name: "unknown-status", res: client.PushResults{{Status: 9}}, index: 0,
			text: "regent client: push item 0 answered with status 9, unknown to this client", code: protocol.CodeInternal},
		{name: "queued-with-an-error", res: client.PushResults{queued, queued, {Status: client.PushQueued, Err: full}}, index: 2,
			text: "regent client: push item 2 queued with an error: queue_full: queue q is at its maxSize", code: protocol.CodeQueueFull},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.res.FirstErr()
			if tc.index < 0 {
				if err != nil {
					t.Fatalf("FirstErr: %v, want nil", err)
				}
				return
			}
			var pe *client.PushError
			if !errors.As(err, &pe) || pe.Index != tc.index || pe.Status != tc.res[tc.index].Status || pe.TransactionID != tc.res[tc.index].TransactionID {
				t.Fatalf("FirstErr: %#v, want item %d", err, tc.index)
			}
			if err.Error() != tc.text {
				t.Fatalf("FirstErr says %q\nwant %q", err, tc.text)
			}
			if got := protocol.CodeOf(err); got != tc.code {
				t.Fatalf("code %v, want %v", got, tc.code)
			}
		})
	}
}

// TestPushFirstErrFromTheBroker: a push past a queue's maxSize is answered
// failed for the items beyond it, and FirstErr names the first; pushing a
// transactionId again is a duplicate, not an error.
func TestPushFirstErrFromTheBroker(t *testing.T) {
	b := newBroker(t)
	c := dial(t, b)
	ctx := testCtx(t)
	o := client.DefaultQueueOptions()
	o.MaxSize = 2
	if _, err := c.Configure(ctx, "full", o); err != nil {
		t.Fatal(err)
	}
	items := []client.Item{{Queue: "full", TransactionID: "a"}, {Queue: "full", TransactionID: "b"}, {Queue: "full", TransactionID: "c"}}
	res, err := c.Push(ctx, items...)
	if err != nil {
		t.Fatal(err)
	}
	err = res.FirstErr()
	var pe *client.PushError
	if !errors.As(err, &pe) || pe.Index != 2 || pe.TransactionID != "c" || !errors.Is(err, protocol.NewError(protocol.CodeQueueFull, "")) ||
		!strings.HasPrefix(err.Error(), `regent client: push item 2 (transactionId "c") failed: queue_full`) {
		t.Fatalf("push beyond maxSize: FirstErr %v (results %+v)", err, res)
	}

	res, err = c.Push(ctx, client.Item{Queue: "again", TransactionID: "x"})
	if err != nil || res.FirstErr() != nil {
		t.Fatalf("first push: %+v %v", res, err)
	}
	res, err = c.Push(ctx, client.Item{Queue: "again", TransactionID: "x"}, client.Item{Queue: "again"})
	if err != nil || res[0].Status != client.PushDuplicate || res[1].Status != client.PushQueued || res.FirstErr() != nil {
		t.Fatalf("push of a transactionId again: %+v %v, FirstErr %v", res, err, res.FirstErr())
	}
}
