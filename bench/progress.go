package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Progress draws a live status line (rate and elapsed time) on a terminal
// during long runs. A nil *Progress draws nothing.
type Progress struct {
	w     io.Writer
	label string
	every time.Duration
}

// NewProgress returns a Progress writing to w, or nil when w is not a
// terminal (or quiet is set, as with --json).
func NewProgress(w io.Writer, quiet bool) *Progress {
	if quiet || !isTerminal(w) {
		return nil
	}
	return &Progress{w: w, every: time.Second}
}

// NewProgressTo draws on w whatever it is, every period (for tests).
func NewProgressTo(w io.Writer, every time.Duration) *Progress {
	return &Progress{w: w, every: every}
}

// Label sets what the line starts with (scenario, target, round).
func (p *Progress) Label(s string) {
	if p != nil {
		p.label = s
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// ticker calls line every period until the returned stop is called, then
// clears the line.
func (p *Progress) ticker(line func(el time.Duration) string, start time.Time) (stop func()) {
	if p == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(p.every)
		defer t.Stop()
		width := 0
		for {
			select {
			case <-done:
				fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", width))
				return
			case <-t.C:
				s := p.label + "  " + line(time.Since(start))
				fmt.Fprintf(p.w, "\r%-*s", width, s)
				width = max(width, len(s))
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// progress draws the measured phase: pushed and consumed, with their rates
// over the last period.
func (r *runner) progress(start time.Time) func() {
	var lastP, lastC int64
	last := time.Duration(0)
	return r.prog.ticker(func(el time.Duration) string {
		p, c := r.pushed.Load(), r.consumed.Load()
		dt := (el - last).Seconds()
		s := fmt.Sprintf("%5.1fs/%s", el.Seconds(), r.cfg.Duration)
		if r.cfg.pushes() && !r.cfg.backlog() {
			s += fmt.Sprintf("  pushed %s (%s/s)", count(p), count(int64(float64(p-lastP)/dt)))
		}
		if r.cfg.consumes() {
			s += fmt.Sprintf("  consumed %s (%s/s)", count(c), count(int64(float64(c-lastC)/dt)))
		}
		lastP, lastC, last = p, c, el
		return s
	}, start)
}

// note draws a preparation phase's count.
func (r *runner) note(phase string, start time.Time, n *atomic.Int64) func() {
	return r.prog.ticker(func(el time.Duration) string {
		v := n.Load()
		return fmt.Sprintf("%s %5.1fs  %s (%s/s)", phase, el.Seconds(), count(v), count(int64(float64(v)/el.Seconds())))
	}, start)
}

// count formats n with thousands separators.
func count(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
