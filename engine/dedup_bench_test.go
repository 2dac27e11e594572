package engine

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkDedupMemory measures the heap the duplicate index takes per
// remembered transactionId: 1,000,000 ids inserted, heap after GC.
//
//	go test -run '^$' -bench DedupMemory -benchtime 1x ./engine/
func BenchmarkDedupMemory(b *testing.B) {
	const n = 1_000_000
	for i := 0; i < b.N; i++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		x := &dedupIndex{}
		for k := 0; k < n; k++ {
			x.put(fingerprint(fmt.Sprint("order-", k)), uint64(k), 0)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/id")
		runtime.KeepAlive(x)
	}
}
