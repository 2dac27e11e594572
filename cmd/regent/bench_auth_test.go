package main

import (
	"context"
	"testing"
	"time"

	"github.com/regentmq/regent/bench"
	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
)

// bench --auth runs its broker with auth on: a client without the token is
// refused, the harness's token may configure and push.
func TestBenchAuthStartsAClosedBroker(t *testing.T) {
	opts := bench.Options{InProcess: startInProcess}
	if err := benchAuth(&opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, err := opts.InProcess(ctx, "none")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	open, err := client.Dial(ctx, srv.RegentTCP)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if _, err := open.Queue("b").Push(ctx, []byte("x")); protocol.CodeOf(err) != protocol.CodeUnauthenticated {
		t.Errorf("push without the token: %v, want unauthenticated", err)
	}
	c, err := client.Dial(ctx, srv.RegentTCP, client.WithToken(opts.Token))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Configure(ctx, "b", client.DefaultQueueOptions()); err != nil {
		t.Errorf("configure with the harness's token: %v", err)
	}
	if len(opts.ServeEnv) != 1 {
		t.Errorf("ServeEnv %v: want the secret for a child serve", opts.ServeEnv)
	}
}
