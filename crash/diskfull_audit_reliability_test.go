package crash

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
)

// The checks of TestDiskFullThenKill9, after the restart and the drain:
//
//	| check                | violated when                                                            |
//	|----------------------|--------------------------------------------------------------------------|
//	| auto lost            | a push answered queued is delivered to group auto neither before the     |
//	|                      | kill nor in the drain, and no pop the kill left unanswered can have      |
//	|                      | taken it (see below)                                                     |
//	| auto twice           | a message is delivered to group auto more than once                      |
//	| auto skipped         | an offset below the partition's end that group auto never got and no     |
//	|                      | unanswered pop can have taken (a message whose push went unanswered)     |
//	| auto cursor          | after the drain, group auto's cursor is not at the partition's end       |
//	| phantom              | a delivered message or DLQ entry that was never pushed, or whose         |
//	|                      | payload, partition, id or offset differ from what its push was answered  |
//	| refused kept         | a message stored although every push of it was answered refused, or a    |
//	|                      | push answered duplicate while every earlier push of it had been refused  |
//	| dlq missing          | a dlq ack answered success has no DLQ entry after the restart            |
//	| dlq text             | a DLQ entry whose error text is not the one its dlq ack sent             |
//	| dlq refused+completed| a DLQ entry for a message whose dlq acks were all refused and that was   |
//	|                      | then acked completed (answered success)                                  |
//	| dlq unasked          | any other DLQ entry with no dlq ack for it that was not refused          |
//	| dlq twice            | a message in the DLQ more than once                                      |
//	| leased redelivered   | group leased gets a message after a completed or dlq ack of it was       |
//	|                      | answered success                                                         |
//	| leased lost          | a push answered queued that group leased neither finished (an ack not    |
//	|                      | refused) nor got in the drain                                            |
//	| start                | the broker does not come back after the kill                             |
//
// AutoAck is at most once: a pop whose answer the kill cut off may have
// moved the cursor past what it took. Such a pop (sent before the kill,
// never answered) excuses missing offsets: at most its batch, in at most
// its partitions count of runs, and only above every offset of that
// partition delivered by a pop answered before it was sent (the cursor was
// past those). A pop answered with an error (a refused record) excuses
// nothing: it must leave no trace.

// dfReport is one run's figures (or the sum of several runs').
type dfReport struct {
	runs       int
	seed       uint64
	up         time.Duration
	dir        string
	elapsed    time.Duration
	fullCycles int
	fullAtKill bool
	killsFull  int
	fullTime   time.Duration
	breaths    int // moments of room the filler gave back while full
	// journalFull is how many times the journal found the disk full
	// (entered its no-space state: appends refused until a write fits).
	journalFull int

	pushItems, pushQueued, pushSendsRefused, pushGivenUp, pushUnanswered int
	autoPopsOK, autoPopsRefused, autoPopsCut, autoPopsEarly              int
	autoBefore, autoDrain, autoLostAtKill                                int
	leasedDeliveries, leasedDrain, leasedPopsRefused                     int
	completedOK, completedRefused, dlqOK, dlqRefused, dlqRefusedJournal  int
	acksUnanswered, dlqEntries, dlqThenCompleted                         int
	autoLost, autoTwice, autoSkipped, autoCursor, phantoms, refusedKept  int
	dlqMissing, dlqText, dlqRefusedCompleted, dlqUnasked, dlqTwice       int
	leasedRedelivered, leasedLost, startFailures                         int
	problems                                                             []string
	refusalCodes                                                         map[protocol.Code]int
}

func (r *dfReport) violations() int {
	return r.autoLost + r.autoTwice + r.autoSkipped + r.autoCursor + r.phantoms + r.refusedKept + r.dlqMissing + r.dlqText +
		r.dlqRefusedCompleted + r.dlqUnasked + r.dlqTwice + r.leasedRedelivered + r.leasedLost + r.startFailures
}

func (r *dfReport) problem(counter *int, format string, args ...any) {
	*counter++
	if len(r.problems) < maxProblems {
		r.problems = append(r.problems, fmt.Sprintf(format, args...))
	}
}

func (r *dfReport) refusal(code protocol.Code) {
	if r.refusalCodes == nil {
		r.refusalCodes = map[protocol.Code]int{}
	}
	r.refusalCodes[code]++
}

// add sums o's counters into r.
func (r *dfReport) add(o *dfReport) {
	r.runs++
	r.elapsed += o.elapsed
	r.up += o.up
	r.fullCycles += o.fullCycles
	r.fullTime += o.fullTime
	r.breaths += o.breaths
	r.journalFull += o.journalFull
	if o.fullAtKill {
		r.killsFull++
	}
	ints := func(x *dfReport) []*int {
		return []*int{&x.pushItems, &x.pushQueued, &x.pushSendsRefused, &x.pushGivenUp, &x.pushUnanswered,
			&x.autoPopsOK, &x.autoPopsRefused, &x.autoPopsCut, &x.autoPopsEarly, &x.autoBefore, &x.autoDrain, &x.autoLostAtKill,
			&x.leasedDeliveries, &x.leasedDrain, &x.leasedPopsRefused, &x.completedOK, &x.completedRefused, &x.dlqOK, &x.dlqRefused,
			&x.dlqRefusedJournal, &x.acksUnanswered, &x.dlqEntries, &x.dlqThenCompleted,
			&x.autoLost, &x.autoTwice, &x.autoSkipped, &x.autoCursor, &x.phantoms, &x.refusedKept,
			&x.dlqMissing, &x.dlqText, &x.dlqRefusedCompleted, &x.dlqUnasked, &x.dlqTwice,
			&x.leasedRedelivered, &x.leasedLost, &x.startFailures}
	}
	for i, p := range ints(r) {
		*p += *ints(o)[i]
	}
	for code, n := range o.refusalCodes {
		for i := 0; i < n; i++ {
			r.refusal(code)
		}
	}
}

func (r *dfReport) String() string {
	var b strings.Builder
	if r.runs == 0 {
		fullAtKill := "no"
		if r.fullAtKill {
			fullAtKill = "yes"
		}
		fmt.Fprintf(&b, "  seed %d, %v of load; disk filled %d times (%v in all, %d breaths), the journal found it full %d times; full at the kill: %s; run took %v\n",
			r.seed, r.up.Round(time.Millisecond), r.fullCycles, r.fullTime.Round(time.Millisecond), r.breaths, r.journalFull, fullAtKill, r.elapsed.Round(time.Millisecond))
	} else {
		fmt.Fprintf(&b, "  %d runs, %v of load; disk filled %d times (%v in all, %d breaths), the journal found it full %d times; %d kills while full; %v in all\n",
			r.runs, r.up.Round(time.Millisecond), r.fullCycles, r.fullTime.Round(time.Millisecond), r.breaths, r.journalFull, r.killsFull, r.elapsed.Round(time.Second))
	}
	var codes []string
	for code, n := range r.refusalCodes {
		codes = append(codes, fmt.Sprintf("%v %d", code, n))
	}
	sort.Strings(codes)
	fmt.Fprintf(&b, "  pushes: %d items, %d answered queued, %d sends answered refused (%s), %d items given up refused, %d unanswered at the kill\n",
		r.pushItems, r.pushQueued, r.pushSendsRefused, strings.Join(codes, ", "), r.pushGivenUp, r.pushUnanswered)
	fmt.Fprintf(&b, "  autoAck: pops answered %d, refused %d, cut off by the kill %d (earlier %d); delivered %d before the kill and %d in the drain; %d taken by pops the kill cut off (at most once)\n",
		r.autoPopsOK, r.autoPopsRefused, r.autoPopsCut, r.autoPopsEarly, r.autoBefore, r.autoDrain, r.autoLostAtKill)
	fmt.Fprintf(&b, "  leased: %d deliveries (%d in the drain; %d pops refused); completed acks %d ok, %d refused; dlq acks %d ok, %d refused (%d by the journal; %d of those messages then completed); %d acks unanswered; DLQ entries %d\n",
		r.leasedDeliveries, r.leasedDrain, r.leasedPopsRefused, r.completedOK, r.completedRefused, r.dlqOK, r.dlqRefused, r.dlqRefusedJournal,
		r.dlqThenCompleted, r.acksUnanswered, r.dlqEntries)
	fmt.Fprintf(&b, "  violations: auto lost %d, auto twice %d, auto skipped %d, auto cursor %d, phantom %d, refused kept %d, dlq missing %d, dlq text %d, dlq refused+completed %d, dlq unasked %d, dlq twice %d, leased redelivered %d, leased lost %d, start %d",
		r.autoLost, r.autoTwice, r.autoSkipped, r.autoCursor, r.phantoms, r.refusedKept, r.dlqMissing, r.dlqText, r.dlqRefusedCompleted,
		r.dlqUnasked, r.dlqTwice, r.leasedRedelivered, r.leasedLost, r.startFailures)
	for _, p := range r.problems {
		fmt.Fprintf(&b, "\n  - %s", p)
	}
	return b.String()
}

// pk is a message's place.
type pk struct {
	partition string
	offset    uint64
}

// audit fills rep from the ledger and what the broker holds (f). Calls
// that failed after killFrom failed for the kill; requests sent after
// killSeq never reached a live broker.
func (l *dfLedger) audit(rep *dfReport, f *dfFinal, killFrom, killSeq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at := map[pk]string{} // where each message is, as far as we know
	for key, it := range l.items {
		rep.pushItems++
		for _, s := range it.sends {
			if s == answeredRefused {
				rep.pushSendsRefused++
			}
		}
		switch {
		case it.queued:
			rep.pushQueued++
			at[pk{it.partition, it.offset}] = key
		case allRefused(it.sends):
			rep.pushGivenUp++
		default:
			rep.pushUnanswered++
		}
		if it.dupAfterRefusals {
			rep.problem(&rep.refusedKept, "%s was answered duplicate although every earlier push of it was answered refused", key)
		}
	}
	kept := map[string]bool{} // keys already counted as refused yet kept
	// check looks at one delivered (or dead-lettered) message.
	check := func(where string, m client.Message, offset bool) *dfItem {
		it := l.items[m.TransactionID]
		switch {
		case it == nil:
			rep.problem(&rep.phantoms, "%s: %q was never pushed (%s offset %d)", where, m.TransactionID, m.Partition, m.Offset)
			return nil
		case !bytes.Equal(m.Payload, it.payload) || m.Partition != it.partition:
			rep.problem(&rep.phantoms, "%s: %s in %s with payload %.40q is not what was pushed", where, it.key, m.Partition, m.Payload)
		case it.queued && (m.ID != it.id || offset && m.Offset != it.offset):
			rep.problem(&rep.phantoms, "%s: %s is id %s at offset %d; its push was answered id %s at offset %d", where, it.key, m.ID, m.Offset, it.id, it.offset)
		case !it.queued && allRefused(it.sends) && !kept[it.key]:
			kept[it.key] = true
			rep.problem(&rep.refusedKept, "%s: %s is stored although every push of it (%d) was answered refused", where, it.key, len(it.sends))
		}
		if _, ok := at[pk{m.Partition, m.Offset}]; !ok && offset {
			at[pk{m.Partition, m.Offset}] = it.key
		}
		return it
	}
	for code, n := range l.pushRefusals {
		for i := 0; i < n; i++ {
			rep.refusal(code)
		}
	}
	l.auditAuto(rep, f, killFrom, killSeq, at, check)
	l.auditLeased(rep, f, check)
}

// auditAuto checks group auto: every push answered queued delivered exactly
// once, or taken by a pop the kill cut off.
func (l *dfLedger) auditAuto(rep *dfReport, f *dfFinal, killFrom, killSeq uint64, at map[pk]string, check func(string, client.Message, bool) *dfItem) {
	count := map[string]int{}
	delivered := map[pk]int{}
	type excuser struct {
		p            *dfPop
		left, slots  int
		floor        map[string]int64 // partition -> highest offset answered before p was sent
		floorCounted bool
	}
	var cut []*excuser
	for _, p := range l.autoPops {
		switch {
		case p.drain:
			rep.autoDrain += len(p.msgs)
		case p.out == answeredOK:
			rep.autoPopsOK++
			rep.autoBefore += len(p.msgs)
		case p.out == answeredRefused:
			rep.autoPopsRefused++
		case p.sent < killSeq:
			if p.answered > killFrom {
				rep.autoPopsCut++
			} else {
				rep.autoPopsEarly++
			}
			cut = append(cut, &excuser{p: p, left: p.batch, slots: p.parts})
		}
		if p.out != answeredOK {
			continue
		}
		for _, m := range p.msgs {
			check("group auto", m, true)
			count[m.TransactionID]++
			delivered[pk{m.Partition, m.Offset}]++
		}
	}
	floor := func(e *excuser, part string) int64 {
		if !e.floorCounted {
			e.floor, e.floorCounted = map[string]int64{}, true
			for _, p := range l.autoPops {
				if p.drain || p.out != answeredOK || p.answered >= e.p.sent {
					continue
				}
				for _, m := range p.msgs {
					if v, ok := e.floor[m.Partition]; !ok || int64(m.Offset) > v {
						e.floor[m.Partition] = int64(m.Offset)
					}
				}
			}
		}
		if v, ok := e.floor[part]; ok {
			return v
		}
		return -1
	}
	excused := map[pk]bool{}
	for i := 0; i < dfPartitions; i++ {
		part := fmt.Sprintf("p%d", i)
		next, low := f.next[part], f.low[part]
		if cur, ok := f.cursor[part]; next > 0 && (!ok || cur != next) {
			rep.problem(&rep.autoCursor, "group auto's cursor in %s is at %d after the drain; the partition ends at %d", part, cur, next)
		}
		for off := low; off < next; {
			if delivered[pk{part, off}] > 0 {
				off++
				continue
			}
			end := off
			for end+1 < next && delivered[pk{part, end + 1}] == 0 {
				end++
			}
			// Missing offsets off..end: excused from the bottom up.
			from := off
			for _, e := range cut {
				if from > end {
					break
				}
				if e.left == 0 || e.slots == 0 || floor(e, part) >= int64(from) {
					continue
				}
				take := min(uint64(e.left), end-from+1)
				for o := from; o < from+take; o++ {
					excused[pk{part, o}] = true
				}
				e.left -= int(take)
				e.slots--
				from += take
			}
			for o := from; o <= end; o++ {
				if key, ok := at[pk{part, o}]; !ok || !l.items[key].queued {
					rep.problem(&rep.autoSkipped, "group auto never got %s offset %d (%q, whose push was not answered queued)", part, o, key)
				}
			}
			off = end + 1
		}
	}
	for key, it := range l.items {
		n := count[key]
		switch {
		case it.queued && n == 0 && excused[pk{it.partition, it.offset}]:
			rep.autoLostAtKill++
		case it.queued && n == 0:
			rep.problem(&rep.autoLost, "%s (%s offset %d, answered queued) was never delivered to group auto", key, it.partition, it.offset)
		case n > 1:
			rep.problem(&rep.autoTwice, "%s was delivered to group auto %d times", key, n)
		}
	}
}

// auditLeased checks group leased and the dead-letter queue.
func (l *dfLedger) auditLeased(rep *dfReport, f *dfFinal, check func(string, client.Message, bool) *dfItem) {
	rep.leasedPopsRefused = l.leasedPops.refused
	finishing := func(a dfAck) bool {
		return a.status == client.Completed || a.status == client.DLQ || a.dead
	}
	for key, ds := range l.leased {
		rep.leasedDeliveries += len(ds)
		for _, d := range ds {
			check("group leased", d.m, true)
			if d.worker == "drain" {
				rep.leasedDrain++
			}
		}
	redelivered:
		for _, d := range ds {
			for _, a := range l.acks[key] {
				if a.out == answeredOK && finishing(a) && a.seq < d.seq {
					rep.problem(&rep.leasedRedelivered, "group leased got %s again (%s) after a %v ack of it was answered success", key, d.worker, a.status)
					break redelivered
				}
			}
		}
	}
	for _, acks := range l.acks {
		for _, a := range acks {
			switch {
			case a.out == noAnswer:
				rep.acksUnanswered++
			case a.status == client.Completed && a.out == answeredOK:
				rep.completedOK++
			case a.status == client.Completed:
				rep.completedRefused++
			case a.status == client.DLQ && a.out == answeredOK:
				rep.dlqOK++
			case a.status == client.DLQ:
				rep.dlqRefused++
				if a.code == protocol.CodeJournal {
					rep.dlqRefusedJournal++
				}
			}
		}
	}
	for _, acks := range l.acks {
		refused := false
		for _, a := range acks {
			if a.status == client.DLQ && a.out == answeredRefused {
				refused = true
			}
			if refused && a.status == client.Completed && a.out == answeredOK {
				rep.dlqThenCompleted++
				break
			}
		}
	}
	for key, it := range l.items {
		if !it.queued {
			continue
		}
		done := false
		for _, a := range l.acks[key] {
			if finishing(a) && a.out != answeredRefused {
				done = true
			}
		}
		if _, ok := f.drainMsg[key]; !done && !ok {
			rep.problem(&rep.leasedLost, "%s (answered queued) was neither finished by group leased (acks: %s) nor delivered to it in the drain", key, ackList(l.acks[key]))
		}
	}
	inDLQ := map[string]int{}
	for _, e := range f.dlq {
		rep.dlqEntries++
		key := e.Message.TransactionID
		if e.Message.Group != dfLeased {
			rep.problem(&rep.phantoms, "DLQ entry for %q in group %q: only group leased files dead letters", key, e.Message.Group)
		}
		if check("DLQ", e.Message, false) == nil {
			continue
		}
		inDLQ[key]++
		var asked []dfAck
		refused, completed := false, false
		for _, a := range l.acks[key] {
			switch {
			case a.status == client.DLQ && a.out != answeredRefused:
				asked = append(asked, a)
			case a.status == client.DLQ:
				refused = true
			case a.status == client.Completed && a.out == answeredOK:
				completed = true
			}
		}
		switch {
		case len(asked) == 0 && refused && completed:
			rep.problem(&rep.dlqRefusedCompleted, "DLQ entry for %s (%q), whose dlq acks were refused and which was then completed (acks: %s)", key, e.Error, ackList(l.acks[key]))
		case len(asked) == 0:
			rep.problem(&rep.dlqUnasked, "DLQ entry for %s (%q), and no dlq ack of it was taken (acks: %s)", key, e.Error, ackList(l.acks[key]))
		default:
			ok := false
			for _, a := range asked {
				ok = ok || a.text == e.Error
			}
			if !ok {
				rep.problem(&rep.dlqText, "DLQ entry for %s says %q; its dlq ack sent %q", key, e.Error, asked[0].text)
			}
		}
	}
	for key, n := range inDLQ {
		if n > 1 {
			rep.problem(&rep.dlqTwice, "%s is in the DLQ %d times", key, n)
		}
	}
	for key, acks := range l.acks {
		for _, a := range acks {
			if a.status == client.DLQ && a.out == answeredOK && inDLQ[key] == 0 {
				rep.problem(&rep.dlqMissing, "%s: a dlq ack (%q) was answered success and the DLQ has no entry for it", key, a.text)
				break
			}
		}
	}
}

// ackList describes a message's acks for a problem line.
func ackList(acks []dfAck) string {
	if len(acks) == 0 {
		return "none"
	}
	var parts []string
	for _, a := range acks {
		s := a.status.String()
		switch a.out {
		case answeredOK:
			s += " ok"
		case answeredRefused:
			s += fmt.Sprintf(" refused (%v)", a.code)
		default:
			s += " unanswered"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}
