package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
	"github.com/regentmq/regent/netserver/internal/testhooks"
)

// fillPartitions pushes one message into each of n partitions of queue (in
// pushes of 1,000), then pops one with group g so that every partition has
// the group's cursor.
func fillPartitions(t testing.TB, e *engine.Engine, queue string, n int) {
	t.Helper()
	items := make([]engine.PushItem, 0, 1000)
	payload := []byte(`{"n":1}`)
	for i := 0; i < n; i += len(items) {
		items = items[:0]
		for k := i; k < min(i+1000, n); k++ {
			items = append(items, engine.PushItem{Queue: queue, Partition: "partition-" + strconv.Itoa(k), Payload: payload})
		}
		if _, err := e.Push(context.Background(), items); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Pop(context.Background(), engine.PopRequest{Queue: queue, Group: "g", Batch: 1}); err != nil {
		t.Fatal(err)
	}
}

// memSampler follows the Go heap (objects, live and not yet swept) and the
// process's resident set while requests run, and keeps their peaks.
type memSampler struct {
	stop           chan struct{}
	done           sync.WaitGroup
	mu             sync.Mutex
	peakHeap, peak uint64 // heap objects, RSS
}

var heapSample = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/allocs:bytes"}}

func readHeap() (objects, allocs uint64) {
	s := append([]metrics.Sample(nil), heapSample...)
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// rssBytes is the process's resident set (VmRSS), 0 where /proc is not.
func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func startSampler() *memSampler {
	m := &memSampler{stop: make(chan struct{})}
	m.done.Add(1)
	go func() {
		defer m.done.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			h, _ := readHeap()
			r := rssBytes()
			m.mu.Lock()
			m.peakHeap, m.peak = max(m.peakHeap, h), max(m.peak, r)
			m.mu.Unlock()
			select {
			case <-m.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

func (m *memSampler) end() (peakHeap, peakRSS uint64) {
	close(m.stop)
	m.done.Wait()
	return m.peakHeap, m.peak
}

const mib = 1 << 20

// TestQueueViewsOfAHugeQueueAreBounded: eight concurrent views of a queue
// of 200,000 partitions over HTTP keep the Go heap (and the resident set)
// within 64 MiB of where they started, for the queue's resource view and
// for every other route that reads a queue's partitions. Each answer is a
// page; its sums are read one partition at a time. Before pages, each
// resource view was the whole queue (58 MB of JSON for 200,000 partitions)
// and eight of them grew the heap by 1.5 GiB.
//
// REGENT_PARTITIONS sets the partitions (default 200,000; 20,000 with
// -short).
func TestQueueViewsOfAHugeQueueAreBounded(t *testing.T) {
	if testhooks.Race {
		t.Skip("heap bounds mean nothing under the race detector: sync.Pool drops pooled buffers at random")
	}
	n := 200_000
	if testing.Short() {
		n = 20_000
	}
	if s := os.Getenv("REGENT_PARTITIONS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	h := newHarnessLog(t, log.Config{Sync: log.SyncNone})
	start := time.Now()
	fillPartitions(t, h.e, "huge", n)
	t.Logf("%d partitions made in %v", n, time.Since(start).Round(time.Millisecond))

	get := func(path string) (int, int64, error) {
		resp, err := h.c.Get(h.url + path)
		if err != nil {
			return 0, 0, err
		}
		defer resp.Body.Close()
		nb, err := io.Copy(io.Discard, resp.Body) // the client keeps nothing
		return resp.StatusCode, nb, err
	}
	for _, path := range []string{
		"/api/v1/resources/queues/huge", // the one of the issue: first
		"/api/v1/status/queues/huge",
		"/api/v1/dashboard/queues/huge",
		"/api/v1/consumer-groups/g",
		"/api/v1/consumer-groups/lagging?minLagSeconds=0",
		"/api/v1/resources/overview",
		"/api/v1/messages?queue=huge",
	} {
		t.Run(strings.TrimPrefix(path, "/api/v1/"), func(t *testing.T) {
			// One view first, outside the measure (it warms what every
			// request uses once: the connection pool, the encoder's caches).
			if code, _, err := get(path); code != 200 || err != nil {
				t.Fatalf("warm-up: %d %v", code, err)
			}
			runtime.GC()
			runtime.GC()
			heap0, allocs0 := readHeap()
			rss0 := rssBytes()
			smp := startSampler()
			const views = 8
			var wg sync.WaitGroup
			sizes := make([]int64, views)
			errs := make([]error, views)
			took := time.Now()
			for i := 0; i < views; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					code, nb, err := get(path)
					if err == nil && code != 200 {
						err = fmt.Errorf("status %d", code)
					}
					sizes[i], errs[i] = nb, err
				}(i)
			}
			wg.Wait()
			elapsed := time.Since(took)
			peakHeap, peakRSS := smp.end()
			_, allocs1 := readHeap()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			heapGrowth := int64(peakHeap) - int64(heap0)
			rssGrowth := int64(peakRSS) - int64(rss0)
			t.Logf("%d concurrent GET %s over %d partitions in %v: answers of %d bytes; Go heap %.1f MiB before, peak %+.1f MiB; RSS %.1f MiB before, peak %+.1f MiB; %.2f MiB allocated per request",
				views, path, n, elapsed.Round(time.Millisecond), sizes[0], float64(heap0)/mib, float64(heapGrowth)/mib,
				float64(rss0)/mib, float64(rssGrowth)/mib, float64(allocs1-allocs0)/views/mib)
			if heapGrowth > 64*mib {
				t.Errorf("the Go heap grew by %.1f MiB during %d requests (bound 64 MiB)", float64(heapGrowth)/mib, views)
			}
			if rss0 > 0 && rssGrowth > 64*mib {
				t.Errorf("the resident set grew by %.1f MiB during %d requests (bound 64 MiB)", float64(rssGrowth)/mib, views)
			}
		})
	}
}
