package bench

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// TestPhasesSeeWhatVmHWMCannot: a phase that maps and touches 64 MiB, then
// a phase after they are unmapped. Sampled VmRSS tells them apart; VmHWM
// still holds the first phase's peak during the second.
func TestPhasesSeeWhatVmHWMCannot(t *testing.T) {
	p := procProbe(os.Getpid())
	if _, err := p.RSS(); err != nil {
		t.Skip("no /proc here")
	}
	const size = 64 << 20
	m1 := startPhase(p)
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < size; i += 4096 {
		mem[i] = 1
	}
	big := m1.end("big", 1, 1, Latency{})
	if err := syscall.Munmap(mem); err != nil {
		t.Fatal(err)
	}
	m2 := startPhase(p)
	time.Sleep(3 * RSSEvery / 2) // one periodic reading at least
	small := m2.end("small", 1, 1, Latency{})
	if big.Server == nil || small.Server == nil {
		t.Fatalf("no server figures: %+v %+v", big, small)
	}
	if small.Server.RSSSamples < 3 {
		t.Errorf("small phase: %d readings, want the first, a periodic one and the last", small.Server.RSSSamples)
	}
	if d := big.Server.PeakRSS - small.Server.PeakRSS; d < size*3/4 {
		t.Fatalf("phase peaks %d and %d differ by %d, want about %d", big.Server.PeakRSS, small.Server.PeakRSS, d, size)
	}
	// (VmHWM and VmRSS are kept apart by the kernel and may differ by a
	// few pages.)
	hwm, err := p.PeakRSS()
	if err != nil || hwm-small.Server.PeakRSS < size*3/4 {
		t.Fatalf("VmHWM %d (%v) does not hold the big phase's peak %d over the small phase's %d", hwm, err,
			big.Server.PeakRSS, small.Server.PeakRSS)
	}
	if big.Msgs != 1 || big.MsgsPerSec <= 0 || big.Server.CPUPerMsgUs < 0 {
		t.Fatalf("big phase: %+v", big)
	}
}
