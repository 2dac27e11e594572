package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/regentmq/regent/protocol"
)

// Handler processes one message. Returning nil acks it completed; returning
// an error acks it failed (with the error's text) and skips the rest of that
// partition's batch, which comes back in order.
type Handler func(ctx context.Context, m Message) error

// Each runs a consume loop until ctx ends: long-poll pops (the builder's
// batch, group and partition), the handler on each message, one ack request
// per batch. While a handler runs long, the lease is extended so the
// messages are not handed to someone else. When ctx ends, the batch in hand
// is given back (acked retry, no retry spent) and Each returns nil; it
// returns an error only for a request the broker refuses outright.
func (q QueueBuilder) Each(ctx context.Context, h Handler) error {
	req := q.req
	req.Wait = true
	if req.Timeout <= 0 || req.Timeout > 5*time.Second {
		req.Timeout = 5 * time.Second // short polls: ctx is noticed between them
	}
	var wg sync.WaitGroup
	errs := make(chan error, q.concurrency)
	for i := 0; i < q.concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := q.c.worker(ctx, req, h); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func (c *Client) worker(ctx context.Context, req PopRequest, h Handler) error {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		// The pop itself is not cancelled by ctx: a poll abandoned on our
		// side could still lease messages on the broker's. It ends by its
		// own timeout, and what it brings after ctx ended is given back.
		pctx, cancel := context.WithTimeout(context.Background(), req.Timeout+10*time.Second)
		msgs, err := c.Pop(pctx, req)
		cancel()
		if err != nil {
			var pe *protocol.Error
			if errors.As(err, &pe) && pe.Code != protocol.CodeOverloaded && pe.Code != protocol.CodeClosed && pe.Code != protocol.CodeJournal {
				return fmt.Errorf("regent client: consume %s: %w", req.Queue, err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		if len(msgs) > 0 {
			c.handleBatch(ctx, msgs, req.AutoAck, h)
		}
	}
	return nil
}

// handleBatch runs the handler over one pop's messages and acks them.
func (c *Client) handleBatch(ctx context.Context, msgs []Message, autoAck bool, h Handler) {
	stop := c.renewLeases(msgs)
	defer stop()
	acks := make([]Ack, 0, len(msgs))
	failed := map[ID]bool{}
	for _, m := range msgs {
		if failed[m.PartitionID] {
			continue // its lease was released: it comes back after the failed one
		}
		if ctx.Err() != nil {
			acks = append(acks, Ack{Message: m, Status: Retry})
			continue
		}
		if err := callHandler(ctx, h, m); err != nil {
			acks = append(acks, Ack{Message: m, Status: Failed, Error: err.Error()})
			failed[m.PartitionID] = true
			continue
		}
		acks = append(acks, Ack{Message: m, Status: Completed})
	}
	if autoAck || len(acks) == 0 {
		return
	}
	actx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.AckEach(actx, acks...) // refused acks mean the lease ended: the messages come back
}

func callHandler(ctx context.Context, h Handler, m Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v", r)
		}
	}()
	return h(ctx, m)
}

// renewLeases extends the batch's leases every third of their lifetime until
// stop (as Kafka heartbeats at a third of the session timeout: two renewals
// may be late before the lease runs out).
func (c *Client) renewLeases(msgs []Message) (stop func()) {
	type lease struct {
		id    ID
		every time.Duration
	}
	var ls []lease
	seen := map[ID]bool{}
	now := time.Now()
	for _, m := range msgs {
		if m.LeaseID.IsZero() || seen[m.LeaseID] {
			continue
		}
		seen[m.LeaseID] = true
		if life := m.LeaseExpires.Sub(now); life > 0 {
			ls = append(ls, lease{m.LeaseID, life})
		}
	}
	if len(ls) == 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(max(l.every/3, 10*time.Millisecond))
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					ctx, cancel := context.WithTimeout(context.Background(), l.every/2+time.Second)
					_, err := c.Extend(ctx, l.id, l.every)
					cancel()
					if err != nil {
						return // the lease is gone: the acks will say so
					}
				}
			}
		}()
	}
	return func() { close(done); wg.Wait() }
}
