package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/client"
)

// TestCancelEndsALongPollAtOnce: a long poll parked at the broker returns
// as soon as its context is cancelled (not when its own timeout passes),
// with the context's error, and the connection goes on serving: the late
// answer to the abandoned poll is dropped, not handed to the next call.
func TestCancelEndsALongPollAtOnce(t *testing.T) {
	b := newBroker(t)
	c := dial(t, b, client.WithConns(1))
	for _, batch := range []bool{false, true} {
		queue := fmt.Sprintf("quiet-%v", batch) // empty: the poll parks
		// The queue exists (a poll on a missing one creates nothing, so
		// there would be no group for DeleteGroup to answer below).
		if _, err := c.Configure(testCtx(t), queue, client.DefaultQueueOptions()); err != nil {
			t.Fatal(err)
		}
		// Configure's slot is given back just after its answer: wait for it,
		// so that the count below is the poll's.
		brokertest.CheckFor(t, 5*time.Second, func() error {
			if n := b.TCPInFlight(); n != 0 {
				return fmt.Errorf("%d requests in flight at the broker, want none", n)
			}
			return nil
		})
		ctx, cancel := context.WithCancel(testCtx(t))
		done := make(chan error, 1)
		go func() {
			q := c.Queue(queue).Group("g").Wait(true).Timeout(10 * time.Second)
			if batch {
				var bt client.Batch
				done <- q.PopBatch(ctx, &bt)
				return
			}
			_, err := q.Pop(ctx)
			done <- err
		}()
		brokertest.CheckFor(t, 5*time.Second, func() error { // the poll parks at the broker
			select {
			case err := <-done:
				t.Fatalf("batch %v: the poll returned before it was cancelled: %v", batch, err)
			default:
			}
			if n := b.TCPInFlight(); n != 1 {
				return fmt.Errorf("%d requests in flight at the broker, want the parked poll", n)
			}
			return nil
		})
		cancelled := time.Now()
		cancel()
		select {
		case err := <-done:
			if took := time.Since(cancelled); took > 200*time.Millisecond {
				t.Fatalf("batch %v: the cancelled poll returned after %v", batch, took)
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("batch %v: cancelled poll: %v", batch, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("batch %v: the cancelled poll did not return", batch)
		}
		// The connection serves the next calls; the parked poll's group is
		// deleted, which answers it at the broker.
		if _, err := c.DeleteGroup(testCtx(t), queue, "g"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Queue(queue).Push(testCtx(t), []byte("after")); err != nil {
			t.Fatal(err)
		}
		m, err := c.Queue(queue).Group("other").AutoAck(true).Pop(testCtx(t))
		if err != nil || len(m) != 1 || string(m[0].Payload) != "after" {
			t.Fatalf("batch %v: pop after the cancelled one: %+v %v", batch, m, err)
		}
		if _, err := c.DeleteGroup(testCtx(t), queue, "other"); err != nil {
			t.Fatal(err)
		}
	}
}
