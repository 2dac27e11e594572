package netserver_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/netserver/internal/testhooks"
	"github.com/regentmq/regent/protocol"
)

// Glue for the tests of both doors. Their brokers are brokertest's.

// dial connects a client to a broker's TCP door, closed when t ends.
func dial(t *testing.T, b *broker.Broker, opts ...client.Option) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, b.TCPAddr().String(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
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
