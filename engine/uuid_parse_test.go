package engine

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func randUUID(r *rand.Rand) UUID {
	var u UUID
	for i := range u {
		u[i] = byte(r.Uint32())
	}
	return u
}

// checkParseUUID holds ParseUUID (its canonical fast path) to
// parseUUIDLoose, the reading of every form, on s.
// It also holds canonicalUUID to its definition: s is the String of the
// UUID the loose reading gives.
func checkParseUUID(t *testing.T, s string) {
	t.Helper()
	got, gerr := ParseUUID(s)
	want, werr := parseUUIDLoose(s)
	if got != want || (gerr == nil) != (werr == nil) || (gerr != nil && !errors.Is(gerr, ErrBadUUID)) {
		t.Fatalf("ParseUUID(%q) = %x, %v; parseUUIDLoose: %x, %v", s, got[:], gerr, want[:], werr)
	}
	c, ok := canonicalUUID(s)
	if canon := werr == nil && want.String() == s; ok != canon || (ok && c != want) {
		t.Fatalf("canonicalUUID(%q) = %x, %v; want %v", s, c[:], ok, canon)
	}
}

// Every byte value at every position of canonical UUIDs (either case), and
// the forms only the loose reading takes.
func TestParseUUIDFastPathIsLoose(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for n := 0; n < 8; n++ {
		s := randUUID(r).String()
		if n%2 == 1 {
			s = strings.ToUpper(s)
		}
		checkParseUUID(t, s)
		for i := 0; i < len(s); i++ {
			for c := 0; c < 256; c++ {
				b := []byte(s)
				b[i] = byte(c)
				checkParseUUID(t, string(b))
			}
		}
		for _, odd := range []string{
			strings.ReplaceAll(s, "-", ""), s[:35], s + "0", s + "-", "-" + s, s[:8] + s[9:] + "-",
			strings.ReplaceAll(s, "-", "") + "----", s[:35] + "g", " " + s[1:], s[:36-1] + "\x00",
		} {
			checkParseUUID(t, odd)
		}
	}
	for _, s := range []string{"", "-", "not-a-uuid", strings.Repeat("-", 36), strings.Repeat("0", 36), strings.Repeat("f", 1<<20)} {
		checkParseUUID(t, s)
	}
}

func FuzzParseUUID(f *testing.F) {
	f.Add("0190a3f2-7b1c-7d3e-8f40-123456789abc")
	f.Add("0190A3F2-7B1C-7D3E-8F40-123456789ABC")
	f.Add("0190a3f27b1c7d3e8f40123456789abc")
	f.Add("0190a3f2-7b1c-7d3e-8f40-123456789abg")
	f.Fuzz(checkParseUUID)
}
