package httpapi

import (
	"encoding/json"
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
