package httpapi

import (
	"net/http"
	"strconv"

	"github.com/regentmq/regent/engine"
)

// Pages: every list the HTTP bridge answers is a page, with a default and a
// maximum size, and says how to get the rest. Where Queen's answer is an
// object, Regent adds "pagination": {"limit", "offset", "total"} (and
// "next", the cursor or offset of the next page, or null at the end);
// where it is a bare array (the consumer-group routes), the total goes in
// the X-Total-Count header. Nothing is materialized beyond the page: sums
// over a queue (counts, totals, lag) are read one partition at a time
// (engine.EachPartition), and lists sorted by something other than their
// stable order (by lag, by time) keep only the best offset+limit entries
// seen (topK), at most maxSortedWindow of them.

// Page sizes of the lists.
const (
	pageDefault = 1000   // queues, partitions, groups, positions
	pageMax     = 10_000 // whatever the request asks
	// maxSortedWindow bounds offset+limit of the lists sorted by lag or
	// time: each request keeps that many entries while it scans.
	maxSortedWindow = 20_000
)

// pageOf reads limit (0 or absent: def; at most pageMax) and offset.
func pageOf(raw string, def int) (limit, offset int, err error) {
	if limit, err = queryInt(raw, "limit", def); err != nil {
		return 0, 0, err
	}
	limit = engine.PageLimit(limit, def, pageMax)
	offset, err = queryInt(raw, "offset", 0)
	return limit, offset, err
}

// sortedWindow checks that a sorted list's page lies within
// maxSortedWindow.
func sortedWindow(limit, offset int) error {
	if offset+limit > maxSortedWindow {
		return badRequest("offset + limit is at most " + strconv.Itoa(maxSortedWindow) + " for this list: narrow it with its filters")
	}
	return nil
}

// partitionPageOf reads a partition page's request: limit, offset and
// after (a partition id, the cursor "next" of the previous page).
func partitionPageOf(raw string) (engine.PageRequest, error) {
	limit, offset, err := pageOf(raw, engine.DefaultPartitionPage)
	if err != nil {
		return engine.PageRequest{}, err
	}
	r := engine.PageRequest{Limit: limit, Offset: offset}
	if a := queryParam(raw, "after"); a != "" {
		if r.After, err = engine.ParseUUID(a); err != nil {
			return engine.PageRequest{}, badRequest("after: want a partition id (the previous page's pagination.next)")
		}
	}
	return r, nil
}

// partitionPagination is the "pagination" of a partition page: next is
// the cursor (the last partition's id) when more follow, else null.
func partitionPagination(pg *engine.PartitionPage, limit int) map[string]any {
	var next any
	if pg.More && len(pg.Partitions) > 0 {
		next = pg.Partitions[len(pg.Partitions)-1].ID.String()
	}
	return map[string]any{"limit": limit, "offset": pg.Offset, "total": pg.Total, "next": next}
}

// offsetPagination is the "pagination" of a list paged by offset: next is
// the offset of the next page when more follow, else null.
func offsetPagination(limit, offset, n, total int) map[string]any {
	var next any
	if offset+n < total {
		next = offset + n
	}
	return map[string]any{"limit": limit, "offset": offset, "total": total, "next": next}
}

// setTotal says in the X-Total-Count header how many entries an array
// answer's list has in all (readable by scripts of other origins too).
func setTotal(w http.ResponseWriter, total int) {
	h := w.Header()
	h.Set("X-Total-Count", strconv.Itoa(total))
	h.Set("Access-Control-Expose-Headers", "X-Total-Count")
}

// window returns s[offset:offset+limit] within bounds.
func window[T any](s []T, limit, offset int) []T {
	s = s[min(offset, len(s)):]
	return s[:min(limit, len(s))]
}

// topK keeps the k first items of a stream by less (a heap whose root is
// the last kept); sorted returns them in order.
type topK[T any] struct {
	k    int
	less func(a, b T) bool
	h    []T
}

func newTopK[T any](k int, less func(a, b T) bool) *topK[T] {
	return &topK[T]{k: k, less: less, h: make([]T, 0, min(k, 1024))}
}

// full reports whether k items are kept: then only items before last()
// get in.
func (t *topK[T]) full() bool { return len(t.h) >= t.k }

// last is the last item kept (call only when full).
func (t *topK[T]) last() T { return t.h[0] }

// wants reports whether push would keep x (so that a caller copies only
// what is kept).
func (t *topK[T]) wants(x T) bool { return t.k > 0 && (!t.full() || t.less(x, t.h[0])) }

// offer keeps a copy of x when push would keep x: fill writes the copy
// into *dst, reusing what *dst holds (the entry x evicts, or a zero T), so
// that a stream of entries that each replace the last one kept allocates
// nothing.
func (t *topK[T]) offer(x T, fill func(dst *T)) {
	if !t.wants(x) {
		return
	}
	if len(t.h) < t.k {
		var z T
		fill(&z)
		t.push(z)
		return
	}
	fill(&t.h[0])
	t.down(0, len(t.h))
}

// push offers x; it reports whether x was kept.
func (t *topK[T]) push(x T) bool {
	if t.k <= 0 {
		return false
	}
	if len(t.h) < t.k {
		t.h = append(t.h, x)
		for i := len(t.h) - 1; i > 0; {
			p := (i - 1) / 2
			if !t.less(t.h[p], t.h[i]) {
				break
			}
			t.h[p], t.h[i] = t.h[i], t.h[p]
			i = p
		}
		return true
	}
	if !t.less(x, t.h[0]) {
		return false
	}
	t.h[0] = x
	t.down(0, len(t.h))
	return true
}

func (t *topK[T]) down(i, n int) {
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && t.less(t.h[c], t.h[c+1]) {
			c++
		}
		if !t.less(t.h[i], t.h[c]) {
			return
		}
		t.h[i], t.h[c] = t.h[c], t.h[i]
		i = c
	}
}

// sorted returns the kept items in order (and empties t).
func (t *topK[T]) sorted() []T {
	for n := len(t.h) - 1; n > 0; n-- {
		t.h[0], t.h[n] = t.h[n], t.h[0]
		t.down(0, n)
	}
	out := t.h
	t.h = nil
	return out
}

// queueAgg is what the reports sum over a queue's partitions.
type queueAgg struct {
	counts     msgCounts  // DeadLetter: the queue's entries
	groups     []groupLag // by the head's groups
	leases     int        // live leases (a group on a partition)
	leaseBatch uint64     // messages under them
}

// aggregate sums a queue's partitions, one at a time; each, when not nil,
// is called with every partition too (its view is reused: copy what you
// keep).
func (s *Server) aggregate(v *engine.QueueView, now int64, each func(*engine.PartitionView)) queueAgg {
	a := queueAgg{groups: make([]groupLag, len(v.Groups))}
	idx := make(map[string]int, len(v.Groups))
	for i, g := range v.Groups {
		a.groups[i] = groupLag{Name: g.Name, SubscriptionMode: modeName(g.Mode)}
		idx[g.Name] = i
	}
	s.e.EachPartition(v.Name, func(p *engine.PartitionView) bool {
		a.counts.add(partitionCounts(p, 0))
		for j := range p.Groups {
			g := &p.Groups[j]
			if g.Leased {
				a.leases++
				a.leaseBatch += g.LeaseTo - g.LeaseFrom
			}
			k, ok := idx[g.Group]
			if !ok {
				continue
			}
			gl := &a.groups[k]
			off, secs := lagOf(p, g, now)
			gl.Partitions++
			if off > 0 {
				gl.PartitionsWithLag++
			}
			gl.OffsetLag += off
			gl.MaxTimeLagSeconds = max(gl.MaxTimeLagSeconds, secs)
			if g.Leased {
				gl.Leases++
			}
			gl.Retrying += g.Retrying
		}
		if each != nil {
			each(p)
		}
		return true
	})
	a.counts.DeadLetter = uint64(v.DeadLetters)
	return a
}

// heads returns the views (without partitions) of every queue but the
// internal ones, by name.
func (s *Server) heads() []engine.QueueView {
	all := s.e.QueueHeads()
	out := all[:0]
	for _, v := range all {
		if !internalQueue(v.Name) {
			out = append(out, v)
		}
	}
	return out
}

// filterHeads returns the heads matching the queue, namespace and task
// parameters.
func (s *Server) filterHeads(raw string) []engine.QueueView {
	queue, ns, task := queryParam(raw, "queue"), queryParam(raw, "namespace"), queryParam(raw, "task")
	if ns == "" {
		ns = queryParam(raw, "ns")
	}
	var out []engine.QueueView
	for _, v := range s.heads() {
		if (queue != "" && v.Name != queue) || (ns != "" && v.Options.Namespace != ns) || (task != "" && v.Options.Task != task) {
			continue
		}
		out = append(out, v)
	}
	return out
}

// deadCounts returns the dead-letter entries of each partition of a page.
func (s *Server) deadCounts(queue string, parts []engine.PartitionView) []int {
	ids := make([]engine.UUID, len(parts))
	for i := range parts {
		ids[i] = parts[i].ID
	}
	return s.e.DeadLetterCounts(queue, ids)
}
