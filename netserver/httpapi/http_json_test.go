package httpapi

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestAppendTime(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(2026, 4, 26, 10, 59, 28, 267966000, time.UTC),
		time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 6000, time.FixedZone("x", 3600)),
		time.Unix(0, 1),
	} {
		got := string(appendTime(nil, tm.UnixNano()))
		want := `"` + tm.UTC().Format(timeLayout) + `"`
		if got != want {
			t.Errorf("appendTime(%v) = %s, want %s", tm, got, want)
		}
	}
	if got := string(appendTime(nil, 0)); got != "null" {
		t.Errorf("appendTime(0) = %s", got)
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", `quo"te`, `back\slash`, "nl\n\r\t", "ctl\x01\x1f", "é ü 日本", "bad\xffutf8", "\u2028"} {
		b := appendString(nil, s)
		var back string
		if err := json.Unmarshal(b, &back); err != nil {
			t.Errorf("appendString(%q) = %s: not JSON: %v", s, b, err)
			continue
		}
		want := s
		if s == "bad\xffutf8" {
			want = "bad\ufffdutf8"
		}
		if back != want {
			t.Errorf("appendString(%q) round-trips to %q", s, back)
		}
	}
}

// timeMemo writes what appendTime writes, whatever the order of the
// timestamps: the same second, the next one, back again, across days and
// years, 0, before 1970 and the ends of what Unix nanoseconds hold.
func TestTimeMemoIsAppendTime(t *testing.T) {
	base := time.Date(2026, 12, 31, 23, 59, 58, 999999000, time.UTC).UnixNano()
	ts := []int64{base, base + 1, base + 999, base + 1000, base + 1e9, base, base + 2e9 + 7, base - 1e9, 0, base, -1, -1e9 - 5, base,
		1, 999, 1000, 1e9 - 1, 1e9, math.MaxInt64, math.MaxInt64 - 1e9, math.MinInt64, math.MinInt64 + 1, base, base + 86400e9}
	r := rand.New(rand.NewPCG(9, 10))
	for i := 0; i < 200000; i++ {
		switch i % 4 {
		case 0:
			ts = append(ts, r.Int64())
		case 1:
			ts = append(ts, base+r.Int64N(3e9))
		case 2:
			ts = append(ts, ts[len(ts)-1]+r.Int64N(2e6))
		default:
			ts = append(ts, -r.Int64N(1e12))
		}
	}
	var m timeMemo
	for _, n := range ts {
		if got, want := string(m.appendTime([]byte("x"), n)), string(appendTime([]byte("x"), n)); got != want {
			t.Fatalf("timeMemo.appendTime(%d) = %s, want %s", n, got, want)
		}
	}
}
