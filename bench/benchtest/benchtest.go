package benchtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/regentmq/regent/bench"
)

// serialDigits is the width of the serial written into a payload.
const serialDigits = 12

// padMark opens the padding of the harness's payloads
// ({"t":...,"p":"xxxx"}); the serial is written right after it, so that
// the payload stays the JSON object Queen's HTTP API wants.
var padMark = []byte(`"p":"`)

// Tagged is a bench.Target whose producers number the messages they push
// and whose consumers tally the numbers they are handed.
type Tagged struct {
	bench.Target

	next atomic.Int64 // serials handed out

	mu   sync.Mutex
	seen map[string]map[int64]int // group → serial → deliveries

	openProducers atomic.Int64
	overlap       atomic.Bool // a consumer was opened while a producer was open
}

// Tag wraps t.
func Tag(t bench.Target) *Tagged {
	return &Tagged{Target: t, seen: map[string]map[int64]int{}}
}

// Producer opens a producer of the wrapped target that writes a serial
// into each payload before pushing it.
func (t *Tagged) Producer(ctx context.Context, id int) (bench.Producer, error) {
	p, err := t.Target.Producer(ctx, id)
	if err != nil {
		return nil, err
	}
	t.openProducers.Add(1)
	return &taggedProducer{Producer: p, t: t}, nil
}

// Consumer opens a consumer of the wrapped target whose deliveries are
// tallied for group.
func (t *Tagged) Consumer(ctx context.Context, id int, group string) (bench.Consumer, error) {
	if t.openProducers.Load() > 0 {
		t.overlap.Store(true)
	}
	c, err := t.Target.Consumer(ctx, id, group)
	if err != nil {
		return nil, err
	}
	return &taggedConsumer{Consumer: c, t: t, group: group}, nil
}

// Pushed is how many serials were handed out (messages sent, stored or not).
func (t *Tagged) Pushed() int64 { return t.next.Load() }

// ConsumerWhileProducing reports whether a consumer was opened while a
// producer was still open.
func (t *Tagged) ConsumerWhileProducing() bool { return t.overlap.Load() }

// Check answers nil when each of groups (named) was handed every message
// pushed exactly once, and otherwise what was missing, repeated or unknown.
func (t *Tagged) Check(groups ...string) error {
	n := t.next.Load()
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	for _, g := range groups {
		seen := t.seen[g]
		var missing, repeated, unknown []int64
		for s := int64(0); s < n; s++ {
			switch c := seen[s]; {
			case c == 0:
				missing = append(missing, s)
			case c > 1:
				repeated = append(repeated, s)
			}
		}
		for s := range seen {
			if s < 0 || s >= n {
				unknown = append(unknown, s)
			}
		}
		sort.Slice(unknown, func(i, j int) bool { return unknown[i] < unknown[j] })
		if len(missing)+len(repeated)+len(unknown) > 0 {
			errs = append(errs, fmt.Errorf("group %s, %d messages pushed: %d never delivered %s, %d delivered more than once %s, %d not pushed %s",
				g, n, len(missing), some(missing), len(repeated), some(repeated), len(unknown), some(unknown)))
		}
	}
	return errors.Join(errs...)
}

// some shows the first few of xs.
func some(xs []int64) string {
	if len(xs) > 5 {
		return fmt.Sprint(xs[:5]) + "..."
	}
	return fmt.Sprint(xs)
}

type taggedProducer struct {
	bench.Producer
	t      *Tagged
	closed atomic.Bool
}

func (p *taggedProducer) Push(ctx context.Context, msgs []bench.Msg) (int, error) {
	first := p.t.next.Add(int64(len(msgs))) - int64(len(msgs))
	for i := range msgs {
		if err := writeSerial(msgs[i].Payload, first+int64(i)); err != nil {
			return 0, err
		}
	}
	return p.Producer.Push(ctx, msgs)
}

func (p *taggedProducer) Close() error {
	if p.closed.CompareAndSwap(false, true) {
		p.t.openProducers.Add(-1)
	}
	return p.Producer.Close()
}

func writeSerial(payload []byte, s int64) error {
	i := bytes.Index(payload, padMark)
	if i < 0 || len(payload)-(i+len(padMark)) < serialDigits+2 {
		return fmt.Errorf("benchtest: a payload of %d bytes has no room for a serial", len(payload))
	}
	d := payload[i+len(padMark) : i+len(padMark)+serialDigits]
	for k := serialDigits - 1; k >= 0; k-- {
		d[k] = byte('0' + s%10)
		s /= 10
	}
	return nil
}

func readSerial(payload []byte) (int64, bool) {
	i := bytes.Index(payload, padMark)
	if i < 0 || len(payload) < i+len(padMark)+serialDigits {
		return 0, false
	}
	s, err := strconv.ParseInt(string(payload[i+len(padMark):i+len(padMark)+serialDigits]), 10, 64)
	return s, err == nil
}

type taggedConsumer struct {
	bench.Consumer
	t     *Tagged
	group string
}

func (c *taggedConsumer) Pop(ctx context.Context, max int) (bench.Delivery, error) {
	d, err := c.Consumer.Pop(ctx, max)
	if err != nil || d.Len() == 0 {
		return d, err
	}
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	seen := c.t.seen[c.group]
	if seen == nil {
		seen = map[int64]int{}
		c.t.seen[c.group] = seen
	}
	for i := 0; i < d.Len(); i++ {
		s, ok := readSerial(d.Payload(i))
		if !ok {
			s = -1 // an untagged message: reported as not pushed
		}
		seen[s]++
	}
	return d, nil
}
