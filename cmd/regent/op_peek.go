package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
	"github.com/spf13/cobra"
)

func init() {
	register(peekCmd)
}

// peekTextPayload is how many bytes of each payload text mode asks for and
// shows; --json asks for whole payloads.
const peekTextPayload = 120

// peekMessageJSON is a peeked message as --json prints it.
type peekMessageJSON struct {
	ID            string `json:"id"`
	TransactionID string `json:"transactionId"`
	TraceID       string `json:"traceId,omitempty"`
	Queue         string `json:"queue"`
	Partition     string `json:"partition"`
	PartitionID   string `json:"partitionId"`
	Offset        uint64 `json:"offset"`
	CreatedAt     string `json:"createdAt"`
	Size          int    `json:"size"`
	Payload       string `json:"payload"`
	Cut           bool   `json:"cut,omitempty"` // the payload alone does not fit one reply: only its start is here
	PayloadError  string `json:"payloadError,omitempty"`
}

// peekGapJSON is a run of offsets passed over, as --json prints it.
type peekGapJSON struct {
	Partition string `json:"partition"`
	First     uint64 `json:"first"`
	Last      uint64 `json:"last"`
	Reason    string `json:"reason"`
}

type peekJSON struct {
	Messages []peekMessageJSON `json:"messages"`
	Gaps     []peekGapJSON     `json:"gaps"`
	More     bool              `json:"more"` // messages follow the last shown (raise --limit)
}

func peekCmd(a *app) *cobra.Command {
	c := &cobra.Command{Use: "peek QUEUE", Short: "look at messages without leasing them", Args: posArgs(1, 1, "QUEUE"),
		Long: `Show messages of QUEUE without taking them: peek creates nothing, takes
no lease and moves no cursor, so consumers still get every message shown.

Each partition is read from --from (default 0: the oldest held), or its
last --last messages; without --partition, every partition in the order
they were created. Offsets that are gone say why (retention, deleted, lost
to damage). Text mode shows the start of each payload; --json shows them
whole.`,
		Example: `  regent peek orders
  regent peek orders --partition customer-42 --last 5
  regent peek orders --from 100 --limit 50 --json`}
	fs := c.Flags()
	partition := fs.String("partition", "", "one partition (default: all)")
	from := fs.Uint64("from", 0, "the first offset of each partition")
	last := fs.Int("last", 0, "the last N messages of each partition (instead of --from)")
	limit := fs.Int("limit", 20, "show at most N messages")
	c.Run = a.opRun(func(o *opCmd, pos []string) int {
		queue := pos[0]
		switch {
		case c.Flags().Changed("from") && c.Flags().Changed("last"):
			return o.usageErr("--from and --last say where to start: give one")
		case c.Flags().Changed("last") && *last < 1:
			return o.usageErr("--last must be at least 1")
		case *limit < 1:
			return o.usageErr("--limit must be at least 1")
		}
		cl, err := o.dial(context.Background())
		if err != nil {
			return o.fail(err)
		}
		defer cl.Close()
		req := client.PeekRequest{Queue: queue, Partition: *partition, From: *from, Last: *last}
		if !*o.json {
			req.MaxPayload = peekTextPayload
		}
		out := peekJSON{Messages: []peekMessageJSON{}, Gaps: []peekGapJSON{}}
		var rows []string // text mode: messages and gaps in order
		for len(out.Messages) < *limit {
			req.Limit = min(*limit-len(out.Messages), client.MaxPeekPage)
			ctx, cancel := o.ctx()
			pg, err := cl.Peek(ctx, req)
			cancel()
			if err != nil {
				return o.fail(peekErr(err, queue, *partition))
			}
			gi := 0
			gap := func(g *client.PeekGap) {
				out.Gaps = append(out.Gaps, peekGapJSON{Partition: g.Partition, First: g.First, Last: g.Last, Reason: g.Reason.String()})
				rows = append(rows, fmt.Sprintf("%s\t%s\t(%s)", g.Partition, offsetRange(g.First, g.Last), gapText(g.Reason)))
			}
			for i := range pg.Messages {
				for ; gi < len(pg.Gaps) && pg.Gaps[gi].Before <= i; gi++ {
					gap(&pg.Gaps[gi])
				}
				m := &pg.Messages[i]
				out.Messages = append(out.Messages, peekMessageJSON{ID: m.ID.String(), TransactionID: m.TransactionID, TraceID: m.TraceID,
					Queue: m.Queue, Partition: m.Partition, PartitionID: m.PartitionID.String(), Offset: m.Offset, CreatedAt: ts(m.CreatedAt),
					Size: m.Size, Payload: string(m.Payload), Cut: *o.json && m.Cut(), PayloadError: m.PayloadError})
				rows = append(rows, fmt.Sprintf("%s\t%d\t%s\t%s\t%s", m.Partition, m.Offset, m.TransactionID, ts(m.CreatedAt), showPayload(m)))
			}
			for ; gi < len(pg.Gaps); gi++ {
				gap(&pg.Gaps[gi])
			}
			if !pg.More {
				out.More = false
				break
			}
			out.More, req.After = true, pg.Next
		}
		if *o.json {
			return o.emit(out)
		}
		if len(rows) == 0 {
			fmt.Fprintln(o.stdout, "(no message)")
			return exitOK
		}
		w := table(o.stdout)
		fmt.Fprintln(w, "PARTITION\tOFFSET\tTRANSACTION\tCREATED\tPAYLOAD")
		for _, r := range rows {
			fmt.Fprintln(w, r)
		}
		w.Flush()
		if out.More {
			fmt.Fprintf(o.stderr, "regent peek: showing %s; more follow (raise --limit)\n", plural(len(out.Messages), "message", "messages"))
		}
		return exitOK
	})
	return c
}

// peekErr says in words that the queue or partition does not exist.
func peekErr(err error, queue, partition string) error {
	switch protocol.CodeOf(err) {
	case protocol.CodeQueueNotFound:
		return fmt.Errorf("no queue %s", queue)
	case protocol.CodePartitionNotFound:
		return fmt.Errorf("no partition %s in queue %s", partition, queue)
	}
	return err
}

func offsetRange(first, last uint64) string {
	if first == last {
		return strconv.FormatUint(first, 10)
	}
	return strconv.FormatUint(first, 10) + "-" + strconv.FormatUint(last, 10)
}

func gapText(r client.GapReason) string {
	switch r {
	case client.GapRetention:
		return "removed by retention"
	case client.GapLost:
		return "lost to journal damage"
	case client.GapUnreadable:
		return "unreadable: stored data went bad"
	case client.GapDeleted:
		return "deleted"
	}
	return r.String()
}

// showPayload is the start of a payload on one line: quoted when it is not
// printable text, and followed by its size when it is longer.
func showPayload(m *client.PeekMessage) string {
	if m.PayloadError != "" {
		return "(payload unreadable: " + m.PayloadError + ")"
	}
	p := m.Payload[:min(len(m.Payload), peekTextPayload)]
	for k := 0; k < utf8.UTFMax-1 && len(p) < m.Size && len(p) > 0 && !utf8.Valid(p); k++ { // a rune cut at the end
		p = p[:len(p)-1]
	}
	s := string(p)
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) {
		s = strconv.Quote(s)
	}
	if len(p) < m.Size {
		s += fmt.Sprintf(" … (%d bytes)", m.Size)
	}
	return s
}
