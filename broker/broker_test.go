package broker_test

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
)

func options(dir string) broker.Options {
	return broker.Options{Journal: log.Config{Dir: dir}, TCPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		ShutdownTimeout: 5 * time.Second}
}

// TestLifecycle: New listens on nothing, Main opens both doors, Exit
// closes everything (the data directory can be opened again) and does not
// tell of a dead door; a second Exit answers the first one's result.
func TestLifecycle(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.New(options(dir))
	if err != nil {
		t.Fatal(err)
	}
	if b.TCPAddr() != nil || b.HTTPAddr() != nil || b.Healthy() == nil {
		t.Fatalf("before Main: tcp %v, http %v, healthy %v", b.TCPAddr(), b.HTTPAddr(), b.Healthy())
	}
	if b.Engine() == nil || b.Journal() == nil {
		t.Fatal("no engine or journal")
	}
	if err := b.Main(); err != nil {
		t.Fatal(err)
	}
	if err := b.Main(); err == nil {
		t.Fatal("a second Main was accepted")
	}
	for _, a := range []net.Addr{b.TCPAddr(), b.HTTPAddr()} {
		c, err := net.Dial("tcp", a.String())
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	if err := b.Healthy(); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", b.TCPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	brokertest.CheckFor(t, 5*time.Second, func() error {
		if n := b.TCPConnections(); n != 1 {
			return fmt.Errorf("%d TCP connections, want 1", n)
		}
		return nil
	})
	c.Close()
	if err := b.Exit(); err != nil {
		t.Fatal(err)
	}
	if err := b.Exit(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-b.Died():
		t.Fatalf("Exit told of a dead door: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	// The journal is closed: its directory lock is free again.
	b2 := brokertest.Start(t, options(dir))
	if b2.Engine() == nil {
		t.Fatal("no engine")
	}
}

// TestMainFailsOnABusyPort: a door that cannot listen fails Main, which
// closes the broker (the journal's lock is released).
func TestMainFailsOnABusyPort(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	for _, door := range []string{"tcp", "http"} {
		o := options(dir)
		if door == "tcp" {
			o.TCPAddr = busy.Addr().String()
		} else {
			o.HTTPAddr = busy.Addr().String()
		}
		b, err := broker.New(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Main(); err == nil {
			t.Fatalf("%s door on a busy port: Main succeeded", door)
		}
		if err := b.Exit(); err != nil {
			t.Fatalf("Exit after a failed Main: %v", err)
		}
	}
	brokertest.Start(t, options(dir))
}

// TestNewRefusesALockedDirectory: a second broker on a data directory in
// use does not start, and the first one is unharmed.
func TestNewRefusesALockedDirectory(t *testing.T) {
	dir := t.TempDir()
	b := brokertest.Start(t, options(dir))
	if _, err := broker.New(options(dir)); err == nil {
		t.Fatal("a second broker opened the same directory")
	}
	if err := b.Healthy(); err != nil {
		t.Fatal(err)
	}
}

func TestDoorErrorText(t *testing.T) {
	inner := errors.New("accept: too many open files")
	var err error = &broker.DoorError{Door: "tcp", Err: inner}
	if err.Error() != inner.Error() || !errors.Is(err, inner) {
		t.Fatalf("%v does not read or unwrap as %v", err, inner)
	}
}

// TestExitDuringMain: Exit and Main from two goroutines: whichever comes
// first, the broker ends closed (its directory opens again), and a Main
// after Exit is refused.
func TestExitDuringMain(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 3; i++ {
		b, err := broker.New(options(dir))
		if err != nil {
			t.Fatal(err)
		}
		started := make(chan error, 1)
		go func() { started <- b.Main() }()
		if err := b.Exit(); err != nil {
			t.Fatal(err)
		}
		<-started
		if err := b.Main(); err == nil {
			t.Fatal("Main after Exit was accepted")
		}
	}
	brokertest.Start(t, options(dir))
}

// TestTuneAndWrapJournal: TuneTCP's frame size sets the engine's pop
// budget (and so the largest payload), TuneHTTP reaches the HTTP door, and
// the engine writes through WrapJournal's journal while Journal returns the
// real one.
func TestTuneAndWrapJournal(t *testing.T) {
	const frame = 64 << 10
	var tunedHTTP bool
	var wrapped *log.Log
	o := options(t.TempDir())
	o.TuneTCP = func(c *broker.TCPConfig) { c.MaxFrameBytes = frame }
	o.TuneHTTP = func(c *broker.HTTPConfig) { tunedHTTP = true; c.MaxBodyBytes = 1 << 10 }
	o.WrapJournal = func(j *log.Log) engine.Journal { wrapped = j; return j }
	b := brokertest.Start(t, o)
	if max := b.Engine().MaxPayloadBytes(); max <= 0 || max >= frame {
		t.Fatalf("largest payload %d with a %d-byte frame", max, frame)
	}
	if !tunedHTTP {
		t.Fatal("TuneHTTP was not called")
	}
	if wrapped == nil || wrapped != b.Journal() {
		t.Fatalf("WrapJournal got %p, Journal is %p", wrapped, b.Journal())
	}
}
