package bench

import (
	"context"
	"testing"
	"time"
)

// fakeClock drives a Schedule: sleeping moves the clock, work is simulated
// by advancing it by hand.
type fakeClock struct {
	t      time.Time
	slept  []time.Duration
	cancel bool
}

func (c *fakeClock) attach(s *Schedule) {
	s.now = func() time.Time { return c.t }
	s.sleep = func(ctx context.Context, d time.Duration) error {
		if c.cancel {
			return context.Canceled
		}
		c.slept = append(c.slept, d)
		c.t = c.t.Add(d)
		return nil
	}
}

func TestScheduleOpenLoop(t *testing.T) {
	t0 := time.Unix(1000, 0)
	clk := &fakeClock{t: t0}
	s := NewSchedule(t0, 1000, 1, 0) // 1 ms apart
	clk.attach(s)
	ctx := context.Background()
	// Fast operations: every Wait sleeps until its slot.
	for k := 0; k < 3; k++ {
		due, err := s.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := t0.Add(time.Duration(k) * time.Millisecond); !due.Equal(want) {
			t.Fatalf("op %d due %v, want %v", k, due, want)
		}
		clk.t = clk.t.Add(100 * time.Microsecond) // the operation
	}
	// A stall of 10 ms: the next 10 operations are due in the past and go
	// at once, each keeping its intended time (latency includes the stall).
	clk.t = clk.t.Add(10 * time.Millisecond)
	slept := len(clk.slept)
	for k := 3; k < 13; k++ {
		due, _ := s.Wait(ctx)
		if want := t0.Add(time.Duration(k) * time.Millisecond); !due.Equal(want) {
			t.Fatalf("op %d due %v, want %v", k, due, want)
		}
		if k == 3 {
			if lat := clk.t.Sub(due); lat != 9100*time.Microsecond {
				t.Fatalf("latency after stall %v, want 9.1ms", lat)
			}
		}
	}
	if len(clk.slept) != slept {
		t.Fatalf("slept while behind schedule: %v", clk.slept[slept:])
	}
	// Caught up again: it sleeps.
	clk.t = t0.Add(12 * time.Millisecond)
	due, _ := s.Wait(ctx)
	if want := t0.Add(13 * time.Millisecond); !due.Equal(want) || clk.t != want {
		t.Fatalf("due %v at %v, want both %v", due, clk.t, want)
	}
}

func TestScheduleStaggerAndRate(t *testing.T) {
	t0 := time.Unix(0, 0)
	// 4 workers sharing 4000 ops/s: each 1 ms apart, offset by 250 µs.
	for w := 0; w < 4; w++ {
		s := NewSchedule(t0, 4000, 4, w)
		if s.Interval() != time.Millisecond {
			t.Fatalf("interval %v", s.Interval())
		}
		clk := &fakeClock{t: t0}
		clk.attach(s)
		due, _ := s.Wait(context.Background())
		if want := t0.Add(time.Duration(w) * 250 * time.Microsecond); !due.Equal(want) {
			t.Fatalf("worker %d first due %v, want %v", w, due, want)
		}
	}
}

func TestScheduleClosedLoopAndCancel(t *testing.T) {
	t0 := time.Unix(5, 0)
	s := NewSchedule(t0, 0, 4, 1)
	clk := &fakeClock{t: t0.Add(time.Second)}
	clk.attach(s)
	due, err := s.Wait(context.Background())
	if err != nil || !due.Equal(clk.t) || len(clk.slept) != 0 {
		t.Fatalf("closed loop: due %v err %v slept %v", due, err, clk.slept)
	}
	s = NewSchedule(t0, 10, 1, 0)
	clk = &fakeClock{t: t0, cancel: true}
	clk.attach(s)
	s.Wait(context.Background()) // due now: no sleep
	if _, err := s.Wait(context.Background()); err == nil {
		t.Fatal("no error from a cancelled sleep")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewSchedule(t0, 0, 1, 0).Wait(ctx); err == nil {
		t.Fatal("closed loop ignored a cancelled context")
	}
}
