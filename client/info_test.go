package client_test

import (
	"testing"
	"time"

	"github.com/regentmq/regent/client"
)

// TestQueueInfoInClientTerms: a partition's description comes in client
// terms: ids as client.ID, times as time.Time (zero when the broker says
// none), the lease a pop took and the retry a failed ack started.
func TestQueueInfoInClientTerms(t *testing.T) {
	b := newBroker(t)
	c := dial(t, b)
	ctx := testCtx(t)
	before := time.Now()
	o := client.DefaultQueueOptions()
	o.RetryDelay = time.Hour
	if _, err := c.Configure(ctx, "info", o); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Queue("info").Partition("p").Push(ctx, []byte("a"), []byte("b")); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	m, err := c.Queue("info").Partition("p").Group("g").Batch(1).Pop(ctx)
	if err != nil || len(m) != 1 {
		t.Fatalf("pop: %+v %v", m, err)
	}
	qi, err := c.QueueInfo(ctx, "info")
	if err != nil || len(qi.Partitions) != 2 || qi.Partitions[0].Name != "Default" {
		t.Fatalf("queue info: %+v %v", qi, err)
	}
	if d := qi.Partitions[0]; !d.Oldest.IsZero() || !d.Newest.IsZero() {
		t.Fatalf("an empty partition's times: %+v", d)
	}
	p := qi.Partitions[1]
	if p.Name != "p" || p.ID != m[0].PartitionID || p.Low != 0 || p.Next != 2 || len(p.Lost) != 0 {
		t.Fatalf("partition: %+v", p)
	}
	if p.Oldest.Before(before.Truncate(time.Millisecond)) || p.Newest.After(after) || p.Newest.Before(p.Oldest) {
		t.Fatalf("oldest %v newest %v, pushed between %v and %v", p.Oldest, p.Newest, before, after)
	}
	if len(p.Groups) != 1 {
		t.Fatalf("groups: %+v", p.Groups)
	}
	g := p.Groups[0]
	if g.Group != "g" || g.Cursor != 0 || g.Lag != 2 || !g.Leased || g.LeaseID != m[0].LeaseID ||
		!g.LeaseExpires.Equal(m[0].LeaseExpires) || !g.BlockedUntil.IsZero() || g.Retrying != 0 {
		t.Fatalf("leased group: %+v, popped %+v", g, m[0])
	}

	if _, err := c.Ack(ctx, m, client.Failed, client.AckOptions{}); err != nil {
		t.Fatal(err)
	}
	qi, err = c.QueueInfo(ctx, "info")
	if err != nil {
		t.Fatal(err)
	}
	g = qi.Partitions[1].Groups[0]
	if g.Leased || !g.LeaseID.IsZero() || g.Retrying != 1 || g.BlockedUntil.Before(time.Now().Add(30*time.Minute)) {
		t.Fatalf("after a failed ack with a retry delay of an hour: %+v", g)
	}
}
