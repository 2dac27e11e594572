package crash

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/regentmq/regent/log"
)

// long reports whether the long runs were asked for (REGENT_LONG=1).
func long() bool { return os.Getenv("REGENT_LONG") == "1" }

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binary builds regent once per test process.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "regent-crash-bin-")
		if buildErr != nil {
			return
		}
		binPath, buildErr = Build(binDir)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// cycles is how many kills a run does: 5 by default, 100 with REGENT_LONG=1,
// or REGENT_CRASH_CYCLES.
func cycles() int {
	if v, err := strconv.Atoi(os.Getenv("REGENT_CRASH_CYCLES")); err == nil && v > 0 {
		return v
	}
	if long() {
		return 100
	}
	return 5
}

// TestCrashKill9 is the crash scenario: kill -9 under load, restart, and
// every promise of "After a crash" checked.
func TestCrashKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a broker process")
	}
	cfg := Config{Binary: binary(t), Dir: t.TempDir(), Cycles: cycles(), Logf: t.Logf}
	if !long() {
		cfg.MinUp, cfg.MaxUp = 200*time.Millisecond, 700*time.Millisecond
	}
	runChecked(t, cfg, 10*time.Second, time.Minute, "the broker")
}

// runChecked runs cfg (its seed from REGENT_CRASH_SEED when set), within
// perCycle for each cycle and slack more, and fails the test on a
// violation, or on a workload too small to mean anything.
func runChecked(t *testing.T, cfg Config, perCycle, slack time.Duration, who string) *Report {
	t.Helper()
	if v, err := strconv.ParseUint(os.Getenv("REGENT_CRASH_SEED"), 10, 64); err == nil {
		cfg.Seed = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.Cycles)*perCycle+slack)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep.String())
	if rep.Violations() != 0 {
		t.Fatalf("%s broke its promises (data in %s):\n%s", who, cfg.Dir, rep)
	}
	if rep.Acknowledged == 0 || rep.AcksOK["completed"] == 0 || rep.Txns == 0 || rep.DLQEntries == 0 {
		t.Fatalf("the workload did too little to mean anything:\n%s", rep)
	}
	return rep
}

// TestCrashHarnessCatchesUnsafeAcks proves the harness can fail: with the
// log's test hook that acknowledges records before writing them, kill -9
// loses acknowledged pushes and completed acks, and the checks say so. A
// kill finds acknowledged records unwritten about half the time, so runs of
// two cycles are repeated until one is caught (at most 10).
func TestCrashHarnessCatchesUnsafeAcks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a broker process")
	}
	for run := 1; run <= 10; run++ {
		cfg := Config{Binary: binary(t), Dir: t.TempDir(), Cycles: 2, MinUp: 200 * time.Millisecond, MaxUp: 600 * time.Millisecond,
			Env: []string{log.EnvUnsafeAckBeforeWrite + "=1"}}
		rep, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Violations() > 0 {
			t.Logf("caught after %d kills:\n%s", 2*run, rep)
			return
		}
	}
	t.Fatal("20 kills did not notice acknowledgements given before the write")
}
