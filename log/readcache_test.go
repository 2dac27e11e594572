package log

import (
	"fmt"
	"strings"
	"testing"
)

// TestEntryCacheServesInterleavedReaders: readers that each want one record
// of every entry, at different places in the log (consumers of different
// partitions), decode each entry once while the entries fit in the slots.
func TestEntryCacheServesInterleavedReaders(t *testing.T) {
	for _, lag := range []int{1, 4} {
		t.Run(fmt.Sprint("lag ", lag), func(t *testing.T) { testEntryCacheServesInterleavedReaders(t, lag) })
	}
}

// testEntryCacheServesInterleavedReaders: reader r is r*lag entries behind
// reader 0.
func testEntryCacheServesInterleavedReaders(t *testing.T, lag int) {
	const readers = 16
	entries := 24 * lag
	data := make([][]byte, entries+1)
	for i := 1; i <= entries; i++ {
		recs := make([]string, readers)
		for r := range recs {
			recs[r] = fmt.Sprintf("entry %d, record %d: %s", i, r, strings.Repeat("text ", 20))
		}
		data[i] = encodeEntry(nil, uint64(i), readers, frameRecords(recs...))
	}
	c := entryCache{budget: DefaultReadCacheBytes}
	read := func(index uint64, rec int) {
		d := c.get(index)
		if d == nil {
			var err error
			if d, err = c.fill(index, data[index], 1<<20); err != nil {
				t.Fatal(err)
			}
		}
		if want := fmt.Sprintf("entry %d, record %d: ", index, rec); !strings.HasPrefix(string(d.record(rec)), want) {
			t.Fatalf("entry %d record %d: %.30q", index, rec, d.record(rec))
		}
	}
	// Reader r is r*lag entries behind reader 0 (its partition lags), and
	// all move forward together.
	for step := 0; step < entries+readers*lag; step++ {
		for r := 0; r < readers; r++ {
			if i := step - r*lag; i >= 0 && i < entries {
				read(uint64(i+1), r)
			}
		}
	}
	if c.decodes != uint64(entries) {
		t.Fatalf("%d decodes for %d entries", c.decodes, entries)
	}
}

// TestEntryCacheBudget: large entries are not all kept; the buffers the
// slots hold stay within the budget (Config.ReadCacheBytes; plus the entry
// just read), the default one and a small one.
func TestEntryCacheBudget(t *testing.T) {
	for _, budget := range []int{DefaultReadCacheBytes, 4 << 20} {
		t.Run(fmt.Sprint(budget>>20, "MiB"), func(t *testing.T) { testEntryCacheBudget(t, budget) })
	}
}

func testEntryCacheBudget(t *testing.T, cacheBudget int) {
	big := strings.Repeat("compressible text ", (3<<20)/18) // 3 MiB decoded
	c := entryCache{budget: cacheBudget}
	maxHeld := 0
	for i := uint64(1); i <= cacheSlots; i++ {
		e := encodeEntry(nil, i, 1, frameRecords(big))
		d, err := c.fill(i, e, 8<<20)
		if err != nil {
			t.Fatal(err)
		}
		if string(d.record(0)) != big {
			t.Fatalf("entry %d does not read back", i)
		}
		held := 0
		for k := range c.slots {
			held += c.slots[k].d.held()
		}
		if held > cacheBudget+len(big)+64 {
			t.Fatalf("after %d entries the slots hold %d bytes (budget %d)", i, held, cacheBudget)
		}
		maxHeld = max(maxHeld, held)
	}
	if maxHeld < cacheBudget-len(big) {
		t.Fatalf("the slots never held more than %d bytes: the budget of %d is not used", maxHeld, cacheBudget)
	}
	if d := c.get(cacheSlots); d == nil {
		t.Fatal("the entry just read was dropped")
	}
}

// TestEntryCacheReusesBuffers: once the budget is full, reading more
// entries reuses the buffers of the least recently used ones: no
// decompression buffer is allocated per entry, though their sizes vary by
// a factor of two (with 1 MiB messages, allocating and zeroing them took a
// fifth of a consume's CPU).
func TestEntryCacheReusesBuffers(t *testing.T) {
	const entries = 400
	data := make([][]byte, entries+1)
	for i := 1; i <= entries; i++ {
		rec := strings.Repeat(fmt.Sprintf("entry %d ", i), 4000+80*(i%50)) // 36 to 72 KiB, compressible
		data[i] = encodeEntry(nil, uint64(i), 1, frameRecords(rec))
		if data[i][entryCodecOff] != codecZstd {
			t.Fatal("the test wants compressed entries")
		}
	}
	c := entryCache{budget: 1 << 20}
	next := 1
	read := func() {
		if _, err := c.fill(uint64(next), data[next], 1<<20); err != nil {
			t.Fatal(err)
		}
		next = next%entries + 1
	}
	for range entries {
		read() // fills the budget
	}
	if allocs := testing.AllocsPerRun(entries, read); allocs > 0.05 {
		t.Fatalf("%.2f allocations per entry read with the budget full", allocs)
	}
	held := 0
	for k := range c.slots {
		held += c.slots[k].d.held()
	}
	if held > c.budget+64<<10 {
		t.Fatalf("the slots hold %d bytes (budget %d)", held, c.budget)
	}
}
