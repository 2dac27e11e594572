package netserver

import (
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/regentmq/regent/engine"
)

// Read models: GET /api/v1/resources/{overview,queues,queues/{queue},
// namespaces,tasks}. Unlike Queen's (refreshed periodically into a stats
// table), Regent's figures are computed from the engine's state at the
// time of the request; statsAge is always 0.
//
// Message counts of a partition are taken relative to its slowest consumer
// group (the one with the lowest cursor; with no group yet, nothing is
// consumed): total = messages held, completed = held messages before that
// cursor, processing = messages under that group's live lease, pending =
// the rest, failed = messages with a failed ack counted and waiting to come
// back, deadLetter = dead-letter entries.

// msgCounts are Queen's message figures.
type msgCounts struct {
	Total      uint64 `json:"total"`
	Pending    uint64 `json:"pending"`
	Processing uint64 `json:"processing"`
	Completed  uint64 `json:"completed"`
	Failed     uint64 `json:"failed"`
	DeadLetter uint64 `json:"deadLetter"`
}

func (c *msgCounts) add(o msgCounts) {
	c.Total += o.Total
	c.Pending += o.Pending
	c.Processing += o.Processing
	c.Completed += o.Completed
	c.Failed += o.Failed
	c.DeadLetter += o.DeadLetter
}

// partitionCounts computes a partition's figures (dead = its dead-letter
// entries).
func partitionCounts(p *engine.PartitionView, dead int) msgCounts {
	c := msgCounts{Total: p.Next - p.Low, DeadLetter: uint64(dead)}
	cursor := p.Low
	var slow *engine.GroupState
	for i := range p.Groups {
		g := &p.Groups[i]
		if slow == nil || g.Cursor < slow.Cursor {
			slow = g
		}
	}
	if slow != nil {
		cursor = max(slow.Cursor, p.Low)
		if slow.Leased && slow.LeaseTo > cursor {
			c.Processing = slow.LeaseTo - max(cursor, slow.LeaseFrom)
		}
		c.Failed = uint64(slow.Retrying)
	}
	cursor = min(cursor, p.Next)
	c.Completed = cursor - p.Low
	c.Pending = p.Next - cursor - c.Processing
	return c
}

// internalQueue reports whether a queue is Regent's own (the traces store)
// and so left out of listings.
func internalQueue(name string) bool { return strings.HasPrefix(name, internalPrefix) }

const internalPrefix = "__regent_"

// views returns the views of every queue but the internal ones.
func (s *HTTPServer) views() []engine.QueueView {
	all := s.e.ViewQueues()
	out := all[:0]
	for _, v := range all {
		if !internalQueue(v.Name) {
			out = append(out, v)
		}
	}
	return out
}

// deadByPartition counts a queue's dead-letter entries per partition.
func (s *HTTPServer) deadByPartition(queue string) map[engine.UUID]int {
	m := map[engine.UUID]int{}
	entries, _, err := s.e.DLQ(engine.DLQFilter{Queue: queue, Limit: 1 << 30})
	if err != nil {
		return m
	}
	for i := range entries {
		m[entries[i].Message.PartitionID]++
	}
	return m
}

// queueCounts sums a queue's partitions (dead-letter entries counted per
// queue).
func queueCounts(v *engine.QueueView) msgCounts {
	var c msgCounts
	for i := range v.Partitions {
		c.add(partitionCounts(&v.Partitions[i], 0))
	}
	c.DeadLetter = uint64(v.DeadLetters)
	return c
}

type queueSummary struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace"`
	Task       string `json:"task"`
	CreatedAt  string `json:"createdAt"`
	Partitions int    `json:"partitions"`
	Messages   struct {
		Total      uint64 `json:"total"`
		Pending    uint64 `json:"pending"`
		Processing uint64 `json:"processing"`
	} `json:"messages"`
}

func summarize(v *engine.QueueView) queueSummary {
	c := queueCounts(v)
	q := queueSummary{ID: v.ID.String(), Name: v.Name, Namespace: v.Options.Namespace, Task: v.Options.Task,
		CreatedAt: fmtTime(v.Created), Partitions: len(v.Partitions)}
	q.Messages.Total, q.Messages.Pending, q.Messages.Processing = c.Total, c.Pending, c.Processing
	return q
}

// GET /api/v1/resources/queues
func (s *HTTPServer) handleQueues(w http.ResponseWriter, r *http.Request) {
	vs := s.views()
	out := make([]queueSummary, len(vs))
	for i := range vs {
		out[i] = summarize(&vs[i])
	}
	s.writeValue(w, http.StatusOK, map[string]any{"queues": out})
}

type partitionDetail struct {
	ID            string    `json:"id"`
	Name          string    `json:"name"`
	CreatedAt     *string   `json:"createdAt"`
	Stats         msgCounts `json:"stats"`
	OldestMessage *string   `json:"oldestMessage"`
	NewestMessage *string   `json:"newestMessage"`
}

// GET /api/v1/resources/queues/{queue}
func (s *HTTPServer) handleQueue(w http.ResponseWriter, r *http.Request) {
	v, err := s.e.ViewQueue(r.PathValue("queue"))
	if err != nil {
		writeError(w, http.StatusNotFound, "Queue not found")
		return
	}
	dead := s.deadByPartition(v.Name)
	parts := make([]partitionDetail, len(v.Partitions))
	var totals msgCounts
	for i := range v.Partitions {
		p := &v.Partitions[i]
		c := partitionCounts(p, dead[p.ID])
		totals.add(c)
		created := p.Oldest
		if created == 0 {
			created = v.Created
		}
		parts[i] = partitionDetail{ID: p.ID.String(), Name: p.Name, CreatedAt: timePtr(created), Stats: c,
			OldestMessage: timePtr(p.Oldest), NewestMessage: timePtr(p.Newest)}
	}
	s.writeValue(w, http.StatusOK, map[string]any{
		"id": v.ID.String(), "name": v.Name, "namespace": v.Options.Namespace, "task": v.Options.Task,
		"createdAt": fmtTime(v.Created), "partitions": parts, "totals": totals,
	})
}

type labelSummary struct {
	Label      string
	Queues     int `json:"queues"`
	Partitions int `json:"partitions"`
	Messages   struct {
		Total   uint64 `json:"total"`
		Pending uint64 `json:"pending"`
	} `json:"messages"`
}

// byLabel groups queues by namespace or task (queues without one are left
// out, as Queen does).
func byLabel(vs []engine.QueueView, task bool) []labelSummary {
	idx := map[string]int{}
	var out []labelSummary
	for i := range vs {
		v := &vs[i]
		l := v.Options.Namespace
		if task {
			l = v.Options.Task
		}
		if l == "" {
			continue
		}
		k, ok := idx[l]
		if !ok {
			k = len(out)
			idx[l] = k
			out = append(out, labelSummary{Label: l})
		}
		c := queueCounts(v)
		out[k].Queues++
		out[k].Partitions += len(v.Partitions)
		out[k].Messages.Total += c.Total
		out[k].Messages.Pending += c.Pending
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Label < out[j].Label })
	return out
}

func labelJSON(ls []labelSummary, key string) []map[string]any {
	out := make([]map[string]any, len(ls))
	for i, l := range ls {
		out[i] = map[string]any{key: l.Label, "queues": l.Queues, "partitions": l.Partitions, "messages": l.Messages}
	}
	return out
}

// GET /api/v1/resources/namespaces
func (s *HTTPServer) handleNamespaces(w http.ResponseWriter, r *http.Request) {
	s.writeValue(w, http.StatusOK, map[string]any{"namespaces": labelJSON(byLabel(s.views(), false), "namespace")})
}

// GET /api/v1/resources/tasks
func (s *HTTPServer) handleTasks(w http.ResponseWriter, r *http.Request) {
	s.writeValue(w, http.StatusOK, map[string]any{"tasks": labelJSON(byLabel(s.views(), true), "task")})
}

// spread is Queen's {avg, median, min, max}.
type spread struct {
	Avg    float64 `json:"avg"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	sort.Float64s(xs)
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	med := xs[len(xs)/2]
	if len(xs)%2 == 0 {
		med = (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
	}
	return spread{Avg: sum / float64(len(xs)), Median: med, Min: xs[0], Max: xs[len(xs)-1]}
}

// lags returns the offset lag and time lag (seconds) of every (group,
// partition) position.
func lags(vs []engine.QueueView, now int64) (offsets, times []float64) {
	for i := range vs {
		for j := range vs[i].Partitions {
			p := &vs[i].Partitions[j]
			for _, g := range p.Groups {
				offsets = append(offsets, float64(p.Next-min(g.Cursor, p.Next)))
				if g.CursorTime > 0 {
					times = append(times, float64(max(now-g.CursorTime, 0))/1e9)
				} else {
					times = append(times, 0)
				}
			}
		}
	}
	return offsets, times
}

// GET /api/v1/resources/overview
func (s *HTTPServer) handleOverview(w http.ResponseWriter, r *http.Request) {
	vs := s.views()
	var c msgCounts
	parts := 0
	for i := range vs {
		c.add(queueCounts(&vs[i]))
		parts += len(vs[i].Partitions)
	}
	offs, times := lags(vs, s.e.Now())
	rt := s.met.rates()
	s.writeValue(w, http.StatusOK, map[string]any{
		"queues":     len(vs),
		"partitions": parts,
		"namespaces": len(byLabel(vs, false)),
		"tasks":      len(byLabel(vs, true)),
		"messages":   c,
		"lag":        map[string]any{"time": spreadOf(times), "offset": spreadOf(offs)},
		"throughput": map[string]any{"ingestedPerSecond": rt.push, "processedPerSecond": rt.ack},
		"timestamp":  fmtTime(time.Now().UnixNano()),
		"statsAge":   0,
	})
}
