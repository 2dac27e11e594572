package bench

import (
	"sync"
	"time"
)

// RSSEvery is how often a phase of a backlog run reads the server's
// resident set (VmRSS). VmHWM, the process's high-water mark, cannot tell
// one phase from the next: after a push phase that grew the server, it
// keeps that peak through the drain.
const RSSEvery = 100 * time.Millisecond

// rssSampler keeps the largest of periodic readings of a resident set, from
// a first reading when it starts to a last one when it stops.
type rssSampler struct {
	read func() (int64, error)
	stop chan struct{}
	done chan struct{}
	once sync.Once

	// Written by the sampling goroutine until done is closed, then by Stop.
	peak int64
	n    int
	err  error
}

// startRSS reads once at once, then every period until Stop.
func startRSS(read func() (int64, error), every time.Duration) *rssSampler {
	s := &rssSampler{read: read, stop: make(chan struct{}), done: make(chan struct{})}
	s.sample()
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *rssSampler) sample() {
	v, err := s.read()
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		return
	}
	s.n++
	s.peak = max(s.peak, v)
}

// Stop reads a last time and ends the sampling. It answers the largest
// reading, how many readings there were, and the first failed reading's
// error (a process that ended cannot be read). Later calls answer the same.
func (s *rssSampler) Stop() (peak int64, readings int, err error) {
	s.once.Do(func() {
		close(s.stop)
		<-s.done
		s.sample()
	})
	return s.peak, s.n, s.err
}

// phaseMeter measures the server's use during one phase of a run: CPU time
// from its start to its end, and the resident set sampled every RSSEvery.
type phaseMeter struct {
	probe Probe
	start time.Time
	cpu0  time.Duration
	cpuOK bool
	rss   *rssSampler
}

// startPhase starts measuring (probe nil: the server is not a process of
// this machine, and only time is measured).
func startPhase(probe Probe) *phaseMeter {
	m := &phaseMeter{probe: probe}
	if probe != nil {
		var err error
		m.cpu0, err = probe.CPU()
		m.cpuOK = err == nil
		m.rss = startRSS(probe.RSS, RSSEvery)
	}
	m.start = time.Now()
	return m
}

// end closes the phase, msgs messages of size bytes having gone through it.
func (m *phaseMeter) end(name string, msgs int64, size int, lat Latency) Phase {
	ph := Phase{Name: name, Msgs: msgs, Elapsed: time.Since(m.start), Latency: lat}
	if s := ph.Elapsed.Seconds(); s > 0 {
		ph.MsgsPerSec = float64(msgs) / s
		ph.MBPerSec = ph.MsgsPerSec * float64(size) / 1e6
	}
	if m.probe == nil {
		return ph
	}
	peak, n, _ := m.rss.Stop()
	cpu1, err := m.probe.CPU()
	if !m.cpuOK || err != nil || n == 0 {
		return ph
	}
	u := &ServerUsage{CPUSeconds: (cpu1 - m.cpu0).Seconds(), PeakRSS: peak, RSSSamples: n}
	if msgs > 0 {
		u.CPUPerMsgUs = u.CPUSeconds * 1e6 / float64(msgs)
	}
	ph.Server = u
	return ph
}
