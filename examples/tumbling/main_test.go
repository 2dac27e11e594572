package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
)

// TestTumblingWindowSums runs the example against a fresh broker: the
// windows the event time passed are summed exactly once; a second run
// (the same readings, deduplicated by transactionId, the query registered
// again with its state) prints the same and adds nothing.
func TestTumblingWindowSums(t *testing.T) {
	b := brokertest.Start(t, broker.Options{})
	want := "" +
		"sensor-a  window  0s-10s  sum   6  (3 readings)\n" +
		"sensor-a  window 10s-20s  sum   9  (2 readings)\n" +
		"sensor-b  window  0s-10s  sum  60  (3 readings)\n" +
		"sensor-b  window 10s-20s  sum  40  (1 reading)\n"
	for round := 0; round < 2; round++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var out bytes.Buffer
		err := run(ctx, b.TCPAddr().String(), &out)
		cancel()
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if out.String() != want {
			t.Fatalf("round %d printed:\n%s\nwant:\n%s", round, out.String(), want)
		}
	}
}
