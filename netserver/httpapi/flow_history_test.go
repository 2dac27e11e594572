package httpapi

import (
	"fmt"
	"testing"
)

// The history keeps at most rowBudget per-queue rows: past it the oldest
// minutes lose theirs (their totals stay), and a minute busier than the
// whole budget keeps its busiest queues.
func TestFlowHistoryRowBudget(t *testing.T) {
	h := &flowHistory{rowBudget: 5}
	const m0 = 29_000_000
	minute := func(m int64, queues ...int) minuteRec {
		rec := minuteRec{minute: m, total: flowCounts{pushed: uint64(100 + m - m0)}}
		for _, n := range queues {
			rec.queues = append(rec.queues, queueRow{name: fmt.Sprint("q", n), flowCounts: flowCounts{pushed: uint64(n)}})
		}
		return rec
	}
	rowsOf := func() (n int) {
		for i := range h.mins {
			n += len(h.mins[i].queues)
		}
		return n
	}
	h.store(minute(m0, 1, 2))
	h.store(minute(m0+1, 1, 2))
	h.store(minute(m0+2, 3)) // 5 rows: all kept
	if h.rows != 5 || rowsOf() != 5 || h.slot(m0).queues == nil {
		t.Fatalf("within the budget: %d rows (%d counted)", rowsOf(), h.rows)
	}
	h.store(minute(m0+3, 4)) // 6: m0 loses its rows, keeps its total
	if h.rows != 4 || rowsOf() != 4 || h.slot(m0).queues != nil || h.slot(m0).total.pushed != 100 || h.slot(m0+1).queues == nil {
		t.Fatalf("past the budget: %d rows (%d counted), m0 %+v", rowsOf(), h.rows, *h.slot(m0))
	}
	h.store(minute(m0+4, 1, 7, 3, 9, 2, 8)) // alone past the budget: its 5 busiest, by name
	got := ""
	for _, q := range h.slot(m0 + 4).queues {
		got += q.name + " "
	}
	if got != "q2 q3 q7 q8 q9 " || h.rows != 5 || rowsOf() != 5 {
		t.Fatalf("a minute busier than the budget kept %q; %d rows (%d counted)", got, rowsOf(), h.rows)
	}
	// The ring: a minute a day later takes the slot, and its rows' count.
	h.store(minute(m0+4+historyMinutes, 1))
	if h.rows != 1 || rowsOf() != 1 || h.slot(m0+4).minute != m0+4+historyMinutes {
		t.Fatalf("after a day: %d rows (%d counted)", rowsOf(), h.rows)
	}
}
