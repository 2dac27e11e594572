package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
	"github.com/spf13/cobra"
)

func init() { register(ackCmd) }

func ackCmd(a *app) *cobra.Command {
	c := &cobra.Command{Use: "ack QUEUE LEASE|TXN...", Short: "answer messages a pop left leased: by lease id or transactionId",
		Args: posArgs(2, -1, "QUEUE"),
		Long: `Answer messages that "regent pop" (without --ack) left leased, with the ids it
printed: a LEASE id answers every message of that lease not answered yet; a
TXN (a message's transactionId: for one pushed without, its id) answers that
message alone. The lease must still be live (the queue's lease time): after
it ends the messages come back, and an ack is refused.

A lease names its group; a transactionId is looked for in the live leases of
--group (default: queue mode, as pop) on every partition, or on --partition.

--status failed spends a retry and releases the lease: the rest of the lease
comes back (after the queue's retry delay); retry gives it back at once; dlq
files the message in the dead-letter queue with --error.

One line per message answered, or per id refused with the reason; exit 1
when any was refused.`,
		Example: `  regent pop orders --group billing --batch 10      # prints each message's lease and txn
  regent ack orders 0190a2c4-...-lease --status completed
  regent ack orders order-1 order-7 --group billing --status dlq --error "bad total"`}
	fs := c.Flags()
	status := fs.String("status", "", "the answer: completed, failed, retry or dlq (required)")
	errText := fs.String("error", "", "error text kept with a failed or dlq ack")
	group := fs.String("group", "", "the group of the transactionIds' leases (default: queue mode)")
	partition := fs.String("partition", "", "look for the transactionIds on this partition only")
	c.Run = a.opRun(func(o *opCmd, pos []string) int {
		if *status == "" {
			return o.usageErr("give --status completed, failed, retry or dlq")
		}
		st, err := parseAck(*status)
		if err != nil {
			return o.usageErr("%s", strings.Replace(err.Error(), "--ack", "--status", 1))
		}
		if *errText != "" && st != client.Failed && st != client.DLQ {
			return o.usageErr("--error goes with --status failed or dlq")
		}
		if fs.Changed("group") && strings.TrimSpace(*group) == "" {
			return o.usageErr("--group is empty (leave it out for queue mode)")
		}
		if fs.Changed("partition") && strings.TrimSpace(*partition) == "" {
			return o.usageErr("--partition is empty")
		}
		var ids []string
		seen := map[string]bool{}
		for _, s := range pos[1:] {
			if strings.TrimSpace(s) == "" {
				return o.usageErr("an empty LEASE or TXN")
			}
			if !seen[s] {
				seen[s] = true
				ids = append(ids, s)
			}
		}
		cl, err := o.dial(context.Background())
		if err != nil {
			return o.fail(err)
		}
		defer cl.Close()
		return ackIDs(o, cl, pos[0], ids, ackHow{status: st, err: *errText, group: *group, partition: *partition})
	})
	return c
}

// ackHow is what ack answers, and where it looks for transactionIds.
type ackHow struct {
	status           client.AckStatus
	err              string
	group, partition string
}

// ackOutcome is one line of ack's answer: a message answered, or an id
// refused.
type ackOutcome struct {
	ID            string  `json:"id"`   // the LEASE or TXN given
	Kind          string  `json:"kind"` // "lease" or "transactionId"
	Outcome       string  `json:"outcome"`
	Group         string  `json:"group,omitempty"`
	Partition     string  `json:"partition,omitempty"`
	Offset        *uint64 `json:"offset,omitempty"`
	LeaseID       string  `json:"leaseId,omitempty"`
	LeaseReleased bool    `json:"leaseReleased,omitempty"`
	DeadLettered  bool    `json:"deadLettered,omitempty"`
	Error         string  `json:"error,omitempty"`
}

// liveLease is a (partition, group) with a live lease, from queue info.
// One lease id covers every partition one pop leased.
type liveLease struct {
	partition client.PartitionInfo
	group     client.GroupCursor
}

// leaseChunk is how many offsets of a lease's partition one round answers:
// the lease's end is not in queue info, so ack answers from the group's
// cursor on, and the broker's "not in this lease" marks the end.
const leaseChunk = 1000

// leasePart is one partition of a lease being answered.
type leasePart struct {
	liveLease
	next, end uint64 // the next offset to answer; the partition's end when read
	done      bool   // its end is found, or the lease is over
	found     bool   // a message of the lease was answered (or refused) there
}

// ackTarget is one id given: a lease (its partitions) or a transactionId.
type ackTarget struct {
	id       string
	parts    []*leasePart // a lease; nil: a transactionId
	outcomes []ackOutcome
	refusal  string // a transactionId refused in a lease that holds it
}

// ackIDs answers ids (lease ids and transactionIds) on queue.
func ackIDs(o *opCmd, cl *client.Client, queue string, ids []string, how ackHow) int {
	ctx, cancel := o.ctx()
	defer cancel()
	qi, err := cl.QueueInfo(ctx, queue)
	if err != nil {
		return o.fail(err)
	}
	wantGroup := how.group
	if wantGroup == "" {
		wantGroup = queueModeGroup
	}
	byLease := map[client.ID][]liveLease{}
	var txnPlaces []liveLease // the live leases a transactionId may be in
	partSeen := how.partition == ""
	for _, p := range qi.Partitions {
		if how.partition != "" && p.Name != how.partition {
			continue
		}
		partSeen = true
		for _, g := range p.Groups {
			if !g.Leased || g.LeaseID.IsZero() {
				continue
			}
			byLease[g.LeaseID] = append(byLease[g.LeaseID], liveLease{p, g})
			if g.Group == wantGroup {
				txnPlaces = append(txnPlaces, liveLease{p, g})
			}
		}
	}
	if !partSeen {
		return o.fail(fmt.Errorf("queue %s has no partition %q", queue, how.partition))
	}
	targets := make([]*ackTarget, len(ids))
	for i, s := range ids {
		tg := &ackTarget{id: s}
		if u, err := client.ParseID(s); err == nil {
			for _, l := range byLease[u] {
				tg.parts = append(tg.parts, &leasePart{liveLease: l, next: l.group.Cursor, end: l.group.Cursor + l.group.Lag})
			}
		}
		targets[i] = tg
	}
	status := how.status.String()
	answered := func(id, kind string, l liveLease, r client.AckResult) ackOutcome {
		off := r.Offset
		return ackOutcome{ID: id, Kind: kind, Outcome: status, Group: l.group.Group, Partition: l.partition.Name, Offset: &off,
			LeaseID: l.group.LeaseID.String(), LeaseReleased: r.LeaseReleased, DeadLettered: r.DeadLettered}
	}

	// Rounds: every transactionId and the first offsets of every lease in
	// the first; the rest of a lease longer than leaseChunk after.
	for round := 0; ; round++ {
		var acks []client.Ack
		type slot struct {
			tg    *ackTarget
			part  *leasePart // a lease's
			place liveLease  // a transactionId's
		}
		var slots []slot
		for _, tg := range targets {
			for _, lp := range tg.parts {
				for off := lp.next; !lp.done && off < lp.end && off < lp.next+leaseChunk; off++ {
					m := client.Message{PartitionID: lp.partition.ID, Offset: off, LeaseID: lp.group.LeaseID, Group: lp.group.Group}
					acks = append(acks, client.Ack{Message: m, Status: how.status, Error: how.err})
					slots = append(slots, slot{tg: tg, part: lp})
				}
			}
			if tg.parts == nil && round == 0 {
				for _, l := range txnPlaces {
					m := client.Message{PartitionID: l.partition.ID, LeaseID: l.group.LeaseID, Group: l.group.Group, TransactionID: tg.id}
					acks = append(acks, client.Ack{Message: m, Status: how.status, Error: how.err, ByTransactionID: true})
					slots = append(slots, slot{tg: tg, place: l})
				}
			}
		}
		if len(acks) == 0 {
			break
		}
		res, err := ackInRequests(ctx, cl, acks)
		if err != nil {
			return o.fail(err)
		}
		for i, r := range res {
			tg, lp := slots[i].tg, slots[i].part
			if lp == nil { // a transactionId
				l := slots[i].place
				switch {
				case r.Err == nil:
					tg.outcomes = append(tg.outcomes, answered(tg.id, "transactionId", l, r))
				case tg.refusal != "" || protocol.CodeOf(r.Err) == protocol.CodeNotInFlight:
				case protocol.CodeOf(r.Err) == protocol.CodeLeaseInvalid:
					// An answer before this one released or ended that
					// lease: whether it held the message is not known.
					tg.refusal = fmt.Sprintf("%s's lease %s on partition %s ended or was released by an answer before this one (its messages not answered come back)",
						groupPhrase(l.group.Group), l.group.LeaseID, l.partition.Name)
				default:
					tg.refusal = r.Err.Error() // in that lease, but refused: answered otherwise
				}
				continue
			}
			if lp.done {
				continue // past the lease's end, or after it was released
			}
			off := acks[i].Message.Offset
			lp.next = off + 1
			switch {
			case r.Err == nil:
				lp.found = true
				tg.outcomes = append(tg.outcomes, answered(tg.id, "lease", lp.liveLease, r))
				lp.done = r.LeaseReleased // over on this partition: the rest comes back, or is past its end
			case protocol.CodeOf(r.Err) == protocol.CodeNotInFlight && lp.found:
				lp.done = true // past the lease's end on this partition
			case protocol.CodeOf(r.Err) == protocol.CodeNotInFlight:
				// Before the lease's start (the cursor is behind it).
			default:
				lp.found = true
				tg.outcomes = append(tg.outcomes, ackOutcome{ID: tg.id, Kind: "lease", Outcome: "refused", Group: lp.group.Group,
					Partition: lp.partition.Name, Offset: &off, LeaseID: tg.id, Error: r.Err.Error()})
				// The lease is gone (ended, or released by another
				// answer): the rest of it is refused alike.
				lp.done = protocol.CodeOf(r.Err) == protocol.CodeLeaseInvalid
			}
		}
		for _, tg := range targets {
			for _, lp := range tg.parts {
				lp.done = lp.done || lp.next >= lp.end
			}
		}
	}
	var outcomes []ackOutcome
	refused := 0
	for _, tg := range targets {
		for _, r := range tg.outcomes {
			if r.Outcome == "refused" {
				refused++
			}
		}
		if len(tg.outcomes) > 0 {
			outcomes = append(outcomes, tg.outcomes...)
			continue
		}
		kind := "transactionId"
		why := tg.refusal
		if tg.parts != nil {
			kind, why = "lease", "no message of the lease was found from its group's cursor on"
		} else if why == "" {
			where := "any partition"
			if how.partition != "" {
				where = "partition " + how.partition
			}
			why = fmt.Sprintf("no live lease of %s on %s of %s holds it", groupPhrase(wantGroup), where, queue)
			if _, err := client.ParseID(tg.id); err == nil {
				why = fmt.Sprintf("not a live lease of %s, and %s as a transactionId (a lease ends when all its messages are answered, when it expires, or on a failed or retry answer)", queue, why)
			}
		}
		outcomes = append(outcomes, ackOutcome{ID: tg.id, Kind: kind, Outcome: "refused", Error: why})
		refused++
	}
	if *o.json {
		if outcomes == nil {
			outcomes = []ackOutcome{}
		}
		if code := o.emit(outcomes); code != exitOK {
			return code
		}
	} else {
		for _, r := range outcomes {
			printAckOutcome(o, queue, &r, how.status)
		}
	}
	if refused > 0 {
		return exitFailure
	}
	return exitOK
}

// queueModeGroup is the group of pops without one (the engine's name).
const queueModeGroup = "__QUEUE_MODE__"

func printAckOutcome(o *opCmd, queue string, r *ackOutcome, st client.AckStatus) {
	if r.Outcome == "refused" {
		where := ""
		if r.Offset != nil {
			where = fmt.Sprintf(" (%s/%s @%d)", queue, r.Partition, *r.Offset)
		}
		fmt.Fprintf(o.stdout, "%-9s %s%s: %s\n", "refused", r.ID, where, r.Error)
		return
	}
	var notes []string
	if r.Group != queueModeGroup {
		notes = append(notes, "group "+r.Group)
	}
	switch {
	case r.DeadLettered:
		notes = append(notes, "dead-lettered")
	case st == client.Failed:
		notes = append(notes, "comes back after the retry delay")
	case st == client.Retry:
		notes = append(notes, "comes back now")
	}
	if r.LeaseReleased && (st == client.Failed || st == client.Retry) {
		notes = append(notes, "lease released: its other messages not answered come back")
	} else if r.LeaseReleased {
		notes = append(notes, "lease ended")
	}
	txn := ""
	if r.Kind == "transactionId" {
		txn = "  txn " + r.ID
	}
	note := ""
	if len(notes) > 0 {
		note = "  (" + strings.Join(notes, "; ") + ")"
	}
	fmt.Fprintf(o.stdout, "%-9s %s/%s @%d%s%s\n", r.Outcome, queue, r.Partition, *r.Offset, txn, note)
}

// ackInRequests sends acks in requests of a bounded size (each item's error
// text counts), in order, and returns the results in order.
func ackInRequests(ctx context.Context, cl *client.Client, acks []client.Ack) ([]client.AckResult, error) {
	const maxItems, maxBytes = 5000, 1 << 20
	var out []client.AckResult
	for start := 0; start < len(acks); {
		end, bytes := start, 0
		for end < len(acks) && end-start < maxItems && (end == start || bytes+ackBytes(&acks[end]) <= maxBytes) {
			bytes += ackBytes(&acks[end])
			end++
		}
		res, err := cl.AckEach(ctx, acks[start:end]...)
		if err != nil {
			return nil, err
		}
		out = append(out, res...)
		start = end
	}
	return out, nil
}

// ackBytes bounds an ack item's size on the wire.
func ackBytes(a *client.Ack) int {
	return 80 + len(a.Error) + len(a.Message.TransactionID) + len(a.Message.Group)
}
