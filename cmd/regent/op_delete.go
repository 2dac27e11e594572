package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
	"github.com/spf13/cobra"
)

func init() { register(deleteCmd) }

func deleteCmd(a *app) *cobra.Command {
	c := &cobra.Command{Use: "delete queue|group NAME", Short: "delete a queue or a consumer group (asks first; --force)",
		Args: cobra.NoArgs,
		Long: `Delete a queue with everything in it, or a consumer group (its cursors,
leases and retry counts) on one queue or on all.

On a terminal it asks first; without one (a script) it refuses unless
--force is given, with exit code 2.`,
		// Without a subcommand: the help, on stderr, and the usage exit code.
		Run: func(cmd *cobra.Command, _ []string) {
			cmd.SetOut(a.stderr)
			cmd.Help()
			a.code = exitUsage
		},
	}
	c.AddCommand(deleteQueueCmd(a), deleteGroupCmd(a))
	return c
}

func deleteQueueCmd(a *app) *cobra.Command {
	c := &cobra.Command{Use: "queue QUEUE", Short: "delete a queue and everything in it: messages, partitions, groups, dead letters",
		Args:    posArgs(1, 1, "QUEUE"),
		Example: "  regent delete queue orders            # asks you to type orders\n  regent delete queue orders --force    # from a script"}
	force := c.Flags().Bool("force", false, "do not ask (needed when stdin is not a terminal)")
	c.Run = a.opRun(func(o *opCmd, pos []string) int {
		o.name = "delete queue"
		queue := pos[0]
		if !*force && !isTerminal(o.stdin) {
			return o.confirm(false, "", "")
		}
		cl, err := o.dial(context.Background())
		if err != nil {
			return o.fail(err)
		}
		defer cl.Close()
		ctx, cancel := o.ctx()
		defer cancel()
		qi, _, err := cl.QueueInfoPage(ctx, queue, client.ID{}, 1)
		if protocol.CodeOf(err) == protocol.CodeQueueNotFound {
			return o.fail(fmt.Errorf("no queue %q", queue))
		}
		if err != nil {
			return o.fail(err)
		}
		prompt := fmt.Sprintf("Delete queue %s for good: %s in %s, %s, %s?\nType the queue's name to confirm: ", queue,
			plural(qi.Messages, "message", "messages"), plural(qi.PartitionCount, "partition", "partitions"),
			plural(qi.DeadLetters, "dead letter", "dead letters"), groupList(qi.Groups))
		if code := o.confirm(*force, prompt, queue); code != exitOK {
			return code
		}
		dctx, dcancel := o.ctx() // the answer may have taken a while
		defer dcancel()
		existed, err := cl.DeleteQueue(dctx, queue)
		if err != nil {
			return o.fail(err)
		}
		if !existed {
			return o.fail(fmt.Errorf("no queue %q (deleted meanwhile?)", queue))
		}
		if *o.json {
			return o.emit(map[string]any{"queue": queue, "deleted": true})
		}
		fmt.Fprintf(o.stdout, "deleted queue %s\n", queue)
		return exitOK
	})
	return c
}

func deleteGroupCmd(a *app) *cobra.Command {
	c := &cobra.Command{Use: "group GROUP", Short: "delete a consumer group on one queue (--queue) or on every queue that has it",
		Args: posArgs(1, 1, "GROUP"),
		Long: `Delete a consumer group: its cursors, leases and retry counts, on --queue or
on every queue that has it. The messages stay; a group of that name that
pops again starts afresh (by its subscription mode).`,
		Example: "  regent delete group billing --queue orders\n  regent delete group tail-1a2b3c4d --queue orders --force"}
	fs := c.Flags()
	queue := fs.String("queue", "", "only on this queue (default: every queue that has the group)")
	force := fs.Bool("force", false, "do not ask (needed when stdin is not a terminal)")
	c.Run = a.opRun(func(o *opCmd, pos []string) int {
		o.name = "delete group"
		group := pos[0]
		if fs.Changed("queue") && strings.TrimSpace(*queue) == "" {
			return o.usageErr("--queue is empty (leave it out for every queue)")
		}
		if !*force && !isTerminal(o.stdin) {
			return o.confirm(false, "", "")
		}
		cl, err := o.dial(context.Background())
		if err != nil {
			return o.fail(err)
		}
		defer cl.Close()
		ctx, cancel := o.ctx()
		defer cancel()
		// The queues that have the group.
		var on []string
		if *queue != "" {
			qi, _, err := cl.QueueInfoPage(ctx, *queue, client.ID{}, 1)
			if protocol.CodeOf(err) == protocol.CodeQueueNotFound {
				return o.fail(fmt.Errorf("no queue %q", *queue))
			}
			if err != nil {
				return o.fail(err)
			}
			if has(qi.Groups, group) {
				on = append(on, *queue)
			}
		} else {
			qs, err := cl.Queues(ctx)
			if err != nil {
				return o.fail(err)
			}
			for _, q := range qs {
				if has(q.Groups, group) {
					on = append(on, q.Name)
				}
			}
		}
		if len(on) == 0 {
			where := "any queue"
			if *queue != "" {
				where = "queue " + *queue
			}
			return o.fail(fmt.Errorf("no group %q on %s", group, where))
		}
		prompt := fmt.Sprintf("Delete group %s (its cursors, leases and retry counts) on %s? [y/N] ", group, strings.Join(on, ", "))
		if code := o.confirm(*force, prompt, ""); code != exitOK {
			return code
		}
		dctx, dcancel := o.ctx()
		defer dcancel()
		n, err := cl.DeleteGroup(dctx, *queue, group)
		if err != nil {
			return o.fail(err)
		}
		if n == 0 {
			return o.fail(fmt.Errorf("no group %q (deleted meanwhile?)", group))
		}
		if *o.json {
			return o.emit(map[string]any{"group": group, "queues": n})
		}
		if *queue != "" {
			fmt.Fprintf(o.stdout, "deleted group %s on %s\n", group, *queue)
		} else {
			fmt.Fprintf(o.stdout, "deleted group %s on %s\n", group, plural(n, "queue", "queues"))
		}
		return exitOK
	})
	return c
}

func has(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// groupList names a queue's groups: "groups a, b", or "no groups".
func groupList(groups []string) string {
	if len(groups) == 0 {
		return "no groups"
	}
	return "groups " + strings.Join(groups, ", ")
}
