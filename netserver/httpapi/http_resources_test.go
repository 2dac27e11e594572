package httpapi

import (
	"testing"

	"github.com/regentmq/regent/engine"
)

// TestPartitionCountsLeaveLostOffsetsOut: offsets lost to journal damage
// (a salvaged start) are neither messages, nor completed, nor pending, on
// either side of the slowest group's cursor; the figures still add up.
func TestPartitionCountsLeaveLostOffsetsOut(t *testing.T) {
	p := &engine.PartitionView{Low: 0, Next: 30, Lost: []engine.OffsetRange{{First: 10, Last: 14}, {First: 29, Last: 29}},
		Groups: []engine.GroupState{{Group: "fast", Cursor: 30}, {Group: "slow", Cursor: 12}}}
	c := partitionCounts(p, 0)
	if c.Total != 24 || c.Completed != 10 || c.Pending != 14 || c.Total != c.Completed+c.Pending+c.Processing {
		t.Fatalf("counts %+v; want total 24 (30 less 6 lost), completed 10 (12 less 2 lost), pending 14", c)
	}
	if n := lostIn(p.Lost, 0, 30); n != 6 {
		t.Fatalf("lostIn the whole partition: %d", n)
	}
}
