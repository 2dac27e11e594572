package netserver_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
	"github.com/regentmq/regent/netserver/internal/testhooks"
	"github.com/regentmq/regent/netserver/tcp"
	"github.com/regentmq/regent/protocol"
)

// Glue for the tests of both doors, copied from netserver/tcp's tests (test
// helpers do not cross packages).

// tcpFixture is a real broker (journal in a temp dir, engine, TCP server on
// 127.0.0.1:0) and a real client.
type tcpFixture struct {
	t   *testing.T
	j   *log.Log
	e   *engine.Engine
	srv *tcp.Server
	c   *client.Client
}

func newTCP(t *testing.T, mods ...func(*tcp.Config)) *tcpFixture {
	t.Helper()
	j, err := log.Open(log.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := tcp.Config{Addr: "127.0.0.1:0", MaxFrameBytes: protocol.DefaultMaxFrame}
	for _, m := range mods {
		m(&cfg)
	}
	// As serve configures it: every message a push accepts fits a reply.
	e, err := engine.New(engine.Config{SnapshotEveryBytes: -1, MaxPopBytes: tcp.PopBytesFor(cfg.MaxFrameBytes)}, j)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := tcp.New(cfg, e)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	f := &tcpFixture{t: t, j: j, e: e, srv: srv}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if f.c, err = client.Dial(ctx, srv.Addr().String()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		e.Close()
		j.Close()
	})
	return f
}

func ctx5(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testhooks.Patience(10*time.Second))
	t.Cleanup(cancel)
	return ctx
}

// expectErrorThenClose reads an error reply with the wanted code and then
// the end of the connection.
func expectErrorThenClose(t *testing.T, nc net.Conn, want protocol.Code) {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	rd := protocol.NewReader(nc, 0)
	fr, err := rd.Next()
	if err != nil && !errors.Is(err, protocol.ErrUnknownOp) { // the reply carries the request's unknown op
		t.Fatalf("no error reply: %v", err)
	}
	var er protocol.ErrorReply
	if !fr.IsError() || er.Decode(fr.Body) != nil || er.Code != want {
		t.Fatalf("reply %+v (code %v), want error %v", fr.Header, er.Code, want)
	}
	var ne *net.OpError
	if _, err := rd.Next(); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.As(err, &ne) {
		t.Fatalf("connection still open after a fatal error: %v", err)
	}
}
