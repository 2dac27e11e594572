package testhooks

import (
	"sync/atomic"
	"time"
)

// PoisonDecodeBuffers is a test switch (tests alone set it). While it is
// on, every request's decode arena (binary protocol) and body buffer (HTTP)
// is overwritten with 0xA5 once the request is answered and before the
// memory can serve another request, so that a string kept by the engine
// without a copy reads as garbage at once, instead of turning into some
// later request's bytes under load.
var PoisonDecodeBuffers atomic.Bool

// Patience is how long a test waits for something that takes d without the
// race detector: ten times d under it, which slows the broker's work (and
// compressing and copying most of all) several times over.
func Patience(d time.Duration) time.Duration {
	if Race {
		return 10 * d
	}
	return d
}
