package bench

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestRSSSamplerKeepsThePeakOfItsReadings: the largest reading wins, the
// first is taken at once and the last at Stop, and a failing reader is
// told, not taken for zero.
func TestRSSSamplerKeepsThePeakOfItsReadings(t *testing.T) {
	seq := []int64{10, 50, 20, 30}
	var calls atomic.Int64
	read := func() (int64, error) {
		i := calls.Add(1) - 1
		if i < int64(len(seq)) {
			return seq[i], nil
		}
		return 5, nil
	}
	s := startRSS(read, time.Millisecond)
	if calls.Load() != 1 {
		t.Fatalf("%d readings before startRSS returned, want 1", calls.Load())
	}
	deadline := time.Now().Add(10 * time.Second)
	for calls.Load() < int64(len(seq)+2) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	peak, n, err := s.Stop()
	if err != nil || peak != 50 || n < len(seq)+3 || int64(n) != calls.Load() {
		t.Fatalf("Stop: peak %d from %d readings (%d calls), %v; want 50 from every call", peak, n, calls.Load(), err)
	}
	if p2, n2, _ := s.Stop(); p2 != peak || n2 != n {
		t.Fatalf("second Stop: %d %d, want %d %d", p2, n2, peak, n)
	}

	// One reading of a phase too short for a tick still has two: at start
	// and at stop.
	var c2 atomic.Int64
	s = startRSS(func() (int64, error) { return 100 * c2.Add(1), nil }, time.Hour)
	if peak, n, err := s.Stop(); peak != 200 || n != 2 || err != nil {
		t.Fatalf("short phase: peak %d from %d readings, %v; want 200 from 2", peak, n, err)
	}

	gone := errors.New("no such process")
	s = startRSS(func() (int64, error) { return 0, gone }, time.Millisecond)
	if peak, n, err := s.Stop(); !errors.Is(err, gone) || n != 0 || peak != 0 {
		t.Fatalf("failing reader: peak %d from %d readings, %v", peak, n, err)
	}
}

// TestPhaseWithoutProbe measures time alone.
func TestPhaseWithoutProbe(t *testing.T) {
	m := startPhase(nil)
	time.Sleep(10 * time.Millisecond)
	ph := m.end("push", 1000, 128, Latency{})
	if ph.Server != nil || ph.Elapsed < 10*time.Millisecond || ph.MsgsPerSec <= 0 || ph.MBPerSec != ph.MsgsPerSec*128/1e6 {
		t.Fatalf("%+v", ph)
	}
}
