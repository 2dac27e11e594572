package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/engine"
)

// waitingPages caps the partitions tellWaiting reads (pages of
// client.MaxPage): beyond them it says "at least".
const waitingPages = 10

// tellWaiting says on w how many messages of queue still wait for group
// after a pop that answered msgs (and their acks, if any): those in
// partitions no consumer of the group holds (pop again), and those in
// partitions under a lease (this pop's, when it did not ack, or another
// consumer's), served when it ends. The messages msgs hold are not
// counted. It says nothing when none wait, or when the queue cannot be
// read.
func tellWaiting(ctx context.Context, c *client.Client, w io.Writer, queue, group string, msgs []client.Message) {
	if group == "" {
		group = engine.QueueModeGroup
	}
	held := map[client.ID]uint64{} // messages this pop holds, by partition
	var lease client.ID
	for i := range msgs {
		if !msgs[i].LeaseID.IsZero() {
			lease = msgs[i].LeaseID
			held[msgs[i].PartitionID]++
		}
	}
	var free, freeParts, leased, leasedParts uint64
	var after client.ID
	more := false
	for page := 0; page < waitingPages; page++ {
		qi, m, err := c.QueueInfoPage(ctx, queue, after, client.MaxPage)
		if err != nil {
			return
		}
		for _, p := range qi.Partitions {
			for _, g := range p.Groups {
				if g.Group != group || g.Lag == 0 {
					continue
				}
				if !g.Leased {
					free, freeParts = free+g.Lag, freeParts+1
					continue
				}
				n := g.Lag
				if g.LeaseID == lease {
					n -= min(n, held[p.ID]) // what this pop holds is not waiting
				}
				if n > 0 {
					leased, leasedParts = leased+n, leasedParts+1
				}
			}
		}
		more = m && len(qi.Partitions) > 0
		if !more {
			break
		}
		after = qi.Partitions[len(qi.Partitions)-1].ID
	}
	if free == 0 && leased == 0 {
		return
	}
	var parts []string
	if free > 0 {
		parts = append(parts, fmt.Sprintf("%s in %s (pop again)", plural(free, "message", "messages"), plural(freeParts, "partition", "partitions")))
	}
	if leased > 0 {
		parts = append(parts, fmt.Sprintf("%s in %s under a lease (in flight, or served when it ends)", plural(leased, "message", "messages"), plural(leasedParts, "partition", "partitions")))
	}
	least := ""
	if more {
		least = "at least "
	}
	fmt.Fprintf(w, "regent pop: %smore wait for %s: %s\n", least, groupLabel(group), strings.Join(parts, "; "))
}
