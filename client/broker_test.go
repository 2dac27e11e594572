package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
	"github.com/regentmq/regent/netserver/tcp"
)

// broker is a real Regent for the client's tests and examples: a journal in
// a temp dir, the engine and the TCP server on 127.0.0.1:0.
type broker struct {
	addr string
	stop func()
	srv  *tcp.Server
	e    *engine.Engine
	j    *log.Log
	dir  string
	ecfg engine.Config
}

func startBroker(dir string, ecfg engine.Config, addr ...string) (*broker, error) {
	return startBrokerLog(log.Config{Dir: dir}, ecfg, addr...)
}

func startBrokerLog(lcfg log.Config, ecfg engine.Config, addr ...string) (*broker, error) {
	dir := lcfg.Dir
	j, err := log.Open(lcfg)
	if err != nil {
		return nil, err
	}
	ecfg.SnapshotEveryBytes = -1
	e, err := engine.New(ecfg, j)
	if err != nil {
		j.Close()
		return nil, err
	}
	listen := "127.0.0.1:0"
	if len(addr) > 0 {
		listen = addr[0]
	}
	srv, err := tcp.New(tcp.Config{Addr: listen}, e)
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, err
	}
	b := &broker{addr: srv.Addr().String(), srv: srv, e: e, j: j, dir: dir, ecfg: ecfg}
	b.stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		e.Close()
		j.Close()
	}
	return b, nil
}

func newBroker(t *testing.T, mods ...func(*engine.Config)) *broker {
	t.Helper()
	var cfg engine.Config
	for _, m := range mods {
		m(&cfg)
	}
	b, err := startBroker(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.stop)
	return b
}
