package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func init() {
	register(queuesCmd)
	register(queueCmd)
	register(configureCmd)
	register(dlqCmd)
	register(groupsCmd)
	register(seekCmd)
	register(statsCmd)
}

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

func queuesCmd(a *app) *cobra.Command {
	c := &cobra.Command{Use: "queues", Short: "list the queues", Args: posArgs(0, 0)}
	c.Run = a.opRun(func(o *opCmd, _ []string) int {
		return queues(o)
	})
	return c
}

func queues(o *opCmd) int {
	stdout := o.stdout
	c, err := o.dial(context.Background())
	if err != nil {
		return o.fail(err)
	}
	defer c.Close()
	ctx, cancel := o.ctx()
	defer cancel()
	qs, err := c.Queues(ctx)
	if err != nil {
		return o.fail(err)
	}
	qs = slices.DeleteFunc(qs, func(q client.QueueSummary) bool { return internalQueue(q.Name) })
	if *o.json {
		out := make([]map[string]any, len(qs))
		for i, q := range qs {
			out[i] = map[string]any{"name": q.Name, "id": client.ID(q.ID).String(), "partitions": q.PartitionCount,
				"messages": q.Messages, "groups": nonNil(groupLabels(q.Groups)), "deadLetters": q.DeadLetters, "namespace": q.Options.Namespace, "task": q.Options.Task}
		}
		return o.emit(out)
	}
	w := table(stdout)
	fmt.Fprintln(w, "QUEUE\tPARTITIONS\tMESSAGES\tDLQ\tGROUPS")
	for _, q := range qs {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%s\n", q.Name, q.PartitionCount, q.Messages, q.DeadLetters, strings.Join(groupLabels(q.Groups), ","))
	}
	w.Flush()
	return exitOK
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func queueCmd(a *app) *cobra.Command {
	c := &cobra.Command{Use: "queue QUEUE", Short: "a queue's options, partitions, depth, groups and their lag", Args: posArgs(1, 1, "QUEUE")}
	c.Run = a.opRun(queue)
	return c
}

func queue(o *opCmd, pos []string) int {
	stdout, stderr := o.stdout, o.stderr
	c, err := o.dial(context.Background())
	if err != nil {
		return o.fail(err)
	}
	defer c.Close()
	ctx, cancel := o.ctx()
	defer cancel()
	// The partitions come a page at a time (printed as they come); the
	// summary is the first page's.
	var parts []map[string]any
	var w *tabwriter.Writer
	var after client.ID
	var damaged []client.PartitionInfo // this page's partitions that lost offsets
	for page := 0; ; page++ {
		qi, more, err := c.QueueInfoPage(ctx, pos[0], after, client.MaxPage)
		if err != nil {
			return o.fail(err)
		}
		if page == 0 && !*o.json {
			fmt.Fprintf(stdout, "queue %s: %s in %s, %s\n", qi.Name, plural(qi.Messages, "message", "messages"),
				plural(qi.PartitionCount, "partition", "partitions"), plural(qi.DeadLetters, "dead letter", "dead letters"))
			fmt.Fprintf(stdout, "options: %s\n\n", optionsText(&qi.Options))
			w = table(stdout)
			fmt.Fprintln(w, "PARTITION\tMESSAGES\tGROUP\tCURSOR\tLAG\tLEASED")
		}
		for _, p := range qi.Partitions {
			if *o.json {
				groups := make([]map[string]any, len(p.Groups))
				for k, g := range p.Groups {
					groups[k] = map[string]any{"group": groupLabel(g.Group), "cursor": g.Cursor, "lag": g.Lag, "leased": g.Leased}
				}
				part := map[string]any{"name": p.Name, "id": client.ID(p.ID).String(), "low": p.Low, "next": p.Next, "groups": groups}
				if len(p.Lost) > 0 {
					lost := make([]map[string]uint64, len(p.Lost))
					for k, r := range p.Lost {
						lost[k] = map[string]uint64{"first": r.First, "last": r.Last}
					}
					part["lostOffsets"] = lost
				}
				parts = append(parts, part)
				continue
			}
			if len(p.Lost) > 0 {
				damaged = append(damaged, p)
			}
			held := p.Next - p.Low
			for _, r := range p.Lost {
				held -= r.Last - r.First + 1
			}
			if len(p.Groups) == 0 {
				fmt.Fprintf(w, "%s\t%d\t-\t-\t-\t-\n", p.Name, held)
			}
			for _, g := range p.Groups {
				fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%d\t%v\n", p.Name, held, groupLabel(g.Group), g.Cursor, g.Lag, g.Leased)
			}
		}
		if *o.json && (!more || len(qi.Partitions) == 0) {
			if parts == nil {
				parts = []map[string]any{}
			}
			return o.emit(map[string]any{"name": qi.Name, "messages": qi.Messages, "deadLetters": qi.DeadLetters,
				"groups": nonNil(groupLabels(qi.Groups)), "options": optionsJSON(&qi.Options), "partitions": parts})
		}
		if w != nil {
			w.Flush() // a page's rows are aligned among themselves
		}
		for _, p := range damaged {
			rs := make([]string, len(p.Lost))
			for k, r := range p.Lost {
				rs[k] = fmt.Sprint(r.First)
				if r.Last != r.First {
					rs[k] += fmt.Sprintf("-%d", r.Last)
				}
			}
			fmt.Fprintf(stdout, "partition %s: offsets %s LOST to journal damage (a salvaged start); consumers pass over them\n", p.Name, strings.Join(rs, ","))
		}
		damaged = damaged[:0]
		if !more || len(qi.Partitions) == 0 {
			if qi.PartitionCount > len(qi.Partitions) && page == 0 && !more {
				fmt.Fprintf(stderr, "regent: the broker listed %d of %d partitions (it does not page: protocol 1.1)\n", len(qi.Partitions), qi.PartitionCount)
			}
			return exitOK
		}
		after = client.ID(qi.Partitions[len(qi.Partitions)-1].ID)
	}
}

// optionsText writes a queue's options as configure's flags name them,
// each duration with its unit (lease-time=5m0s retry-delay=2s), the
// options left at zero or off only when they mean something there.
func optionsText(o *client.QueueOptions) string {
	secs := func(n int64) time.Duration { return time.Duration(n) * time.Second }
	kv := []string{
		"lease-time=" + o.LeaseTime.String(),
		fmt.Sprintf("retry-limit=%d", o.RetryLimit),
		"retry-delay=" + o.RetryDelay.String(),
	}
	add := func(on bool, k string, v any) {
		if on {
			kv = append(kv, fmt.Sprintf("%s=%v", k, v))
		}
	}
	add(o.DelayedProcessing > 0, "delayed-processing", o.DelayedProcessing)
	add(o.WindowBuffer > 0, "window-buffer", o.WindowBuffer)
	add(o.MaxSize > 0, "max-size", o.MaxSize)
	add(o.TTL > 0, "ttl", o.TTL)
	add(o.RetentionEnabled && o.RetentionSeconds > 0, "retention", secs(o.RetentionSeconds))
	add(o.RetentionEnabled && o.CompletedRetentionSeconds > 0, "completed-retention", secs(o.CompletedRetentionSeconds))
	add(o.MaxWaitTimeSeconds > 0, "max-wait-time", secs(o.MaxWaitTimeSeconds))
	add(o.Priority != 0, "priority", o.Priority)
	add(o.EncryptionEnabled, "encryption", true)
	add(o.MaxPartitions > 0, "max-partitions", o.MaxPartitions)
	add(o.Namespace != "", "namespace", o.Namespace)
	add(o.Task != "", "task", o.Task)
	return strings.Join(kv, " ")
}

// optionsJSON names a queue's options as Queen does (seconds and ms).
func optionsJSON(o *client.QueueOptions) map[string]any {
	return map[string]any{
		"leaseTime": int64(o.LeaseTime / time.Second), "retryLimit": o.RetryLimit, "retryDelay": o.RetryDelay.Milliseconds(),
		"delayedProcessing": int64(o.DelayedProcessing / time.Second), "windowBuffer": int64(o.WindowBuffer / time.Second),
		"maxSize": o.MaxSize, "ttl": int64(o.TTL / time.Second), "retentionEnabled": o.RetentionEnabled,
		"retentionSeconds": o.RetentionSeconds, "completedRetentionSeconds": o.CompletedRetentionSeconds,
		"maxWaitTimeSeconds": o.MaxWaitTimeSeconds, "priority": o.Priority, "encryptionEnabled": o.EncryptionEnabled,
		"maxPartitions": o.MaxPartitions, "namespace": o.Namespace, "task": o.Task,
	}
}

func configureCmd(a *app) *cobra.Command {
	c := &cobra.Command{Use: "configure QUEUE", Short: "create a queue, or change the options given (--reset: the others to defaults)",
		Args: posArgs(1, 1, "QUEUE"),
		Long: `Create QUEUE with the options given (the others at their defaults), or change
the options given of an existing queue and keep the others: the broker
changes them in one step, so a change of other options made meanwhile (by
another configure) stays. With --reset the options not given go back to
their defaults.`,
		Example: `  regent configure orders --lease-time 30s --retry-limit 5 --retry-delay 2s
  regent configure orders --retry-limit 1            # the lease time and retry delay stay
  regent configure orders --retry-limit 1 --reset    # the others back to their defaults`}
	fs := c.Flags()
	d := client.DefaultQueueOptions()
	var v client.QueueOptions // the flags' values; only those given are applied
	fs.DurationVar(&v.LeaseTime, "lease-time", d.LeaseTime, "how long a pop's lease lives")
	fs.IntVar(&v.RetryLimit, "retry-limit", d.RetryLimit, "failed acks a message survives before the dead-letter queue")
	fs.DurationVar(&v.RetryDelay, "retry-delay", d.RetryDelay, "wait before a failed message comes back")
	fs.DurationVar(&v.DelayedProcessing, "delayed-processing", 0, "a message becomes deliverable that long after it was pushed")
	fs.DurationVar(&v.WindowBuffer, "window-buffer", 0, "serve a partition only once its newest message is that old")
	fs.Int64Var(&v.MaxSize, "max-size", 0, "messages the queue may hold for its slowest group (0: unlimited)")
	fs.DurationVar(&v.TTL, "ttl", d.TTL, "Queen's ttl option (kept and echoed)")
	// Queen keeps these three in whole seconds; the flags are durations.
	var retention, completedRetention, maxWait time.Duration
	fs.DurationVar(&retention, "retention", 0, "remove messages older than this, e.g. 24h (0: off, unless --completed-retention)")
	fs.DurationVar(&completedRetention, "completed-retention", 0, "remove messages every group passed, once this old (0: off)")
	fs.DurationVar(&maxWait, "max-wait-time", 0, "evict messages nobody consumed within this time (0: never)")
	fs.IntVar(&v.Priority, "priority", 0, "higher is served first by pops by namespace/task")
	fs.BoolVar(&v.EncryptionEnabled, "encryption", false, "seal payloads at rest (the broker needs --encryption-key)")
	fs.IntVar(&v.MaxPartitions, "max-partitions", 0, "partitions the queue may have (0: unlimited)")
	fs.StringVar(&v.Namespace, "namespace", "", "namespace label")
	fs.StringVar(&v.Task, "task", "", "task label")
	reset := fs.Bool("reset", false, "set the options not given back to their defaults (without it they are kept)")
	// apply copies one flag's value into the options to write, and names
	// the options it sets.
	type option struct {
		set  client.OptionSet
		copy func(o *client.QueueOptions)
	}
	// --retention or --completed-retention above 0 turns retention on
	// (Queen's retentionEnabled); one of them at 0 leaves that switch as it
	// is, for the other may use it (with both at 0 nothing is removed), and
	// both given at 0 turn it off.
	retain := func(o *client.QueueOptions, secs int64, field *int64) client.OptionSet {
		*field = secs
		if secs > 0 {
			o.RetentionEnabled = true
			return client.SetRetentionEnabled
		}
		return 0
	}
	apply := map[string]option{
		"lease-time":         {client.SetLeaseTime, func(o *client.QueueOptions) { o.LeaseTime = v.LeaseTime }},
		"retry-limit":        {client.SetRetryLimit, func(o *client.QueueOptions) { o.RetryLimit = v.RetryLimit }},
		"retry-delay":        {client.SetRetryDelay, func(o *client.QueueOptions) { o.RetryDelay = v.RetryDelay }},
		"delayed-processing": {client.SetDelayedProcessing, func(o *client.QueueOptions) { o.DelayedProcessing = v.DelayedProcessing }},
		"window-buffer":      {client.SetWindowBuffer, func(o *client.QueueOptions) { o.WindowBuffer = v.WindowBuffer }},
		"max-size":           {client.SetMaxSize, func(o *client.QueueOptions) { o.MaxSize = v.MaxSize }},
		"ttl":                {client.SetTTL, func(o *client.QueueOptions) { o.TTL = v.TTL }},
		"max-wait-time":      {client.SetMaxWaitTimeSeconds, func(o *client.QueueOptions) { o.MaxWaitTimeSeconds = int64(maxWait / time.Second) }},
		"priority":           {client.SetPriority, func(o *client.QueueOptions) { o.Priority = v.Priority }},
		"encryption":         {client.SetEncryptionEnabled, func(o *client.QueueOptions) { o.EncryptionEnabled = v.EncryptionEnabled }},
		"max-partitions":     {client.SetMaxPartitions, func(o *client.QueueOptions) { o.MaxPartitions = v.MaxPartitions }},
		"namespace":          {client.SetNamespace, func(o *client.QueueOptions) { o.Namespace = v.Namespace }},
		"task":               {client.SetTask, func(o *client.QueueOptions) { o.Task = v.Task }},
	}
	var retentionSet client.OptionSet // the switch, when a retention flag turns it on
	apply["retention"] = option{client.SetRetentionSeconds, func(o *client.QueueOptions) {
		retentionSet |= retain(o, int64(retention/time.Second), &o.RetentionSeconds)
	}}
	apply["completed-retention"] = option{client.SetCompletedRetentionSeconds, func(o *client.QueueOptions) {
		retentionSet |= retain(o, int64(completedRetention/time.Second), &o.CompletedRetentionSeconds)
	}}
	c.Run = a.opRun(func(o *opCmd, pos []string) int {
		for name, d := range map[string]time.Duration{"retention": retention, "completed-retention": completedRetention, "max-wait-time": maxWait} {
			if d < 0 || d%time.Second != 0 {
				return o.usageErr("--%s %v: want whole seconds, 0 or more (such as 90s or 24h)", name, d)
			}
		}
		cl, err := o.dial(context.Background())
		if err != nil {
			return o.fail(err)
		}
		defer cl.Close()
		ctx, cancel := o.ctx()
		defer cancel()
		// The flags given, over the defaults. Without --reset the broker
		// changes only the options they set and keeps the others, read and
		// written in one step (no other client's change is undone).
		opts := client.DefaultQueueOptions()
		var set client.OptionSet
		fs.Visit(func(f *pflag.Flag) {
			if op, ok := apply[f.Name]; ok {
				op.copy(&opts)
				set |= op.set
			}
		})
		set |= retentionSet
		if fs.Changed("retention") && fs.Changed("completed-retention") && retention == 0 && completedRetention == 0 {
			opts.RetentionEnabled, set = false, set|client.SetRetentionEnabled // both off: the switch too
		}
		var res client.QueueConfig
		if *reset {
			res, err = cl.Configure(ctx, pos[0], opts)
		} else {
			res, err = cl.UpdateQueue(ctx, pos[0], opts, set)
		}
		if err != nil {
			return o.fail(err)
		}
		if *o.json {
			return o.emit(map[string]any{"queue": pos[0], "created": res.Created, "queueId": res.QueueID.String(),
				"partitionId": res.DefaultPartitionID.String(), "options": optionsJSON(&res.Options)})
		}
		verb := "configured"
		if res.Created {
			verb = "created"
		}
		fmt.Fprintf(o.stdout, "%s %s: lease %s, %s %s apart\n", verb, pos[0], res.Options.LeaseTime,
			plural(res.Options.RetryLimit, "retry", "retries"), res.Options.RetryDelay)
		return exitOK
	})
	return c
}

// plural is "1 retry", "2 retries", "0 retries".
func plural[N ~int | ~int32 | ~int64 | ~uint32 | ~uint64](n N, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

func dlqCmd(a *app) *cobra.Command {
	c := &cobra.Command{Use: "dlq QUEUE [ENTRY...]", Short: "list the dead-letter queue, with each entry's id (--redrive, --purge)",
		Args: posArgs(1, -1, "QUEUE"),
		Long: `List QUEUE's dead-letter entries, each with its ENTRY id, group, partition,
retries, error and payload (--group, --partition and --limit select).

--redrive puts entries back at the end of their partitions as new messages;
--purge drops them for good (on a terminal it asks first; without one it
needs --force). Both act on the ENTRY ids given after QUEUE, or, without
any, on every entry --group and --partition select.`,
		Example: `  regent dlq orders
  regent dlq orders --redrive 01a2...e7 01a2...f0     # these two entries
  regent dlq orders --redrive --group billing          # all of billing's
  regent dlq orders --purge --force                    # all, from a script`}
	fs := c.Flags()
	group := fs.String("group", "", "only this consumer group's entries")
	partition := fs.String("partition", "", "only this partition's entries")
	limit := fs.Int("limit", 100, "entries to list")
	redrive := fs.Bool("redrive", false, "put the entries (the ENTRY ids given, or all that match) back at the end of their partitions")
	purge := fs.Bool("purge", false, "drop the entries (the ENTRY ids given, or all that match) for good")
	force := fs.Bool("force", false, "with --purge: do not ask (needed when stdin is not a terminal)")
	c.Run = a.opRun(func(o *opCmd, pos []string) int {
		stdout := o.stdout
		queue := pos[0]
		if *redrive && *purge {
			return o.usageErr("--redrive and --purge exclude each other")
		}
		var ids []client.ID
		seen := map[client.ID]bool{}
		for _, s := range pos[1:] {
			id, err := client.ParseID(s)
			if err != nil {
				return o.usageErr("ENTRY %q is not an entry id (the ENTRY column of regent dlq %s)", s, queue)
			}
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		if len(ids) > 0 && !*redrive && !*purge {
			return o.usageErr("ENTRY ids go with --redrive or --purge")
		}
		if *force && !*purge {
			return o.usageErr("--force goes with --purge")
		}
		if *purge && !*force && !isTerminal(o.stdin) {
			return o.confirm(false, "", "")
		}
		c, err := o.dial(context.Background())
		if err != nil {
			return o.fail(err)
		}
		defer c.Close()
		ctx, cancel := o.ctx()
		defer cancel()
		// The broker filters by queue (a queue it does not know has no
		// entries); a queue that does not exist is a mistake here, as for
		// regent queue.
		if _, _, err := c.QueueInfoPage(ctx, queue, client.ID{}, 1); err != nil {
			return o.fail(err)
		}
		f := client.DLQFilter{Queue: queue, Group: *group, Partition: *partition, Limit: *limit}
		switch {
		case *redrive:
			red, err := c.Redrive(ctx, f, ids...)
			if err != nil {
				return o.fail(err)
			}
			if *o.json {
				out := make([]map[string]any, len(red))
				for i, r := range red {
					out[i] = map[string]any{"entryId": r.Entry.String(), "messageId": r.MessageID.String(), "partition": r.Partition}
				}
				if code := o.emit(map[string]any{"redriven": len(red), "messages": out}); code != exitOK {
					return code
				}
			} else {
				fmt.Fprintf(stdout, "redriven %s\n", plural(len(red), "entry", "entries"))
				for _, r := range red {
					fmt.Fprintf(stdout, "  %s -> %s/%s  message %s\n", r.Entry, queue, r.Partition, r.MessageID)
				}
			}
			if missing := missingIDs(ids, red); len(missing) > 0 {
				return o.fail(fmt.Errorf("not in the dead-letter queue of %s%s: %s", queue, dlqSelected(*group, *partition), strings.Join(missing, " ")))
			}
			return exitOK
		case *purge:
			what := fmt.Sprintf("%s of %s", plural(len(ids), "dead letter", "dead letters"), queue)
			if len(ids) == 0 && !*force {
				cf := f
				cf.Limit = 1
				_, total, err := c.DLQ(ctx, cf)
				if err != nil {
					return o.fail(err)
				}
				if total == 0 {
					fmt.Fprintf(stdout, "purged 0 entries\n") // nothing to ask about
					return exitOK
				}
				what = fmt.Sprintf("all %s of %s%s", plural(total, "dead letter", "dead letters"), queue, dlqSelected(*group, *partition))
			}
			if code := o.confirm(*force, fmt.Sprintf("Purge %s, for good? [y/N] ", what), ""); code != exitOK {
				return code
			}
			pctx, pcancel := o.ctx() // the answer may have taken a while
			defer pcancel()
			n, err := c.PurgeDLQ(pctx, f, ids...)
			if err != nil {
				return o.fail(err)
			}
			if *o.json {
				if code := o.emit(map[string]any{"purged": n}); code != exitOK {
					return code
				}
			} else {
				fmt.Fprintf(stdout, "purged %s\n", plural(n, "entry", "entries"))
			}
			if len(ids) > 0 && n < len(ids) {
				return o.fail(fmt.Errorf("%d of the %d ENTRY ids given were not in the dead-letter queue of %s%s", len(ids)-n, len(ids), queue, dlqSelected(*group, *partition)))
			}
			return exitOK
		}
		// A page may come back shorter than asked (the broker fills one reply
		// at most): read on until --limit entries or the end.
		var entries []client.DLQEntry
		total := 0
		for {
			f.Offset, f.Limit = len(entries), *limit-len(entries)
			page, n, err := c.DLQ(ctx, f)
			if err != nil {
				return o.fail(err)
			}
			entries, total = append(entries, page...), n
			if len(page) == 0 || len(entries) >= *limit || len(entries) >= total {
				break
			}
		}
		if *o.json {
			out := make([]map[string]any, len(entries))
			for i, e := range entries {
				out[i] = map[string]any{"entryId": e.ID.String(), "message": toMessageJSON(&e.Message), "group": groupLabel(e.Message.Group),
					"error": e.Error, "retryCount": e.RetryCount, "failedAt": ts(e.FailedAt)}
			}
			return o.emit(map[string]any{"total": total, "entries": out})
		}
		fmt.Fprintf(stdout, "%s in %s", plural(total, "dead letter", "dead letters"), pos[0])
		if len(entries) < total {
			fmt.Fprintf(stdout, ", showing %d of %d (--limit)", len(entries), total)
		}
		fmt.Fprintln(stdout)
		w := table(stdout)
		fmt.Fprintln(w, "ENTRY\tFAILED AT\tGROUP\tPARTITION\tRETRIES\tERROR\tPAYLOAD")
		for _, e := range entries {
			pl := string(e.Message.Payload)
			if len(pl) > 60 {
				pl = pl[:57] + "..."
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", e.ID, ts(e.FailedAt), groupLabel(e.Message.Group), e.Message.Partition, e.RetryCount, e.Error, pl)
		}
		w.Flush()
		return exitOK
	})
	return c
}

// missingIDs are the ids that were not redriven.
func missingIDs(ids []client.ID, red []client.Redriven) []string {
	done := map[client.ID]bool{}
	for _, r := range red {
		done[r.Entry] = true
	}
	var out []string
	for _, id := range ids {
		if !done[id] {
			out = append(out, id.String())
		}
	}
	return out
}

// dlqSelected names the --group and --partition given, for messages.
func dlqSelected(group, partition string) string {
	s := ""
	if group != "" {
		s += " (group " + group
	}
	if partition != "" {
		if s == "" {
			s += " (partition " + partition
		} else {
			s += ", partition " + partition
		}
	}
	if s != "" {
		s += ")"
	}
	return s
}

func groupsCmd(a *app) *cobra.Command {
	c := &cobra.Command{Use: "groups [QUEUE]", Short: "list the consumer groups with their lag (of every queue, or of QUEUE)",
		Args: posArgs(0, 1, "QUEUE")}
	c.Run = a.opRun(func(o *opCmd, pos []string) int {
		queue := ""
		if len(pos) == 1 {
			queue = pos[0]
		}
		return groups(o, queue)
	})
	return c
}

// groups lists the consumer groups of every queue, or of queue.
func groups(o *opCmd, queue string) int {
	stdout := o.stdout
	c, err := o.dial(context.Background())
	if err != nil {
		return o.fail(err)
	}
	defer c.Close()
	ctx, cancel := o.ctx()
	defer cancel()
	var qs []client.QueueSummary
	if queue == "" {
		if qs, err = c.Queues(ctx); err != nil {
			return o.fail(err)
		}
	} else {
		qi, _, err := c.QueueInfoPage(ctx, queue, client.ID{}, 1)
		if protocol.CodeOf(err) == protocol.CodeQueueNotFound {
			return o.fail(fmt.Errorf("no queue %q", queue))
		}
		if err != nil {
			return o.fail(err)
		}
		qs = []client.QueueSummary{qi.QueueSummary}
	}
	type row struct {
		Group      string `json:"group"`
		Queue      string `json:"queue"`
		Partitions int    `json:"partitions"`
		Lag        uint64 `json:"lag"`
		Leased     int    `json:"leased"`
	}
	var rows []row
	for _, q := range qs {
		if len(q.Groups) == 0 || internalQueue(q.Name) {
			continue
		}
		by := map[string]*row{}
		for _, g := range q.Groups {
			by[g] = &row{Group: g, Queue: q.Name}
		}
		var after client.ID
		for {
			qi, more, err := c.QueueInfoPage(ctx, q.Name, after, client.MaxPage)
			if err != nil {
				return o.fail(err)
			}
			for _, p := range qi.Partitions {
				for _, g := range p.Groups {
					r := by[g.Group]
					if r == nil {
						continue
					}
					r.Partitions++
					r.Lag += g.Lag
					if g.Leased {
						r.Leased++
					}
				}
			}
			if !more || len(qi.Partitions) == 0 {
				break
			}
			after = client.ID(qi.Partitions[len(qi.Partitions)-1].ID)
		}
		for _, g := range q.Groups {
			r := *by[g]
			r.Group = groupLabel(r.Group)
			rows = append(rows, r)
		}
	}
	if *o.json {
		if rows == nil {
			rows = []row{}
		}
		return o.emit(rows)
	}
	if len(rows) == 0 {
		if queue != "" {
			fmt.Fprintf(stdout, "no consumer group has read %s\n", queue)
		} else {
			fmt.Fprintln(stdout, "no consumer groups")
		}
		return exitOK
	}
	w := table(stdout)
	fmt.Fprintln(w, "GROUP\tQUEUE\tPARTITIONS\tLAG\tLEASED")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\n", r.Group, r.Queue, r.Partitions, r.Lag, r.Leased)
	}
	w.Flush()
	return exitOK
}

func seekCmd(a *app) *cobra.Command {
	c := &cobra.Command{Use: "seek QUEUE GROUP", Short: "move a group to the start (--to-start), the end (--to-end) or a time (--to)",
		Args: posArgs(2, 2, "QUEUE", "GROUP"),
		Example: `  regent seek orders billing --to-start   # read everything again
  regent seek orders billing --to 10m      # from the first message of the last 10 minutes
  regent seek orders billing --to-end      # skip what is there`}
	fs := c.Flags()
	toStart := fs.Bool("to-start", false, "move to the first message")
	toEnd := fs.Bool("to-end", false, "move past every message")
	to := fs.String("to", "", "move to the first message created after TIME (RFC 3339, or a duration ago like 10m)")
	partition := fs.String("partition", "", "only this partition")
	c.Run = a.opRun(func(o *opCmd, pos []string) int {
		queue, group := pos[0], pos[1]
		given := 0
		for _, b := range []bool{*toStart, *toEnd, *to != ""} {
			if b {
				given++
			}
		}
		if given != 1 {
			return o.usageErr("give exactly one of --to-start, --to-end and --to")
		}
		target := client.SeekTo{ToEnd: *toEnd, Partition: *partition}
		switch {
		case *toStart:
			target.Time = time.Unix(0, 0) // before every message
		case *to != "":
			t, err := parseWhen(*to, time.Now())
			if err != nil {
				return o.usageErr("--to %q: %v", *to, err)
			}
			target.Time = t
		}
		cl, err := o.dial(context.Background())
		if err != nil {
			return o.fail(err)
		}
		defer cl.Close()
		ctx, cancel := o.ctx()
		defer cancel()
		// QUEUE comes first (it came second before): a queue that does not
		// exist where the other argument names one is that mistake.
		if _, _, err := cl.QueueInfoPage(ctx, queue, client.ID{}, 1); protocol.CodeOf(err) == protocol.CodeQueueNotFound {
			if _, _, err2 := cl.QueueInfoPage(ctx, group, client.ID{}, 1); err2 == nil {
				return o.usageErr("no queue %q, but %q is one: QUEUE comes first (regent seek %s %s)", queue, group, group, queue)
			}
		}
		n, err := cl.Seek(ctx, queue, group, target)
		if err != nil {
			return o.fail(err)
		}
		if *o.json {
			return o.emit(map[string]any{"group": group, "queue": queue, "partitionsMoved": n})
		}
		fmt.Fprintf(o.stdout, "moved %s on %s: %s\n", group, queue, plural(n, "partition", "partitions"))
		return exitOK
	})
	return c
}

// parseWhen reads an RFC 3339 time or a duration ago ("10m").
func parseWhen(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("want an RFC 3339 time or a duration ago")
	}
	return now.Add(-d), nil
}

func statsCmd(a *app) *cobra.Command {
	c := &cobra.Command{Use: "stats", Short: "the broker's throughput, live on a terminal", Args: posArgs(0, 0)}
	interval := c.Flags().Duration("interval", time.Second, "refresh period on a terminal")
	c.Run = a.opRun(func(o *opCmd, _ []string) int { return stats(o, *interval) })
	return c
}

func stats(o *opCmd, interval time.Duration) int {
	stdout := o.stdout
	c, err := o.dial(context.Background())
	if err != nil {
		return o.fail(err)
	}
	defer c.Close()
	get := func() (client.Stats, error) {
		ctx, cancel := o.ctx()
		defer cancel()
		return c.Stats(ctx)
	}
	st, err := get()
	if err != nil {
		return o.fail(err)
	}
	if *o.json || !isTerminal(stdout) {
		if *o.json {
			return o.emit(map[string]any{"queues": st.Queues, "pushed": st.Pushed, "popped": st.Popped, "acked": st.Acked,
				"deadLettered": st.DeadLettered, "cacheBytes": st.CacheBytes, "connections": st.Connections,
				"fsyncs": st.Fsyncs, "fsyncNanos": st.FsyncTime.Nanoseconds(), "bytesWritten": st.BytesWritten, "entries": st.Entries})
		}
		fmt.Fprintf(stdout, "queues %d  pushed %d  popped %d  acked %d  dead-lettered %d  connections %d  fsyncs %d\n",
			st.Queues, st.Pushed, st.Popped, st.Acked, st.DeadLettered, st.Connections, st.Fsyncs)
		return exitOK
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t := time.NewTicker(interval)
	defer t.Stop()
	prev, at := st, time.Now()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(stdout)
			return exitOK
		case <-t.C:
		}
		cur, err := get()
		if err != nil {
			return o.fail(err)
		}
		secs := time.Since(at).Seconds()
		rate := func(a, b uint64) float64 { return float64(a-b) / secs }
		fsync := 0.0
		if n := cur.Fsyncs - prev.Fsyncs; n > 0 {
			fsync = float64(cur.FsyncTime-prev.FsyncTime) / float64(n) / 1e3 // µs
		}
		fmt.Fprintf(stdout, "\r\033[Kpush %9.0f/s  pop %9.0f/s  ack %9.0f/s  dlq %6.0f/s  fsync %6.0fµs  conns %d  queues %d",
			rate(cur.Pushed, prev.Pushed), rate(cur.Popped, prev.Popped), rate(cur.Acked, prev.Acked),
			rate(cur.DeadLettered, prev.DeadLettered), fsync, cur.Connections, cur.Queues)
		prev, at = cur, time.Now()
	}
}
