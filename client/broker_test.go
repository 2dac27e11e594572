package client_test

import (
	"testing"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
)

// regent is a real broker for the client's tests (brokertest.Start): a
// journal in a temp dir, the engine, and its doors on 127.0.0.1:0; addr is
// its TCP door.
type regent struct {
	*broker.Broker
	addr string
}

// startRegent starts a broker with opts for t (stopped when t ends, or
// sooner with Exit). Its engine takes no snapshots by size.
func startRegent(t *testing.T, opts broker.Options) *regent {
	t.Helper()
	opts.Engine.SnapshotEveryBytes = -1
	b := brokertest.Start(t, opts)
	return &regent{Broker: b, addr: b.TCPAddr().String()}
}

// newBroker starts a broker with the default options for t.
func newBroker(t *testing.T) *regent { return startRegent(t, broker.Options{}) }
