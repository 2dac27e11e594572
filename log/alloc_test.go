//go:build !race

package log

import (
	"bytes"
	"testing"
)

// TestAppendDoesNotAllocate: in steady state an Append allocates nothing (its
// group's buffers are reused); what is left is the committer's per-group
// work, shared by the records of a group.
func TestAppendDoesNotAllocate(t *testing.T) {
	l, _ := openT(t, t.TempDir(), withSync(SyncNone))
	rec := bytes.Repeat([]byte("m"), 128)
	done := func(error) {}
	for i := 0; i < 20000; i++ { // grow the buffers
		if _, err := l.Append(rec, done); err != nil {
			t.Fatal(err)
		}
	}
	avg := testing.AllocsPerRun(20000, func() {
		if _, err := l.Append(rec, done); err != nil {
			t.Fatal(err)
		}
	})
	if avg > 0.05 {
		t.Fatalf("%.3f allocations per Append", avg)
	}
	t.Logf("%.4f allocations per Append (committer included)", avg)
}
