package httpapi

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/regentmq/regent/engine"
)

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
