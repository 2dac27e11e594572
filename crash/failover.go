package crash

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/regentmq/regent/client"
)

// A replicated cluster's cycle kills the broker that leads the most shards
// and measures, from the client's side, how long each shard it led takes to
// answer a push again: the failover a client sees (an election, the new
// leader's takeover, and the client learning of it).

// failoverQueue takes the probes' pushes (the checks do not read it).
const failoverQueue = "failover"

// failoverBound is how long a shard may take to answer again before the
// run counts it unserved.
const failoverBound = 30 * time.Second

// shardProbe is one shard a killed broker led, and a partition of
// failoverQueue in it.
type shardProbe struct {
	shard     int
	partition string
}

// leaderOf is the broker leading the most shards, as the map of the broker
// the client dialled says (fallback when it cannot tell), and a probe per
// shard it leads.
func leaderOf(ctx context.Context, c *client.Client, brokers []*broker, fallback *broker) (*broker, []shardProbe) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	m, err := c.Cluster(cctx)
	if err != nil {
		return fallback, nil
	}
	count := map[string]int{}
	for _, o := range m.Owners {
		count[o]++
	}
	best := ""
	for id, n := range count {
		if id != "" && (best == "" || n > count[best] || (n == count[best] && id < best)) {
			best = id
		}
	}
	var victim *broker
	for _, b := range brokers {
		if fmt.Sprintf("b%d", b.n) == best {
			victim = b
		}
	}
	if victim == nil {
		return fallback, nil
	}
	var probes []shardProbe
	for s, o := range m.Owners {
		if o == best {
			probes = append(probes, shardProbe{shard: s, partition: partitionIn(m, failoverQueue, s)})
		}
	}
	return victim, probes
}

// partitionIn names a partition of queue in shard s under m.
func partitionIn(m client.ClusterMap, queue string, s int) string {
	for i := 0; ; i++ {
		p := fmt.Sprintf("f%d", i)
		if m.ShardOf(queue, p) == s {
			return p
		}
	}
}

// failovers pushes to every probe's partition until it is answered stored,
// all at once, and notes the times from the kill.
func failovers(ctx context.Context, c *client.Client, killed time.Time, probes []shardProbe, rep *Report) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last error
			for time.Since(killed) < failoverBound && ctx.Err() == nil {
				cctx, cancel := context.WithTimeout(ctx, time.Second)
				res, err := c.Push(cctx, client.Item{Queue: failoverQueue, Partition: p.partition, Payload: []byte("probe")})
				cancel()
				if err == nil {
					err = res.FirstErr()
				}
				if err == nil {
					mu.Lock()
					rep.Failovers = append(rep.Failovers, time.Since(killed))
					mu.Unlock()
					return
				}
				// Any error is retried until the bound (it is in the
				// problem if the shard never answers).
				last = err
				time.Sleep(5 * time.Millisecond)
			}
			if ctx.Err() != nil {
				return // the run ends: nothing to say of this shard
			}
			mu.Lock()
			rep.problem(&rep.Unserved, "shard %d answered no push within %v of its leader's kill: %v", p.shard, failoverBound, last)
			mu.Unlock()
		}()
	}
	wg.Wait()
}

// FailoverSummary gives the median, 99th percentile and maximum of ds, and
// their histogram.
func FailoverSummary(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none measured"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(f float64) time.Duration { return s[min(len(s)-1, int(f*float64(len(s))))] }
	bounds := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 1500 * time.Millisecond,
		2 * time.Second, 3 * time.Second, 5 * time.Second}
	counts := make([]int, len(bounds)+1)
	for _, d := range s {
		i, _ := slices.BinarySearch(bounds, d)
		counts[i]++
	}
	var h []string
	for i, n := range counts {
		if n == 0 {
			continue
		}
		if i < len(bounds) {
			h = append(h, fmt.Sprintf("≤%v: %d", bounds[i], n))
		} else {
			h = append(h, fmt.Sprintf(">%v: %d", bounds[len(bounds)-1], n))
		}
	}
	return fmt.Sprintf("%d shards, p50 %v, p99 %v, max %v (%s)", len(s), q(0.5).Round(time.Millisecond),
		q(0.99).Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), strings.Join(h, ", "))
}

// caughtUp waits (up to d) until the restarted broker b knows a leader for
// every shard: it has rejoined every group, so the next cycle's kill is
// one fault, not a second one while a replica is still behind (then a
// shard waits for it, as Raft must, and the wait is not a failover).
func caughtUp(ctx context.Context, b *broker, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	c, err := client.Dial(ctx, b.tcpAddr, client.WithoutCluster())
	if err != nil {
		return
	}
	defer c.Close()
	for ctx.Err() == nil {
		if m, err := c.Cluster(ctx); err == nil && len(m.Owners) > 0 && !slices.Contains(m.Owners, "") {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
