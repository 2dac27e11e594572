package httpapi

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/protocol"
)

// The failed requests of a failover (every request 503 for a second or
// two) are logged one line a second, each saying how many went unlogged
// since the last, not one line each.
func TestFailedRequestsAreLoggedOnceASecond(t *testing.T) {
	var out bytes.Buffer
	l := slog.New(slog.NewTextHandler(&out, nil))
	var f failLog
	t0 := time.Unix(1_800_000_000, 0)
	err := errors.New("shard 3's lead moved")
	for i := range 1000 {
		f.log(l, err, t0.Add(time.Duration(i)*time.Millisecond)) // 1000 failures in 1 s
	}
	f.log(l, err, t0.Add(1500*time.Millisecond))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines for 1001 failures over 1.5 s, want 2:\n%s", len(lines), out.String())
	}
	if strings.Contains(lines[0], "failed_unlogged") || !strings.Contains(lines[1], "failed_unlogged=999") {
		t.Fatalf("the lines do not count the failures left unlogged:\n%s", out.String())
	}
}

// Internal errors (500) are logged each, whatever the 503s around them.
func TestInternalErrorsAreNotDrowned(t *testing.T) {
	var out bytes.Buffer
	s := &Server{log: slog.New(slog.NewTextHandler(&out, nil))}
	for range 100 {
		s.writeErr(httptest.NewRecorder(), protocol.NewError(protocol.CodeUnavailable, "the shard's lead is moving"))
	}
	for range 3 {
		s.writeErr(httptest.NewRecorder(), protocol.NewError(protocol.CodeInternal, "a bug"))
	}
	if n := strings.Count(out.String(), "a bug"); n != 3 {
		t.Fatalf("3 internal errors logged %d times among 100 unavailable:\n%s", n, out.String())
	}
	if n := strings.Count(out.String(), "lead is moving"); n != 1 {
		t.Fatalf("100 unavailable answers within a second logged %d lines, want 1", n)
	}
}
