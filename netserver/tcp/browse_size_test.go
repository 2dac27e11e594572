package tcp

import (
	"testing"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/protocol"
)

// TestBrowseWithinTheEngineBudget: what the engine counts for a browsed
// message and gap is at least what the binary protocol encodes for them
// (so a page within the bytes browse gives the engine fits the frame), and
// the numbers of starts and gap reasons are the same on both sides.
func TestBrowseWithinTheEngineBudget(t *testing.T) {
	if protocol.MaxBrowseMessageFixed > engine.MessageOverhead {
		t.Errorf("a browsed message's fixed fields take %d bytes, the engine counts %d", protocol.MaxBrowseMessageFixed, engine.MessageOverhead)
	}
	if protocol.MaxBrowseGapFixed > engine.BrowseGapOverhead {
		t.Errorf("a gap's fixed fields take %d bytes, the engine counts %d", protocol.MaxBrowseGapFixed, engine.BrowseGapOverhead)
	}
	if protocol.BrowseFrom != protocol.BrowseStart(engine.BrowseFrom) || protocol.BrowseLast != protocol.BrowseStart(engine.BrowseLast) {
		t.Error("browse starts differ")
	}
	for _, r := range []engine.GapReason{engine.GapRetention, engine.GapLost, engine.GapUnreadable, engine.GapDeleted} {
		if protocol.GapReason(r).String() != r.String() {
			t.Errorf("gap reason %d: %s on the wire, %s in the engine", r, protocol.GapReason(r), r)
		}
	}
}
