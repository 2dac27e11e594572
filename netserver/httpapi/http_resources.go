package httpapi

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
// entries). Offsets lost to journal damage count nowhere.
func partitionCounts(p *engine.PartitionView, dead int) msgCounts {
	c := msgCounts{Total: p.Next - p.Low - lostIn(p.Lost, p.Low, p.Next), DeadLetter: uint64(dead)}
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
	c.Completed = cursor - p.Low - lostIn(p.Lost, p.Low, cursor)
	c.Pending = p.Next - cursor - c.Processing - lostIn(p.Lost, cursor, p.Next)
	return c
}

// lostIn counts the offsets of lost in [from, to).
func lostIn(lost []engine.OffsetRange, from, to uint64) uint64 {
	var n uint64
	for _, r := range lost {
		if lo, hi := max(r.First, from), min(r.Last+1, to); lo < hi {
			n += hi - lo
		}
	}
	return n
}

// internalQueue reports whether a queue is Regent's own (the traces store)
// and so left out of listings.
func internalQueue(name string) bool { return strings.HasPrefix(name, internalPrefix) }

// InternalQueue reports whether a queue is Regent's own (the traces store
// this door keeps), which listings leave out.
func InternalQueue(name string) bool { return internalQueue(name) }

const internalPrefix = "__regent_"

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

// summarize sums a queue's partitions into Queen's summary.
func (s *Server) summarize(v *engine.QueueView) queueSummary {
	c := s.aggregate(v, 0, nil).counts
	q := queueSummary{ID: v.ID.String(), Name: v.Name, Namespace: v.Options.Namespace, Task: v.Options.Task,
		CreatedAt: fmtTime(v.Created), Partitions: v.PartitionCount}
	q.Messages.Total, q.Messages.Pending, q.Messages.Processing = c.Total, c.Pending, c.Processing
	return q
}

// GET /api/v1/resources/queues?limit=1000&offset=0
//
// Queen ignores query parameters here; Regent pages the queues (by name)
// and adds "pagination".
func (s *Server) handleQueues(w http.ResponseWriter, r *http.Request) {
	limit, offset, err := pageOf(r.URL.RawQuery, pageDefault)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	vs := s.heads()
	page := window(vs, limit, offset)
	out := make([]queueSummary, len(page))
	for i := range page {
		out[i] = s.summarize(&page[i])
	}
	s.writeValue(w, http.StatusOK, map[string]any{"queues": out, "pagination": offsetPagination(limit, offset, len(out), len(vs))})
}

type partitionDetail struct {
	ID            string    `json:"id"`
	Name          string    `json:"name"`
	CreatedAt     *string   `json:"createdAt"`
	Stats         msgCounts `json:"stats"`
	OldestMessage *string   `json:"oldestMessage"`
	NewestMessage *string   `json:"newestMessage"`
	// Lost: the offsets lost to journal damage (a salvaged start); absent
	// when none were.
	Lost []offsetRange `json:"lostOffsets,omitempty"`
}

type offsetRange struct {
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
}

// GET /api/v1/resources/queues/{queue}?limit=1000&offset=0&after=<partition id>
//
// The partitions are a page (in creation order; default 1,000, at most
// 10,000), "pagination" says where it lies and gives the cursor of the
// next one; totals sum every partition.
func (s *Server) handleQueue(w http.ResponseWriter, r *http.Request) {
	v, err := s.e.ViewQueueHead(r.PathValue("queue"))
	if err != nil {
		writeError(w, http.StatusNotFound, "Queue not found")
		return
	}
	req, err := partitionPageOf(r.URL.RawQuery)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	pg, err := s.e.ViewPartitions(v.Name, req)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	dead := s.deadCounts(v.Name, pg.Partitions)
	parts := make([]partitionDetail, len(pg.Partitions))
	for i := range pg.Partitions {
		p := &pg.Partitions[i]
		created := p.Oldest
		if created == 0 {
			created = v.Created
		}
		parts[i] = partitionDetail{ID: p.ID.String(), Name: p.Name, CreatedAt: timePtr(created), Stats: partitionCounts(p, dead[i]),
			OldestMessage: timePtr(p.Oldest), NewestMessage: timePtr(p.Newest)}
		for _, r := range p.Lost {
			parts[i].Lost = append(parts[i].Lost, offsetRange{r.First, r.Last})
		}
	}
	totals := s.aggregate(&v, 0, nil).counts
	s.writeValue(w, http.StatusOK, map[string]any{
		"id": v.ID.String(), "name": v.Name, "namespace": v.Options.Namespace, "task": v.Options.Task,
		"createdAt": fmtTime(v.Created), "partitions": parts, "totals": totals,
		"pagination": partitionPagination(&pg, req.Limit),
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
// out, as Queen does); counts holds each queue's figures.
func byLabel(vs []engine.QueueView, counts []msgCounts, task bool) []labelSummary {
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
		out[k].Queues++
		out[k].Partitions += v.PartitionCount
		out[k].Messages.Total += counts[i].Total
		out[k].Messages.Pending += counts[i].Pending
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

// queueCounts returns the heads of every queue and each one's figures.
func (s *Server) queueCounts() ([]engine.QueueView, []msgCounts) {
	vs := s.heads()
	cs := make([]msgCounts, len(vs))
	for i := range vs {
		cs[i] = s.aggregate(&vs[i], 0, nil).counts
	}
	return vs, cs
}

// labels answers the namespaces or tasks, a page of them (by name).
func (s *Server) labels(w http.ResponseWriter, r *http.Request, task bool, key string) {
	limit, offset, err := pageOf(r.URL.RawQuery, pageDefault)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	vs, cs := s.queueCounts()
	ls := byLabel(vs, cs, task)
	page := window(ls, limit, offset)
	s.writeValue(w, http.StatusOK, map[string]any{key + "s": labelJSON(page, key),
		"pagination": offsetPagination(limit, offset, len(page), len(ls))})
}

// GET /api/v1/resources/namespaces?limit=1000&offset=0
func (s *Server) handleNamespaces(w http.ResponseWriter, r *http.Request) {
	s.labels(w, r, false, "namespace")
}

// GET /api/v1/resources/tasks?limit=1000&offset=0
func (s *Server) handleTasks(w http.ResponseWriter, r *http.Request) {
	s.labels(w, r, true, "task")
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

// maxLagSample bounds the positions a lag spread is computed from: above
// it, the median comes from a uniform sample of that many positions
// (reservoir sampling); the average, the minimum and the maximum are exact.
const maxLagSample = 1 << 16

// lagSpread gathers the offset and time lags of (group, partition)
// positions into spreads, holding at most maxLagSample of each.
type lagSpread struct {
	n              int
	offs, times    []float64
	sumOff, sumT   float64
	minOff, maxOff float64
	minT, maxT     float64
	rng            uint64
}

func (l *lagSpread) add(off, secs float64) {
	if l.n == 0 {
		l.minOff, l.maxOff, l.minT, l.maxT = off, off, secs, secs
	}
	l.n++
	l.sumOff += off
	l.sumT += secs
	l.minOff, l.maxOff = min(l.minOff, off), max(l.maxOff, off)
	l.minT, l.maxT = min(l.minT, secs), max(l.maxT, secs)
	if len(l.offs) < maxLagSample {
		l.offs, l.times = append(l.offs, off), append(l.times, secs)
		return
	}
	// Algorithm R with a fixed-seed xorshift: the position replaces a kept
	// one with probability maxLagSample/n.
	l.rng ^= l.rng << 13
	l.rng ^= l.rng >> 7
	l.rng ^= l.rng << 17
	if k := l.rng % uint64(l.n); k < maxLagSample {
		l.offs[k], l.times[k] = off, secs
	}
}

func (l *lagSpread) spread(xs []float64, sum, lo, hi float64) spread {
	if l.n == 0 {
		return spread{}
	}
	sp := spreadOf(xs)
	sp.Avg, sp.Min, sp.Max = sum/float64(l.n), lo, hi
	return sp
}

// GET /api/v1/resources/overview
func (s *Server) handleOverview(w http.ResponseWriter, r *http.Request) {
	vs := s.heads()
	now := s.e.Now()
	var c msgCounts
	parts := 0
	cs := make([]msgCounts, len(vs))
	positions := 0
	for i := range vs {
		positions += vs[i].PartitionCount * len(vs[i].Groups)
	}
	n := min(positions, maxLagSample)
	lag := lagSpread{rng: 0x9e3779b97f4a7c15, offs: make([]float64, 0, n), times: make([]float64, 0, n)}
	for i := range vs {
		cs[i] = s.aggregate(&vs[i], now, func(p *engine.PartitionView) {
			for j := range p.Groups {
				g := &p.Groups[j]
				off, _ := lagOf(p, g, now)
				secs := 0.0
				if g.CursorTime > 0 {
					secs = float64(max(now-g.CursorTime, 0)) / 1e9
				}
				lag.add(float64(off), secs)
			}
		}).counts
		c.add(cs[i])
		parts += vs[i].PartitionCount
	}
	rt := s.met.rates()
	s.writeValue(w, http.StatusOK, map[string]any{
		"queues":     len(vs),
		"partitions": parts,
		"namespaces": len(byLabel(vs, cs, false)),
		"tasks":      len(byLabel(vs, cs, true)),
		"messages":   c,
		"lag": map[string]any{"time": lag.spread(lag.times, lag.sumT, lag.minT, lag.maxT),
			"offset": lag.spread(lag.offs, lag.sumOff, lag.minOff, lag.maxOff)},
		"throughput": map[string]any{"ingestedPerSecond": rt.push, "processedPerSecond": rt.ack},
		"timestamp":  fmtTime(time.Now().UnixNano()),
		"statsAge":   0,
	})
}
