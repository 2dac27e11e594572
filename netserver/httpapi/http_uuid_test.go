package httpapi

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/regentmq/regent/engine"
)

// checkParseUUID holds parseUUID to engine.ParseUUID on s.
func checkParseUUID(t *testing.T, s string) {
	t.Helper()
	got, gerr := parseUUID(s)
	want, werr := engine.ParseUUID(s)
	if got != want || (gerr == nil) != (werr == nil) || (gerr != nil && !errors.Is(gerr, engine.ErrBadUUID)) {
		t.Fatalf("parseUUID(%q) = %x, %v; engine.ParseUUID: %x, %v", s, got[:], gerr, want[:], werr)
	}
}

// Every byte value at every position of canonical UUIDs (either case), and
// the forms only the engine reads.
func TestParseUUIDIsEngines(t *testing.T) {
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

// A batch's acks read their partitionId and leaseId through a memo of the
// last text: each item must still carry what its own text says, whatever
// the order of repeated, new and broken ids.
func TestAckBatchRepeatedIDs(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	a, b := randUUID(r).String(), randUUID(r).String()
	ids := []string{a, a, b, a, "not-a-uuid", a, strings.ToUpper(a), b, b, strings.ReplaceAll(a, "-", ""), a[:35] + "g", a[:35] + "g", a, a}
	body := `{"consumerGroup":"g","acknowledgments":[`
	for i, pid := range ids {
		lease := ids[len(ids)-1-i]
		if i > 0 {
			body += ","
		}
		body += `{"transactionId":"t` + strconv.Itoa(i) + `","partitionId":"` + pid + `","leaseId":"` + lease + `","status":"completed"}`
	}
	body += "]}"
	for _, pid := range []string{a, b, ""} { // a call's memo starts empty
		c := ackCalls.Get().(*ackCall)
		if pid != "" {
			c.pid.parse([]byte(pid))
		}
		c.release()
	}
	c := ackCalls.Get().(*ackCall)
	defer c.release()
	if msg, err := c.readBatch([]byte(body)); msg != "" || err != nil {
		t.Fatalf("readBatch: %q %v", msg, err)
	}
	k := 0
	for i, pid := range ids {
		lease := ids[len(ids)-1-i]
		wantPid, perr := engine.ParseUUID(pid)
		wantLease, lerr := engine.ParseUUID(lease)
		switch {
		case perr != nil:
			if c.bad[i] != "Message not found: partitionId is not a UUID" {
				t.Errorf("ack %d (%q): bad %q", i, pid, c.bad[i])
			}
		case lerr != nil:
			if c.bad[i] != "Invalid or expired lease: leaseId is not a UUID" {
				t.Errorf("ack %d (lease %q): bad %q", i, lease, c.bad[i])
			}
		default:
			if c.bad[i] != "" {
				t.Fatalf("ack %d refused: %q", i, c.bad[i])
			}
			it := c.items[k]
			k++
			if it.PartitionID != wantPid || it.LeaseID != wantLease {
				t.Errorf("ack %d: partition %v lease %v, want %v %v", i, it.PartitionID, it.LeaseID, wantPid, wantLease)
			}
		}
	}
	if k != len(c.items) || k < 5 {
		t.Fatalf("%d acks checked, %d items", k, len(c.items))
	}
}
