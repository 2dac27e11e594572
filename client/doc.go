// Package client is the Go client of the Regent broker, over its binary
// protocol.
//
// A Client keeps a small pool of pipelined connections (one writer goroutine
// per connection flushing once per burst of requests, one reader goroutine
// routing replies by request id), reconnects with backoff, and fails the
// calls of a connection that breaks with ErrConnLost. Every call takes a
// context.Context for its timeout.
//
//	c, err := client.Dial(ctx, "localhost:6633")
//	res, err := c.Queue("events").Push(ctx, []byte(`{"order":1}`))
//	if err == nil {
//		err = res.FirstErr() // an item the broker refused (a duplicate is stored)
//	}
//	msgs, err := c.Queue("events").Group("auditor").SubscriptionMode(client.FromOldest).Batch(50).Wait(true).Pop(ctx)
//	c.Ack(ctx, msgs, client.Completed, client.AckOptions{Group: "auditor"})
//
// Beyond Queen's Go client it acks a batch with an answer per message in one
// request (AckEach), batches pushes on the client side (Producer), runs
// transactions of acks and pushes (Transaction), and runs consume loops
// (QueueBuilder.Each) that ack completed or failed from the handler's
// result, skip the rest of a partition's batch after a failure, extend leases
// while a handler runs long, and give their batch back on shutdown.
//
// A consumer written for speed pops into a few reused Batches: PopBatch and
// AckBatch allocate almost nothing per call, and SendAck followed by the next
// PopBatch puts the ack and the pop in one write, with WaitAck collecting the
// ack's answer later:
//
//	var b client.Batch
//	for {
//		if err := c.PopBatch(ctx, req, &b); err != nil { ... }
//		// handle b.Messages: they are valid until b is popped into again
//		c.AckBatch(ctx, &b, client.Completed, client.AckOptions{})
//	}
package client
