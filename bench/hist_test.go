package bench

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistIndexContiguous(t *testing.T) {
	// Every value maps to a bucket whose bounds contain it, and buckets
	// follow each other without gaps.
	prevUpper := int64(-1)
	for i := 0; i < histBuckets-1; i++ {
		up := histUpper(i)
		if up <= prevUpper {
			t.Fatalf("bucket %d upper %d not above previous %d", i, up, prevUpper)
		}
		if got := histIndex(prevUpper + 1); got != i {
			t.Fatalf("value %d: bucket %d, want %d", prevUpper+1, got, i)
		}
		if got := histIndex(up); got != i {
			t.Fatalf("value %d: bucket %d, want %d", up, got, i)
		}
		prevUpper = up
		if up == histMaxValue {
			break
		}
	}
	if got := histIndex(histMaxValue); got >= histBuckets {
		t.Fatalf("max value index %d out of %d buckets", got, histBuckets)
	}
}

func TestHistogramQuantiles(t *testing.T) {
	tests := []struct {
		name   string
		values []int64
		q      float64
		want   int64
	}{
		{"empty", nil, 0.5, 0},
		{"single", []int64{42}, 0.99, 42},
		{"small exact", []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.5, 5},
		{"p0 is min", []int64{300, 100, 200}, 0, 100},
		{"p100 is max", []int64{300, 100, 200}, 1, 300},
		{"clamped to max", []int64{1000, 1000, 1000}, 0.99, 1000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var h Histogram
			for _, v := range tc.values {
				h.Record(v)
			}
			if got := h.Quantile(tc.q); got != tc.want {
				t.Fatalf("Quantile(%v) = %d, want %d", tc.q, got, tc.want)
			}
		})
	}
}

func TestHistogramPrecision(t *testing.T) {
	// Against the exact quantiles of a log-normal-ish sample: never below,
	// at most 1/64 above.
	r := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	vals := make([]int64, 200000)
	for i := range vals {
		v := int64(float64(time.Microsecond) * (1 + r.ExpFloat64()*50) * (1 + 20*float64(r.IntN(2))))
		vals[i] = v
		h.Record(v)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 0.9999} {
		rank := int(float64(len(vals))*q+0.999999) - 1
		exact := vals[rank]
		got := h.Quantile(q)
		if got < exact || float64(got-exact) > float64(exact)/64+1 {
			t.Errorf("q=%v: got %d, exact %d (error %.3f%%)", q, got, exact, 100*float64(got-exact)/float64(exact))
		}
	}
	if h.Max() != vals[len(vals)-1] || h.Min() != vals[0] {
		t.Errorf("min/max %d/%d, want %d/%d", h.Min(), h.Max(), vals[0], vals[len(vals)-1])
	}
}

func TestHistogramMerge(t *testing.T) {
	var a, b, all Histogram
	for i := int64(1); i <= 10000; i++ {
		v := i * 997 % 100003
		if i%2 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
		all.Record(v)
	}
	var m Histogram
	m.Merge(&a)
	m.Merge(&b)
	m.Merge(&Histogram{}) // empty: no effect on min
	if m.Count() != all.Count() || m.Min() != all.Min() || m.Max() != all.Max() || m.Mean() != all.Mean() {
		t.Fatalf("merged %+v, want %+v", m.Summary(), all.Summary())
	}
	for _, q := range []float64{0.5, 0.99, 0.999} {
		if m.Quantile(q) != all.Quantile(q) {
			t.Fatalf("q=%v: merged %d, want %d", q, m.Quantile(q), all.Quantile(q))
		}
	}
}

func TestHistogramNegativeAndHuge(t *testing.T) {
	var h Histogram
	h.Record(-5)
	h.Record(histMaxValue)
	if h.Min() != 0 || h.Max() != histMaxValue || h.Quantile(0.5) != 0 || h.Quantile(0.99) != histMaxValue {
		t.Fatalf("got %+v", h.Summary())
	}
}
