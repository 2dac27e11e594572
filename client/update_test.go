package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/regentmq/regent/client"
)

// TestUpdateQueueKeepsOtherClientsChanges: two clients change different
// options of one queue at the same time, many times. Each update is one
// step on the broker, so neither undoes the other: at the end each option
// holds the last value its own client wrote. (A read, then a Configure of
// every option, loses some: the write of one carries the other's option as
// it was read.)
func TestUpdateQueueKeepsOtherClientsChanges(t *testing.T) {
	b := newBroker(t)
	ctx := context.Background()
	dial := func() *client.Client {
		c, err := client.Dial(ctx, b.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, c := dial(), dial()
	if _, err := a.UpdateQueue(ctx, "jobs", client.QueueOptions{Namespace: "ns", LeaseTime: time.Second}, client.SetNamespace|client.SetLeaseTime|client.SetRetryLimit); err != nil {
		t.Fatal(err)
	}
	// Each client raises its own option, one step at a time; the other's
	// option, as every answer shows it, never goes back (a lost update
	// would bring it back to a value read before).
	const rounds = 300
	run := func(c *client.Client, set client.OptionSet, mine func(i int) client.QueueOptions, other func(client.QueueOptions) int) error {
		seen := 0
		for i := 1; i <= rounds; i++ {
			res, err := c.UpdateQueue(ctx, "jobs", mine(i), set)
			if err != nil {
				return err
			}
			if v := other(res.Options); v < seen {
				return fmt.Errorf("update %d: the other client's option went back from %d to %d", i, seen, v)
			} else {
				seen = v
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		errs <- run(a, client.SetRetryLimit, func(i int) client.QueueOptions { return client.QueueOptions{RetryLimit: i} },
			func(o client.QueueOptions) int { return int(o.LeaseTime / time.Second) })
	}()
	go func() {
		defer wg.Done()
		errs <- run(c, client.SetLeaseTime, func(i int) client.QueueOptions { return client.QueueOptions{LeaseTime: time.Duration(i) * time.Second} },
			func(o client.QueueOptions) int { return o.RetryLimit })
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	qi, err := a.QueueInfo(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	o := qi.Options
	if o.RetryLimit != rounds || o.LeaseTime != rounds*time.Second || o.Namespace != "ns" || o.RetryDelay != client.DefaultQueueOptions().RetryDelay {
		t.Fatalf("options after the concurrent updates: %+v (want retry limit %d, lease %ds, namespace ns, the default retry delay)", o, rounds, rounds)
	}
}

// TestUpdateQueue: a queue that does not exist is created with the
// defaults for the options not set; an update keeps what it does not set;
// an invalid result is refused and changes nothing; Configure still
// replaces every option.
func TestUpdateQueue(t *testing.T) {
	b := newBroker(t)
	ctx := context.Background()
	c, err := client.Dial(ctx, b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d := client.DefaultQueueOptions()
	res, err := c.UpdateQueue(ctx, "q", client.QueueOptions{RetryLimit: 7, Priority: 9}, client.SetRetryLimit)
	if err != nil || !res.Created || res.Options.RetryLimit != 7 || res.Options.Priority != 0 || res.Options.LeaseTime != d.LeaseTime {
		t.Fatalf("first update: %+v %v (want created, retry limit 7, the rest default)", res, err)
	}
	res, err = c.UpdateQueue(ctx, "q", client.QueueOptions{RetryDelay: 3 * time.Second}, client.SetRetryDelay)
	if err != nil || res.Created || res.Options.RetryLimit != 7 || res.Options.RetryDelay != 3*time.Second {
		t.Fatalf("second update: %+v %v", res, err)
	}
	if _, err := c.UpdateQueue(ctx, "q", client.QueueOptions{LeaseTime: -time.Second}, client.SetLeaseTime); err == nil {
		t.Fatal("a negative lease time was taken")
	}
	if _, err := c.UpdateQueue(ctx, "q", client.QueueOptions{}, client.SetLeaseTime); err == nil {
		t.Fatal("a zero lease time was taken")
	}
	qi, err := c.QueueInfo(ctx, "q")
	if err != nil || qi.Options.RetryLimit != 7 || qi.Options.RetryDelay != 3*time.Second || qi.Options.LeaseTime != d.LeaseTime {
		t.Fatalf("after refused updates: %+v %v", qi.Options, err)
	}
	// An empty set changes nothing (and answers the options).
	if res, err := c.UpdateQueue(ctx, "q", client.QueueOptions{RetryLimit: 1}, 0); err != nil || res.Options.RetryLimit != 7 {
		t.Fatalf("update of nothing: %+v %v", res, err)
	}
	if res, err := c.Configure(ctx, "q", d); err != nil || res.Options.RetryLimit != d.RetryLimit || res.Options.RetryDelay != d.RetryDelay {
		t.Fatalf("Configure after updates: %+v %v", res, err)
	}
}
