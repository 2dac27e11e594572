package bench

import (
	"context"
	"time"
)

// Schedule is an open-loop rate limiter for one worker: its k-th operation
// is due at start + k·interval, however late the earlier ones were. Wait
// returns that intended time, which is where latency is measured from: a
// worker that fell behind sends at once (its backlog shows as latency) and
// never skips or postpones the schedule, so a stall of the server is not
// hidden by the client sending less during it (coordinated omission).
//
// With interval 0 the loop is closed: Wait returns at once with the current
// time.
type Schedule struct {
	start    time.Time
	interval time.Duration
	k        int64
	now      func() time.Time
	sleep    func(ctx context.Context, d time.Duration) error
}

// NewSchedule makes the schedule of one of workers workers sharing a total
// rate of ratePerSec operations per second (0: unlimited). The workers'
// schedules are staggered by interval/workers so they do not fire at once.
func NewSchedule(start time.Time, ratePerSec float64, workers, worker int) *Schedule {
	s := &Schedule{start: start, now: time.Now, sleep: sleepCtx}
	if ratePerSec > 0 && workers > 0 {
		s.interval = time.Duration(float64(time.Second) * float64(workers) / ratePerSec)
		if s.interval <= 0 {
			s.interval = 1
		}
		s.start = start.Add(s.interval * time.Duration(worker) / time.Duration(workers))
	}
	return s
}

// Interval is the time between two operations of this worker (0: closed
// loop).
func (s *Schedule) Interval() time.Duration { return s.interval }

// Wait blocks until the next operation is due and returns its intended
// time. It returns ctx's error if ctx ends first.
func (s *Schedule) Wait(ctx context.Context) (time.Time, error) {
	if s.interval == 0 {
		if err := ctx.Err(); err != nil {
			return time.Time{}, err
		}
		return s.now(), nil
	}
	due := s.start.Add(time.Duration(s.k) * s.interval)
	s.k++
	if d := due.Sub(s.now()); d > 0 {
		if err := s.sleep(ctx, d); err != nil {
			return time.Time{}, err
		}
	} else if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	return due, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
