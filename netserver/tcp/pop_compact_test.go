package tcp_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
)

// TestTCPPopCompactFor15Clients: a client that said 1.5 gets its pop
// replies in the compact layout, an older one in the layout it reads; both
// decode to the same messages, and the compact reply leaves out the id's
// text, the partition and the lease of every message after the first.
func TestTCPPopCompactFor15Clients(t *testing.T) {
	f := newTCP(t)
	ctx := ctx5(t)
	items := make([]client.Item, 50)
	for i := range items {
		items[i] = client.Item{Queue: "cmp", Partition: "p1", Payload: []byte(fmt.Sprintf("message %03d", i))}
		if i%10 == 3 {
			items[i].TransactionID = fmt.Sprintf("order-%d", i)
		}
	}
	if _, err := f.c.Push(ctx, items...); err != nil {
		t.Fatal(err)
	}
	pop := func(minor uint16, group string) (protocol.PopReply, int) {
		nc, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		nc.Write(protocol.AppendHelloRequest(nil, 1, &protocol.HelloRequest{Major: 1, Minor: minor}))
		rd := protocol.NewReader(nc, protocol.DefaultMaxFrame)
		if fr, err := rd.Next(); err != nil || fr.IsError() {
			t.Fatalf("hello %d: %v", minor, err)
		}
		nc.Write(protocol.AppendPopRequest(nil, 2, &protocol.PopRequest{Queue: "cmp", Group: group, Batch: 50}))
		fr, err := rd.Next()
		if err != nil || fr.IsError() {
			t.Fatalf("pop as 1.%d: %v", minor, err)
		}
		var r protocol.PopReply
		r.SetCompact(minor >= 5)
		if err := r.Decode(fr.Body); err != nil {
			t.Fatalf("pop reply to 1.%d: %v", minor, err)
		}
		r.Detach()
		return r, len(fr.Body)
	}
	old, oldBytes := pop(4, "old")
	cmp, cmpBytes := pop(5, "new")
	if len(old.Messages) != 50 || len(cmp.Messages) != 50 {
		t.Fatalf("%d and %d messages, want 50 each", len(old.Messages), len(cmp.Messages))
	}
	for i := range old.Messages {
		o, c := old.Messages[i], cmp.Messages[i]
		want := items[i].TransactionID
		if want == "" {
			want = o.ID.String()
		}
		if o.ID != c.ID || o.TransactionID != want || c.TransactionID != want || string(o.Payload) != string(c.Payload) ||
			o.CreatedAt != c.CreatedAt || o.Partition != c.Partition || c.Partition != "p1" || o.PartitionID != c.PartitionID ||
			o.Offset != c.Offset || o.RetryCount != c.RetryCount {
			t.Fatalf("message %d: 1.4 %+v, 1.5 %+v", i, o, c)
		}
		if c.LeaseID != cmp.Messages[0].LeaseID || c.LeaseID.IsZero() || c.LeaseExpires != cmp.Messages[0].LeaseExpires || c.LeaseExpires == 0 {
			t.Fatalf("message %d of the 1.5 reply: lease %v until %d, want the batch's lease", i, c.LeaseID, c.LeaseExpires)
		}
	}
	if saved, least := oldBytes-cmpBytes, 45*(36+2+16+24); saved < least {
		t.Fatalf("compact reply %d bytes, 1.4 reply %d: saved %d, want at least %d", cmpBytes, oldBytes, saved, least)
	}
}
