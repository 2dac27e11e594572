package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/client"
)

// maxLine is the longest line `push -` reads: the largest message a broker
// takes with the largest frame (a broker with a smaller --max-message
// answers a longer one failed, naming its limit).
var maxLine = broker.MaxPayloadFor(0)

// pushBatchBytes is what `push -` puts in one request at most (beside
// pushBatchItems): a line longer than that goes alone. A broker with a
// smaller --max-frame refuses such a request before it is sent
// (client.ErrTooLarge); pushLines then splits it and sends smaller ones.
const (
	pushBatchBytes = 4 << 20
	pushBatchItems = 100
)

// lineSource gives the messages of `push`: the lines of stdin (blank ones
// skipped, a trailing \r dropped), or the one PAYLOAD argument. It reads
// as it goes, so stdin may be longer than memory.
type lineSource struct {
	r      *bufio.Reader // nil: only queued
	max    int
	line   int      // lines of stdin read
	queued [][]byte // read ahead by peek
	lines  []int    // the line number of each queued message
	err    error    // what reading stopped on, after queued
}

func newLineSource(r io.Reader, max int) *lineSource {
	return &lineSource{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

func singleLine(p []byte) *lineSource {
	return &lineSource{queued: [][]byte{p}, lines: []int{0}, err: io.EOF}
}

// next returns the next message and its line number (0 for the argument),
// or io.EOF at the end, or an error naming the line that was too long.
func (s *lineSource) next() ([]byte, int, error) {
	if len(s.queued) == 0 {
		if _, err := s.peek(1); err != nil {
			return nil, 0, err
		}
		if len(s.queued) == 0 {
			return nil, 0, s.err
		}
	}
	p, n := s.queued[0], s.lines[0]
	s.queued, s.lines = s.queued[1:], s.lines[1:]
	return p, n, nil
}

// peek reads ahead until n messages are queued or reading stops, and
// returns how many are queued. A line too long is an error only once the
// lines before it are taken.
func (s *lineSource) peek(n int) (int, error) {
	for len(s.queued) < n && s.err == nil {
		p, err := s.read()
		if err != nil {
			s.err = err
			break
		}
		if len(p) > 0 {
			s.queued, s.lines = append(s.queued, p), append(s.lines, s.line)
		}
	}
	if len(s.queued) == 0 && s.err != nil && s.err != io.EOF {
		return 0, s.err
	}
	return len(s.queued), nil
}

// read reads one line whole, however long, up to s.max bytes.
func (s *lineSource) read() ([]byte, error) {
	if s.r == nil {
		return nil, io.EOF
	}
	var line []byte
	for {
		chunk, err := s.r.ReadSlice('\n')
		if len(line)+len(chunk) > s.max+2 { // +2: the \r\n that is not the message's
			s.line++
			return nil, fmt.Errorf("line %d of stdin is longer than the largest message a broker takes (%d bytes)", s.line, s.max)
		}
		line = append(line, chunk...)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && len(line) == 0:
			return nil, io.EOF
		case err != nil && err != io.EOF:
			return nil, fmt.Errorf("reading stdin: %w", err)
		}
		s.line++
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(line) > s.max {
			return nil, fmt.Errorf("line %d of stdin is longer than the largest message a broker takes (%d bytes)", s.line, s.max)
		}
		return line, nil
	}
}

// pushLines pushes src's messages (each as tmpl, with its payload) in
// requests of up to pushBatchItems items and pushBatchBytes, printing one
// result per message (or, with --json, all of them as one array).
func pushLines(o *opCmd, c *client.Client, tmpl client.Item, src *lineSource) int {
	partName := tmpl.Partition
	if partName == "" {
		partName = "Default" // the broker's name for a push without one
	}
	var all []pushResultJSON
	failed := 0
	report := func(j pushResultJSON) {
		if j.Error != "" {
			failed++
		}
		if *o.json {
			all = append(all, j)
		} else if j.Error != "" {
			fmt.Fprintf(o.stdout, "%-9s %s\n", j.Status, j.Error)
		} else {
			fmt.Fprintf(o.stdout, "%-9s %s  partition %s, offset %d\n", j.Status, j.MessageID, j.Partition, j.Offset)
		}
	}
	budget := pushBatchBytes
	var send func(items []client.Item, lines []int) error
	send = func(items []client.Item, lines []int) error {
		ctx, cancel := o.ctx()
		res, err := c.Push(ctx, items...)
		cancel()
		if errors.Is(err, client.ErrTooLarge) {
			// Refused before it was sent: nothing of it is stored.
			if len(items) == 1 {
				j := pushResultJSON{Status: client.PushFailed.String(), Error: err.Error()}
				if lines[0] > 0 {
					j.Error = fmt.Sprintf("line %d: %v", lines[0], err)
				}
				report(j)
				return nil
			}
			budget = max(1, min(budget, requestBytes(items)/2))
			h := len(items) / 2
			if err := send(items[:h], lines[:h]); err != nil {
				return err
			}
			return send(items[h:], lines[h:])
		}
		if err != nil {
			return err
		}
		for _, r := range res {
			j := pushResultJSON{Status: r.Status.String(), Offset: r.Offset, TransactionID: r.TransactionID}
			if r.Status != client.PushFailed {
				j.Partition, j.MessageID, j.PartitionID = partName, r.MessageID.String(), r.PartitionID.String()
			} else {
				j.Error = r.Err.Error()
			}
			report(j)
		}
		return nil
	}
	var (
		items []client.Item
		lines []int
		size  int
	)
	flush := func() error {
		if len(items) == 0 {
			return nil
		}
		err := send(items, lines)
		items, lines, size = items[:0], lines[:0], 0
		return err
	}
	var stop error
	for {
		p, line, err := src.next()
		if err != nil {
			if err != io.EOF {
				stop = err
			}
			break
		}
		it := tmpl
		it.Payload = p
		if n := itemBytes(&it); len(items) > 0 && (len(items) == pushBatchItems || size+n > budget) {
			if err := flush(); err != nil {
				return o.fail(err)
			}
		}
		items, lines, size = append(items, it), append(lines, line), size+itemBytes(&it)
	}
	if err := flush(); err != nil {
		return o.fail(err)
	}
	if *o.json {
		if code := o.emit(all); code != exitOK {
			return code
		}
	}
	if stop != nil {
		return o.fail(fmt.Errorf("%w (the lines before it were pushed)", stop))
	}
	if failed > 0 {
		return exitFailure
	}
	return exitOK
}

// itemBytes is about what an item takes in a push request.
func itemBytes(it *client.Item) int {
	return len(it.Payload) + len(it.Queue) + len(it.Partition) + len(it.TransactionID) + len(it.TraceID) + 32
}

func requestBytes(items []client.Item) int {
	n := 0
	for i := range items {
		n += itemBytes(&items[i])
	}
	return n
}
