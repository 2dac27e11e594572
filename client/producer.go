package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/regentmq/regent/protocol"
)

// ProducerOptions configure a Producer's batching.
type ProducerOptions struct {
	// BatchSize sends a batch once it holds that many messages (default 100).
	BatchSize int
	// Linger sends a batch that long after its first message, full or not
	// (default 5 ms).
	Linger time.Duration
}

// Producer batches pushes on the client side: Send returns at once and the
// messages go out in one request per batch, when the batch is full or
// Linger has passed. Batches are pipelined on one connection, in Send order,
// so the broker stores one producer's messages of a partition in the order
// they were sent. Each Send's Pending tells its result.
type Producer struct {
	c   *Client
	opt ProducerOptions

	mu      sync.Mutex
	items   []Item
	waits   []*Pending
	timer   *time.Timer
	closed  bool
	flights sync.WaitGroup
	cn      *conn
	last    chan struct{} // in a cluster: closed when the last batch sent was answered
}

// Pending is the future result of one Send.
type Pending struct {
	done chan struct{}
	res  PushResult
	err  error
}

// Wait returns the push result once the batch was answered.
func (p *Pending) Wait(ctx context.Context) (PushResult, error) {
	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
		return PushResult{}, ctx.Err()
	}
}

// Producer returns a batching producer.
func (c *Client) Producer(opt ProducerOptions) *Producer {
	if opt.BatchSize <= 0 {
		opt.BatchSize = 100
	}
	if opt.Linger <= 0 {
		opt.Linger = 5 * time.Millisecond
	}
	return &Producer{c: c, opt: opt}
}

// Send queues one message for the next batch.
func (p *Producer) Send(it Item) *Pending {
	w := &Pending{done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		w.err = ErrClosed
		close(w.done)
		return w
	}
	p.items = append(p.items, it)
	p.waits = append(p.waits, w)
	switch {
	case len(p.items) >= p.opt.BatchSize:
		p.sendLocked()
	case len(p.items) == 1:
		p.timer = time.AfterFunc(p.opt.Linger, p.lingered)
	}
	p.mu.Unlock()
	return w
}

func (p *Producer) lingered() {
	p.mu.Lock()
	p.sendLocked()
	p.mu.Unlock()
}

// sendLocked sends what is batched, in the background. p.mu is held.
func (p *Producer) sendLocked() {
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	if len(p.items) == 0 {
		return
	}
	items, waits := p.items, p.waits
	p.items, p.waits = nil, nil
	p.flights.Add(1)
	if p.c.cl != nil {
		// A cluster's batch goes to several owners on their own
		// connections: batches go one after the other, so that their
		// order holds in every partition.
		prev, mine := p.last, make(chan struct{})
		p.last = mine
		go func() {
			defer p.flights.Done()
			defer close(mine)
			if prev != nil {
				<-prev
			}
			res, err := p.c.cl.push(context.Background(), items)
			for i, w := range waits {
				if err != nil {
					w.err = err
				} else {
					w.res = res[i]
				}
				close(w.done)
			}
		}()
		return
	}
	// Queue the batch on the connection now, under p.mu, so batches go out
	// in order; wait for the answer on another goroutine.
	reply := pushReplies.Get().(*protocol.PushReply)
	ctx := context.Background()
	var cl *call
	var err error
	if p.cn == nil || p.cn.broken() != nil {
		p.cn, err = p.c.conn(ctx) // one connection for all batches: their order holds
	}
	cn := p.cn
	if err == nil {
		cl, err = cn.start(ctx, protocol.OpPush, pushFrame(items, nil), reply)
	}
	go func() {
		defer p.flights.Done()
		if err == nil {
			err = cl.wait(ctx)
		}
		var res []PushResult
		if err == nil { // ctx never ends: the reply is done with after wait
			res = pushResults(reply.Items, items)
			clear(reply.Items)
			pushReplies.Put(reply)
			if len(res) != len(waits) {
				err = fmt.Errorf("client: push of %d items answered with %d results", len(waits), len(res))
			}
		}
		for i, w := range waits {
			if err != nil {
				w.err = err
			} else {
				w.res = res[i]
			}
			close(w.done)
		}
	}()
}

// Flush sends what is batched and waits until every batch sent so far was
// answered (or ctx ends).
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	p.sendLocked()
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.flights.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close flushes and refuses later Sends.
func (p *Producer) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	return p.Flush(ctx)
}
