package bench

import (
	"math"
	"math/bits"
	"time"
)

// Histogram is a log-linear histogram of non-negative int64 values
// (nanoseconds here), in the style of HdrHistogram: values below 128 are
// counted exactly; above, each power of two is split into 64 equal
// sub-buckets, so a bucket's width is at most 1/64 of its lower bound.
// Quantiles answer the bucket's upper bound (never below the true value,
// at most 1.6% above it), clamped to the largest value recorded.
//
// The zero value is ready to use. It is not safe for concurrent use: keep
// one per goroutine and Merge them.
type Histogram struct {
	counts   [histBuckets]uint64
	n        uint64
	sum      float64
	min, max int64
}

const (
	histSubBits  = 7
	histHalf     = 1 << (histSubBits - 1) // 64 sub-buckets per power of two
	histBuckets  = (64-histSubBits)*histHalf + 2*histHalf
	histMaxValue = math.MaxInt64
)

// histIndex maps a value to its bucket.
func histIndex(v int64) int {
	if v < 0 {
		v = 0
	}
	u := uint64(v)
	if u < 2*histHalf {
		return int(u)
	}
	e := bits.Len64(u) - histSubBits
	return e*histHalf + int(u>>e)
}

// histUpper is the largest value that maps to bucket i.
func histUpper(i int) int64 {
	if i < 2*histHalf {
		return int64(i)
	}
	e := i/histHalf - 1
	sub := uint64(i - e*histHalf)
	up := (sub+1)<<e - 1
	if up > histMaxValue {
		return histMaxValue
	}
	return int64(up)
}

// Record adds one value.
func (h *Histogram) Record(v int64) {
	if v < 0 {
		v = 0
	}
	h.counts[histIndex(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
}

// RecordDuration adds one duration.
func (h *Histogram) RecordDuration(d time.Duration) { h.Record(int64(d)) }

// Merge adds every value of o.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	h.sum += o.sum
}

// Count is the number of values recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Max is the largest value recorded (0 when empty).
func (h *Histogram) Max() int64 { return h.max }

// Min is the smallest value recorded (0 when empty).
func (h *Histogram) Min() int64 { return h.min }

// Mean is the exact mean of the values recorded.
func (h *Histogram) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// Quantile answers the value below or at which a fraction q (0..1) of the
// values lie: the upper bound of the bucket holding the value of rank
// ceil(q·n), clamped to [Min, Max]. It is 0 when the histogram is empty.
func (h *Histogram) Quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	if q <= 0 {
		return h.min
	}
	if q >= 1 {
		return h.max
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank == 0 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(max(histUpper(i), h.min), h.max)
		}
	}
	return h.max
}

// Latency is a histogram's summary, in nanoseconds, as results carry it.
type Latency struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean_ns"`
	P50   int64   `json:"p50_ns"`
	P99   int64   `json:"p99_ns"`
	P999  int64   `json:"p999_ns"`
	Max   int64   `json:"max_ns"`
}

// Summary reads the figures that results carry.
func (h *Histogram) Summary() Latency {
	return Latency{Count: h.n, Mean: h.Mean(), P50: h.Quantile(0.50), P99: h.Quantile(0.99), P999: h.Quantile(0.999), Max: h.max}
}
