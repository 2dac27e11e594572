package main

import (
	"container/heap"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
	"github.com/spf13/cobra"
)

func init() {
	register(pushCmd)
	register(popCmd)
	register(tailCmd)
}

// pushResultJSON is one pushed message as --json prints it.
type pushResultJSON struct {
	Status        string `json:"status"`
	MessageID     string `json:"messageId,omitempty"`
	Partition     string `json:"partition,omitempty"`
	PartitionID   string `json:"partitionId,omitempty"`
	Offset        uint64 `json:"offset"`
	TransactionID string `json:"transactionId,omitempty"`
	Error         string `json:"error,omitempty"`
}

func pushCmd(a *app) *cobra.Command {
	c := &cobra.Command{Use: "push QUEUE [PAYLOAD | -]", Short: "push a message (or, with - or no PAYLOAD, one per line of stdin)",
		Args: posArgs(1, 2, "QUEUE"),
		Example: `  regent push orders '{"order":1}' --partition customer-42 --txn order-1
  printf 'a\nb\n' | regent push orders -`}
	fs := c.Flags()
	partition := fs.String("partition", "", "partition (default: Default)")
	txn := fs.String("txn", "", "transactionId (one message only); the broker answers duplicate for a repeat")
	trace := fs.String("trace", "", "traceId")
	c.Run = a.opRun(func(o *opCmd, pos []string) int {
		item := client.Item{Queue: pos[0], Partition: *partition, TransactionID: *txn, TraceID: *trace}
		var src *lineSource
		if len(pos) == 1 || pos[1] == "-" {
			src = newLineSource(o.stdin, maxLine)
			// --txn names one message: know before pushing anything
			// whether stdin holds more than one.
			first, err := src.peek(2)
			if err != nil {
				return o.fail(err)
			}
			if first == 0 {
				return o.usageErr("nothing to push: give a PAYLOAD, or lines on stdin")
			}
			if *txn != "" && first > 1 {
				return o.usageErr("--txn names one message; stdin gave more than one line")
			}
		} else {
			src = singleLine([]byte(pos[1]))
		}
		c, err := o.dial(context.Background())
		if err != nil {
			return o.fail(err)
		}
		defer c.Close()
		return pushLines(o, c, item, src)
	})
	return c
}

// messageJSON is a delivered message as --json prints it.
type messageJSON struct {
	ID            string `json:"id"`
	TransactionID string `json:"transactionId"`
	TraceID       string `json:"traceId,omitempty"`
	Queue         string `json:"queue"`
	Partition     string `json:"partition"`
	PartitionID   string `json:"partitionId"`
	Offset        uint64 `json:"offset"`
	CreatedAt     string `json:"createdAt"`
	LeaseID       string `json:"leaseId,omitempty"`
	RetryCount    int    `json:"retryCount"`
	Payload       string `json:"payload"`
	Acked         string `json:"acked,omitempty"`
	AckError      string `json:"ackError,omitempty"`
}

func toMessageJSON(m *client.Message) messageJSON {
	j := messageJSON{ID: m.ID.String(), TransactionID: m.TransactionID, TraceID: m.TraceID, Queue: m.Queue,
		Partition: m.Partition, PartitionID: m.PartitionID.String(), Offset: m.Offset, CreatedAt: ts(m.CreatedAt),
		RetryCount: m.RetryCount, Payload: string(m.Payload)}
	if !m.LeaseID.IsZero() {
		j.LeaseID = m.LeaseID.String()
	}
	return j
}

// ackOutcomes fills out's Acked and AckError from a batch ack's results and
// counts the acks refused and the messages released. A failed or retry ack
// releases its lease at once (SEMANTICS.md): the acks after it for the rest
// of that lease are refused by the broker as lease_invalid, and those
// messages come back after the one answered, in order. That is the
// documented outcome of a batch --ack failed (or retry), not a refusal: it
// is shown as "released" and counts as success. Any other refusal counts.
func ackOutcomes(msgs []client.Message, res []client.AckResult, status client.AckStatus, out []messageJSON) (refused, released int) {
	releasedBy := map[client.ID]bool{} // leases released by an answer of this batch
	for i, r := range res {
		lease := msgs[i].LeaseID
		switch {
		case r.Err == nil:
			out[i].Acked = status.String()
			if r.LeaseReleased {
				releasedBy[lease] = true
			}
		case releasedBy[lease] && protocol.CodeOf(r.Err) == protocol.CodeLeaseInvalid:
			out[i].Acked = "released"
			released++
		default:
			out[i].Acked, out[i].AckError = "refused", r.Err.Error()
			refused++
		}
	}
	return refused, released
}

func parseAck(s string) (client.AckStatus, error) {
	switch strings.ToLower(s) {
	case "completed", "complete", "ok":
		return client.Completed, nil
	case "failed", "fail":
		return client.Failed, nil
	case "retry":
		return client.Retry, nil
	case "dlq":
		return client.DLQ, nil
	}
	return 0, fmt.Errorf("--ack %q: want completed, failed, retry or dlq", s)
}

func popCmd(a *app) *cobra.Command {
	c := &cobra.Command{Use: "pop [QUEUE | --namespace NS --task T]", Short: "pop messages (and ack them with --ack)", Args: posArgs(0, 1, "QUEUE"),
		Long: `Pop messages from QUEUE, or from any queue with the labels --namespace and --task.

Without --group, pop is in queue mode: the queue's messages are shared by
every pop in queue mode (competing consumers), and each is delivered to one
of them. Queue mode is a consumer group of its own, which queues, queue,
groups and dlq show as "(queue mode)". With --group, the group has its own
cursor and sees every message; a group comes into being with its first pop.

Without --partition, one pop fills its batch from several partitions (at
most --partitions): each partition's messages come in order, and a
partition is leased to one consumer of a group at a time. When messages
are left waiting (beyond --batch, or in partitions that other consumers
hold), pop says so on stderr.

A popped message is leased until --ack answers it, or "regent ack" with the
lease id or transactionId printed, or until its lease ends (the queue's
lease time), when it comes back. --ack answers each message of the batch
in order and exits 1 if the broker refuses one; but failed and retry
release the lease at once, so after the first of them the rest of its
lease is "released": those messages come back after it, in order (one line
says how many), which is their documented outcome and exits 0.

Popping creates no queue: a queue that does not exist has no message, and
with --wait pop waits for it to be created (by a push or configure).`,
		Example: "  regent pop orders --group billing --batch 10 --ack completed"}
	fs := c.Flags()
	partition := fs.String("partition", "", "one partition (default: any)")
	partitions := fs.Int("partitions", 0, "without --partition: take from at most this many partitions (default: as many as --batch needs)")
	namespace := fs.String("namespace", "", "without QUEUE: pop from any queue with this namespace (higher priority first)")
	task := fs.String("task", "", "without QUEUE: pop from any queue with this task")
	group := fs.String("group", "", "consumer group (default: queue mode)")
	batch := fs.Int("batch", 1, "at most this many messages")
	wait := fs.Bool("wait", false, "wait (up to --wait-time) for a message to come")
	waitTime := fs.Duration("wait-time", 30*time.Second, "long-poll timeout with --wait")
	ackStatus := fs.String("ack", "", "ack what was popped: completed, failed, retry or dlq (without it, the messages stay leased until their lease ends)")
	ackErr := fs.String("error", "", "error text kept with a failed or dlq ack")
	c.Run = a.opRun(func(o *opCmd, pos []string) int {
		stdout, stderr := o.stdout, o.stderr
		if (len(pos) == 1) == (*namespace != "" || *task != "") {
			return o.usageErr("name a QUEUE, or --namespace and/or --task (not both)")
		}
		if *batch < 1 {
			return o.usageErr("--batch must be at least 1")
		}
		if *partitions < 0 {
			return o.usageErr("--partitions must not be negative")
		}
		if *partitions == 0 {
			*partitions = *batch
		}
		var status client.AckStatus
		if *ackStatus != "" {
			var err error
			if status, err = parseAck(*ackStatus); err != nil {
				return o.usageErr("%v", err)
			}
		}
		c, err := o.dial(context.Background())
		if err != nil {
			return o.fail(err)
		}
		defer c.Close()
		var q client.QueueBuilder
		if len(pos) == 1 {
			q = c.Queue(pos[0])
		} else {
			q = c.Labels(*namespace, *task)
		}
		q = q.Partition(*partition).Group(*group).Batch(*batch).Partitions(*partitions)
		timeout := *o.timeout
		if *wait {
			q = q.Wait(true).Timeout(*waitTime)
			timeout += *waitTime
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		var b client.Batch
		if err := q.PopBatch(ctx, &b); err != nil {
			return o.fail(err)
		}
		msgs := b.Messages
		var refused, released int
		out := make([]messageJSON, len(msgs))
		for i := range msgs {
			out[i] = toMessageJSON(&msgs[i])
		}
		if status != 0 && len(msgs) > 0 {
			actx, acancel := o.ctx()
			res, err := c.Ack(actx, msgs, status, client.AckOptions{Error: *ackErr})
			acancel()
			if err != nil {
				return o.fail(err)
			}
			refused, released = ackOutcomes(msgs, res, status, out)
		}
		if b.Cut {
			// stderr, so that --json's output stays one JSON value.
			verb := "fit"
			if len(msgs) == 1 {
				verb = "fits"
			}
			fmt.Fprintf(stderr, "regent pop: %s %s one reply; more were ready (pop again for them)\n", plural(len(msgs), "message", "messages"), verb)
		}
		if len(pos) == 1 {
			ictx, icancel := o.ctx()
			tellWaiting(ictx, c, stderr, pos[0], *group, msgs)
			icancel()
		}
		if *o.json {
			if code := o.emit(out); code != exitOK || refused == 0 {
				return code
			}
			return exitFailure
		}
		if len(out) == 0 {
			fmt.Fprintln(stdout, "(no message)")
			return exitOK
		}
		var leases []string // the leases left live, in order
		for i, m := range out {
			fmt.Fprintf(stdout, "%s/%s @%d  id %s  txn %s  retries %d\n  %s\n", m.Queue, m.Partition, m.Offset, m.ID, m.TransactionID, m.RetryCount, m.Payload)
			switch {
			case m.Acked == "released":
				fmt.Fprintf(stdout, "  released (comes back after the %s one)\n", status)
			case m.AckError != "":
				fmt.Fprintf(stdout, "  ack refused: %s\n", m.AckError)
			case m.Acked != "":
				fmt.Fprintf(stdout, "  acked %s\n", m.Acked)
			default:
				fmt.Fprintf(stdout, "  lease %s until %s\n", m.LeaseID, ts(msgs[i].LeaseExpires))
				if len(leases) == 0 || leases[len(leases)-1] != m.LeaseID {
					leases = append(leases, m.LeaseID)
				}
			}
		}
		if len(leases) > 0 {
			// What answers them, ready to copy (by lease: all of it; by txn:
			// one message); until then they stay leased, and come back when
			// the lease ends.
			grp := ""
			if *group != "" {
				grp = " --group " + *group
			}
			fmt.Fprintf(stdout, "answer all:  regent ack %s %s --status completed   (or failed, retry, dlq)\n", msgs[0].Queue, strings.Join(leases, " "))
			fmt.Fprintf(stdout, "answer one:  regent ack %s TXN%s --status completed\n", msgs[0].Queue, grp)
		}
		if released > 0 {
			fmt.Fprintf(stdout, "%d released: they come back after the %s one, in order\n", released, status)
		}
		if refused > 0 {
			fmt.Fprintf(stderr, "regent pop: %s refused\n", plural(refused, "ack", "acks"))
			return exitFailure
		}
		return exitOK
	})
	return c
}

func tailCmd(a *app) *cobra.Command {
	c := &cobra.Command{Use: "tail QUEUE", Short: "follow new messages as a throwaway group", Args: posArgs(1, 1, "QUEUE"),
		Long: `Follow QUEUE's messages as they come, as a throwaway consumer group that
takes them at delivery (autoAck: other groups are not affected) and is
deleted when tail ends (Ctrl-C).

Without a flag tail starts at the end: only messages pushed from now on.
--from-start prints every message the queue holds first; --last N the N
newest (by creation time), then both follow. --last reads the queue from its
oldest message to find them, which takes a while on a queue of millions.`,
		Example: `  regent tail orders
  regent tail orders --last 20 --partition customer-42
  regent tail orders --from-start --json | jq .payload`}
	fs := c.Flags()
	partition := fs.String("partition", "", "one partition (default: all)")
	fromStart := fs.Bool("from-start", false, "print every message the queue holds first, then follow")
	last := fs.Int("last", 0, "print the N newest messages first, then follow")
	c.Run = a.opRun(func(o *opCmd, pos []string) int {
		if *fromStart && fs.Changed("last") {
			return o.usageErr("--from-start and --last exclude each other")
		}
		if fs.Changed("last") && *last < 1 {
			return o.usageErr("--last must be at least 1")
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return tail(ctx, o, pos[0], tailFrom{partition: *partition, fromStart: *fromStart, last: *last})
	})
	return c
}

// tailFrom says what tail shows before it follows.
type tailFrom struct {
	partition string
	fromStart bool // every message the queue holds
	last      int  // the newest last messages (0: none)
}

// tail follows a queue as a throwaway group that acks at delivery (from the
// end, or from the start with fromStart or last); the group is deleted when
// tail ends. Every pop waits under ctx: cancelling it (Ctrl-C) ends tail at
// once. A long poll abandoned on the broker then is answered or withdrawn
// when the group is deleted and the connection closes; what it might still
// take went to the throwaway group, which nobody else reads.
func tail(ctx context.Context, o *opCmd, queue string, from tailFrom) int {
	c, err := o.dial(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return exitOK
		}
		return o.fail(err)
	}
	defer c.Close()
	var rnd [4]byte
	rand.Read(rnd[:])
	group := "tail-" + hex.EncodeToString(rnd[:])
	lost := false // the connection broke: deleting the group waits less
	defer func() {
		wait := *o.timeout
		if lost {
			wait = min(wait, time.Second)
		}
		dctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if _, err := c.DeleteGroup(dctx, queue, group); err != nil {
			fmt.Fprintf(o.stderr, "regent tail: the throwaway group %s is left on %s (%v): regent delete group %s --queue %s --force\n",
				group, queue, err, group, queue)
		}
	}()
	if !*o.json {
		fmt.Fprintf(o.stderr, "following %s as group %s (Ctrl-C to stop)\n", queue, group)
	}
	mode := client.FromNew
	if from.fromStart || from.last > 0 {
		mode = client.FromOldest
	}
	q := c.Queue(queue).Partition(from.partition).Group(group).SubscriptionMode(mode).
		Batch(100).Partitions(16).AutoAck(true)
	show := func(m *client.Message) {
		if *o.json {
			o.emitLine(toMessageJSON(m))
		} else {
			fmt.Fprintf(o.stdout, "%s %s/%s @%d  %s\n", ts(m.CreatedAt), m.Queue, m.Partition, m.Offset, m.Payload)
		}
	}
	// failed ends tail on a pop's error: none when ctx ended (Ctrl-C).
	failed := func(err error) int {
		if ctx.Err() != nil {
			return exitOK
		}
		lost = errors.Is(err, client.ErrConnLost) || errors.Is(err, context.DeadlineExceeded)
		return o.fail(err)
	}
	if from.last > 0 {
		// Read what the queue holds, keeping the newest, then show them.
		var keep newest
		keep.n = from.last
		cq := q.Batch(1000).Partitions(64)
		for {
			pctx, cancel := context.WithTimeout(ctx, *o.timeout)
			msgs, err := cq.Pop(pctx)
			cancel()
			if err != nil {
				return failed(err)
			}
			if len(msgs) == 0 {
				break
			}
			for i := range msgs {
				keep.add(msgs[i])
			}
		}
		for _, m := range keep.sorted() {
			show(&m)
		}
	}
	const poll = 2 * time.Second
	q = q.Wait(true).Timeout(poll)
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, poll+*o.timeout)
		msgs, err := q.Pop(pctx)
		cancel()
		if err != nil {
			return failed(err)
		}
		for i := range msgs {
			show(&msgs[i])
		}
	}
	return exitOK
}

// newest keeps the n newest messages it is given (by creation time, then
// partition and offset).
type newest struct {
	n    int
	msgs []client.Message // a min-heap on older
}

func older(a, b *client.Message) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.Before(b.CreatedAt)
	}
	if a.Partition != b.Partition {
		return a.Partition < b.Partition
	}
	return a.Offset < b.Offset
}

func (k *newest) Len() int           { return len(k.msgs) }
func (k *newest) Less(i, j int) bool { return older(&k.msgs[i], &k.msgs[j]) }
func (k *newest) Swap(i, j int)      { k.msgs[i], k.msgs[j] = k.msgs[j], k.msgs[i] }
func (k *newest) Push(x any)         { k.msgs = append(k.msgs, x.(client.Message)) }
func (k *newest) Pop() any {
	m := k.msgs[len(k.msgs)-1]
	k.msgs = k.msgs[:len(k.msgs)-1]
	return m
}

func (k *newest) add(m client.Message) {
	if len(k.msgs) < k.n {
		heap.Push(k, m)
		return
	}
	if older(&k.msgs[0], &m) {
		k.msgs[0] = m
		heap.Fix(k, 0)
	}
}

// sorted returns the messages kept, oldest first.
func (k *newest) sorted() []client.Message {
	out := append([]client.Message(nil), k.msgs...)
	sort.Slice(out, func(i, j int) bool { return older(&out[i], &out[j]) })
	return out
}
