package log

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
)

// TestTornCompressedGroupEveryCut: the last entry is a zstd-compressed
// group of twenty records in the second segment of the journal. Cut at every
// byte, or followed by zeros, the journal opens with exactly the entries
// before it: none of the group's records comes back, nothing else is lost.
func TestTornCompressedGroupEveryCut(t *testing.T) {
	dir := t.TempDir()
	l, _ := openT(t, dir, withSegment(8<<10))
	r := rand.New(rand.NewPCG(5, 6))
	var want []string
	for i := 0; i < 30; i++ {
		rec := fmt.Appendf(nil, "single-%d-%s", i, payload(r, 300, false))
		appendWait(t, l, rec)
		want = append(want, string(rec))
	}
	// One group of 20 compressible records, appended while the committer
	// is held back so that they share an entry.
	l.mu.Lock()
	var dones []chan error
	for i := 0; i < 20; i++ {
		ch := make(chan error, 1)
		g := l.open
		g.body = appendRecord(g.body, fmt.Appendf(nil, "grouped-%d-%s", i, payload(r, 40, true)))
		g.dones = append(g.dones, func(err error) { ch <- err })
		g.n++
		dones = append(dones, ch)
	}
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
	for _, ch := range dones {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files := segmentFiles(t, dir)
	if len(files) < 2 {
		t.Fatalf("want several segments, have %d", len(files))
	}
	seg := files[len(files)-1]
	data, _ := os.ReadFile(seg)
	fr := frames(t, data)
	if len(fr) == 0 {
		t.Fatal("the last segment is empty: adjust the sizes")
	}
	last := fr[len(fr)-1]
	if data[last[0]+1+entryCodecOff] != codecZstd && data[last[0]+2+entryCodecOff] != codecZstd {
		t.Fatal("the last entry is not compressed")
	}
	check := func(img []byte, what string) {
		if err := os.WriteFile(seg, img, 0o640); err != nil {
			t.Fatal(err)
		}
		l, _, err := tryOpen(dir, withSegment(8<<10))
		if err != nil {
			t.Fatalf("%s: Open: %v", what, err)
		}
		defer l.Close()
		got, err := replayAll(l, 0)
		if err != nil {
			t.Fatalf("%s: Replay: %v", what, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d records, want %d", what, len(got), len(want))
		}
		for i := range got {
			if got[i].rec != want[i] {
				t.Fatalf("%s: record %d differs", what, i)
			}
		}
	}
	for cut := last[0]; cut < last[1]; cut++ {
		check(data[:cut], fmt.Sprintf("cut at %d of %d..%d", cut, last[0], last[1]))
	}
	for _, z := range []int{1, 3, 17, 4096} {
		check(append(bytes.Clone(data[:last[0]]), make([]byte, z)...), fmt.Sprintf("%d zeros after the whole entries", z))
		check(append(bytes.Clone(data[:(last[0]+last[1])/2]), make([]byte, z)...), fmt.Sprintf("%d zeros after half the entry", z))
	}
}
