package netserver_test

import (
	"testing"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver"
)

// TestEnginePlanePopWaiter: the engine's data plane answers a pop that did
// not park with a nil PopWaiter (not a nil pointer in an interface, which
// a caller would take for a parked pop), and one that parked with a waiter
// that withdraws it.
func TestEnginePlanePopWaiter(t *testing.T) {
	b := brokertest.Start(t, broker.Options{})
	var dp netserver.DataPlane = netserver.EnginePlane{E: b.Engine()}
	answered := make(chan error, 2)
	done := func(_ []engine.Message, _ bool, err error) { answered <- err }
	if pw := dp.PopAsync(engine.PopRequest{Queue: "q"}, done); pw != nil {
		t.Fatalf("a pop that did not wait returned the waiter %#v", pw)
	}
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	pw := dp.PopAsync(engine.PopRequest{Queue: "q", Wait: true}, done)
	if pw == nil {
		t.Fatal("a long poll on an empty queue did not park")
	}
	if !pw.Cancel() {
		t.Fatal("a parked long poll could not be withdrawn")
	}
	select {
	case err := <-answered:
		t.Fatalf("a withdrawn long poll answered (%v)", err)
	default:
	}
}
