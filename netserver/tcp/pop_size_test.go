package tcp

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/protocol"
)

// TestPopReplyWithinTheEngineBudget: what the engine counts for a message
// (engine.MessageBytes) is at least what the binary protocol encodes for it,
// and a reply's own fields take at most PopReplyHeaderBytes: so a reply of
// messages within PopBytesFor(frame) fits the frame, for any names up to
// their limit and any payload.
func TestPopReplyWithinTheEngineBudget(t *testing.T) {
	if protocol.MaxMessageFixed > engine.MessageOverhead {
		t.Fatalf("the protocol's fixed fields take %d bytes, the engine counts %d", protocol.MaxMessageFixed, engine.MessageOverhead)
	}
	rnd := rand.New(rand.NewPCG(5, 6))
	name := func() string { return strings.Repeat("n", rnd.IntN(engine.MaxNameBytes+1)) }
	for i := 0; i < 2000; i++ {
		m := engine.Message{ID: engine.UUID{1}, TransactionID: name(), TraceID: name(), Partition: name(),
			Payload: make([]byte, rnd.IntN(1<<17)), Offset: rnd.Uint64(), RetryCount: rnd.IntN(1 << 30),
			CreatedAt: rnd.Int64(), LeaseExpires: rnd.Int64(), LeaseID: engine.UUID{2}, PartitionID: engine.UUID{3}}
		if i%3 == 0 {
			m.TransactionID = "" // the server writes the id's 36 characters
		}
		pm := fromEngineMessage(&m)
		if pm.TransactionID == "" {
			var idText [36]byte
			pm.TransactionID = unsafe.String(&m.ID.Append(idText[:0])[0], len(idText))
		}
		enc := len(protocol.AppendPopMessage(nil, &pm))
		if budget := engine.MessageBytes(len(m.Payload), m.TransactionID, m.TraceID, m.Partition, ""); enc > budget {
			t.Fatalf("a message encodes in %d bytes, the engine counts %d", enc, budget)
		}
		q, g := name(), name()
		dst, start := protocol.AppendPopReplyStart(nil, rnd.Uint64(), q, g, rnd.IntN(1<<20))
		dst = protocol.AppendPopReplyCut(dst)
		if len(dst)-start > protocol.PopReplyHeaderBytes(len(q), len(g)) {
			t.Fatalf("a reply's own fields take %d bytes, PopReplyHeaderBytes says %d", len(dst)-start, protocol.PopReplyHeaderBytes(len(q), len(g)))
		}
	}
}
