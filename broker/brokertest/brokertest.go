package brokertest

import (
	"testing"
	"time"

	"github.com/regentmq/regent/broker"
)

// ShutdownTimeout is the drain Start gives a broker whose options set none:
// a bound, not a wait (a broker with nothing in flight stops at once), wide
// enough for a final snapshot of a large test queue under the race detector
// on a loaded two-core machine (5 s was not: TestDashboardFollowsPages and
// TestHTTPDLQPagesAreBoundedBySize failed their Exit).
const ShutdownTimeout = 30 * time.Second

// Start builds and starts a broker for t and stops it when t ends (a test
// may stop it sooner with Exit: Exit is idempotent). Zero options take:
// Journal.Dir t.TempDir(), TCPAddr and HTTPAddr "127.0.0.1:0",
// ShutdownTimeout 30 s; the rest as broker.New. A broker that does not start
// fails t at once.
func Start(t testing.TB, opts broker.Options) *broker.Broker {
	t.Helper()
	if opts.Journal.Dir == "" {
		opts.Journal.Dir = t.TempDir()
	}
	if opts.TCPAddr == "" {
		opts.TCPAddr = "127.0.0.1:0"
	}
	if opts.HTTPAddr == "" {
		opts.HTTPAddr = "127.0.0.1:0"
	}
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = ShutdownTimeout
	}
	b, err := broker.New(opts)
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	if err := b.Main(); err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Exit(); err != nil {
			t.Errorf("brokertest: exit: %v", err)
		}
	})
	return b
}

// CheckFor calls f until it returns nil or d has passed, and then fails t
// with the last error f returned. It pauses briefly between calls (10 ms,
// growing to 100 ms), so f may be as costly as a request to the broker.
func CheckFor(t testing.TB, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	pause := 10 * time.Millisecond
	for {
		err := f()
		if err == nil {
			return
		}
		if !time.Now().Before(deadline) {
			t.Fatalf("brokertest: not so after %v: %v", d, err)
			return
		}
		time.Sleep(min(pause, time.Until(deadline)))
		pause = min(2*pause, 100*time.Millisecond)
	}
}
