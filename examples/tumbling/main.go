package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/regentmq/regent/client"
)

const (
	source = "sensor-readings"
	sink   = "sensor-sums"
	query  = "tumbling-sum"
	group  = "streams." + query
	window = 10 * time.Second
	// The hash of this processing: change it when the windowing changes, and
	// the broker refuses to resume on state built the other way.
	configHash = "tumbling-10s-sum-v1"
	// wmKey holds a partition's watermark: the latest event time seen.
	wmKey = "__wm__"
)

// reading is a source message: an event time (ms) and a value.
type reading struct {
	T int64 `json:"t"`
	V int64 `json:"v"`
}

// open is an open window's state row.
type open struct {
	Start int64 `json:"windowStart"`
	End   int64 `json:"windowEnd"`
	Sum   int64 `json:"sum"`
	N     int64 `json:"n"`
}

// closed is what goes to the sink for a window the event time has passed.
type closed struct {
	Sensor string `json:"sensor"`
	Start  int64  `json:"windowStart"`
	Sum    int64  `json:"sum"`
	N      int64  `json:"n"`
}

func main() {
	addr := os.Getenv("REGENT_ADDR")
	if addr == "" {
		addr = "localhost:6633"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, addr, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "tumbling:", err)
		os.Exit(1)
	}
}

// run pushes the readings, processes them, and prints the closed windows.
func run(ctx context.Context, addr string, out io.Writer) error {
	c, err := client.Dial(ctx, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	// Readings of two sensors over 25 s of event time; the last of each
	// moves its watermark past the first two windows.
	var items []client.Item
	for sensor, vals := range map[string][]int64{"sensor-a": {1, 2, 3, 4, 5, 6}, "sensor-b": {10, 20, 30, 40}} {
		for i, v := range vals {
			t := int64(i) * 4000 // 0, 4, 8, 12, ... seconds
			p, _ := json.Marshal(reading{T: t, V: v})
			items = append(items, client.Item{Queue: source, Partition: sensor, TransactionID: fmt.Sprintf("%s-%d", sensor, i), Payload: p})
		}
		p, _ := json.Marshal(reading{T: 25000, V: 0}) // the watermark passes 20 s
		items = append(items, client.Item{Queue: source, Partition: sensor, TransactionID: sensor + "-end", Payload: p})
	}
	res, err := c.Push(ctx, items...)
	if err != nil {
		return err
	}
	if err := res.FirstErr(); err != nil {
		return err
	}
	q, err := c.RegisterQuery(ctx, client.QueryRegistration{Name: query, SourceQueue: source, SinkQueue: sink, ConfigHash: configHash})
	if err != nil {
		return err
	}
	for {
		var b client.Batch
		err := c.Queue(source).Group(group).Batch(100).Partitions(4).Wait(true).Timeout(500*time.Millisecond).PopBatch(ctx, &b)
		if err != nil {
			return err
		}
		if len(b.Messages) == 0 {
			break // nothing left: every reading was processed
		}
		byPart := map[client.ID][]client.Message{}
		var parts []client.ID
		for _, m := range b.Messages {
			if byPart[m.PartitionID] == nil {
				parts = append(parts, m.PartitionID)
			}
			byPart[m.PartitionID] = append(byPart[m.PartitionID], m)
		}
		for _, p := range parts {
			if err := step(ctx, c, q.ID, byPart[p]); err != nil {
				return err
			}
		}
	}
	return report(ctx, c, out)
}

// step processes one partition's batch: one state read, one cycle.
func step(ctx context.Context, c *client.Client, qid client.ID, ms []client.Message) error {
	part := ms[0].PartitionID
	rows, err := c.State(ctx, qid, part, client.StateFilter{})
	if err != nil {
		return err
	}
	windows := map[int64]*open{}
	var wm int64 = -1
	for _, r := range rows {
		if r.Key == wmKey {
			wm, _ = strconv.ParseInt(string(r.Value), 10, 64)
			continue
		}
		var o open
		if err := json.Unmarshal(r.Value, &o); err != nil {
			return fmt.Errorf("state row %q: %w", r.Key, err)
		}
		windows[o.Start] = &o
	}
	for _, m := range ms {
		var r reading
		if err := json.Unmarshal(m.Payload, &r); err != nil {
			return fmt.Errorf("reading %s: %w", m.TransactionID, err)
		}
		start := r.T - r.T%window.Milliseconds()
		w := windows[start]
		if w == nil {
			w = &open{Start: start, End: start + window.Milliseconds()}
			windows[start] = w
		}
		w.Sum += r.V
		w.N++
		wm = max(wm, r.T)
	}
	var cy client.Cycle
	cy.QueryID, cy.PartitionID, cy.Group = qid, part, group
	starts := make([]int64, 0, len(windows))
	for s := range windows {
		starts = append(starts, s)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	for _, s := range starts {
		w := windows[s]
		key := "tumb:10\x1f" + strconv.FormatInt(s, 10)
		if w.End <= wm { // the event time has passed it: emit and forget
			p, _ := json.Marshal(closed{Sensor: ms[0].Partition, Start: w.Start, Sum: w.Sum, N: w.N})
			cy.Pushes = append(cy.Pushes, client.Item{Queue: sink, Partition: ms[0].Partition, Payload: p})
			cy.State = append(cy.State, client.StateOp{Key: key, Delete: true})
			continue
		}
		v, _ := json.Marshal(w)
		cy.State = append(cy.State, client.StateOp{Key: key, Value: v, WindowEnd: w.End, HasWindowEnd: true})
	}
	cy.State = append(cy.State, client.StateOp{Key: wmKey, Value: []byte(strconv.FormatInt(wm, 10))})
	last := ms[len(ms)-1]
	cy.Ack = &client.CycleAck{TransactionID: last.TransactionID, LeaseID: last.LeaseID, Count: len(ms), ReleaseLease: true}
	_, err = c.Cycle(ctx, cy)
	return err
}

// report prints the sink's windows, by sensor and start (read with Peek:
// no lease, no group, so a second run prints them again).
func report(ctx context.Context, c *client.Client, out io.Writer) error {
	var lines []string
	req := client.PeekRequest{Queue: sink, Limit: 100}
	for {
		page, err := c.Peek(ctx, req)
		if err != nil {
			return err
		}
		for _, m := range page.Messages {
			var w closed
			if err := json.Unmarshal(m.Payload, &w); err != nil {
				return err
			}
			n := fmt.Sprintf("%d readings", w.N)
			if w.N == 1 {
				n = "1 reading"
			}
			lines = append(lines, fmt.Sprintf("%s  window %2ds-%2ds  sum %3d  (%s)", w.Sensor, w.Start/1000, (w.Start+window.Milliseconds())/1000, w.Sum, n))
		}
		if !page.More {
			break
		}
		req.After = page.Next
	}
	sort.Strings(lines)
	_, err := fmt.Fprintln(out, strings.Join(lines, "\n"))
	return err
}
