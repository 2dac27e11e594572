package tcp_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/netserver/tcp"
	"github.com/regentmq/regent/protocol"
)

var tcpSecret = []byte("tcp-s3cret")

// hs256 signs claims with key (HS256).
func hs256(t *testing.T, key []byte, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// roleToken is a token of role for subject svc-<role>, valid for an hour.
func roleToken(t *testing.T, role string, extra ...any) string {
	c := jwt.MapClaims{"sub": "svc-" + role, "role": role, "exp": time.Now().Add(time.Hour).Unix()}
	for i := 0; i+1 < len(extra); i += 2 {
		c[extra[i].(string)] = extra[i+1]
	}
	return hs256(t, tcpSecret, c)
}

func newAuthTCP(t *testing.T) *tcpFixture {
	return newTCP(t, func(c *tcp.Config) {
		c.Auth = netserver.AuthConfig{Enabled: true, Secret: tcpSecret}
	})
}

// newAuthDoor is newAuthTCP's door alone over its own journal and engine,
// not a broker: TestTCPAuthExpiresOnAnOpenConnection moves the door's auth
// clock (AdvanceAuthClock takes the *tcp.Server), and a broker does not
// lend its doors.
func newAuthDoor(t *testing.T) *tcpFixture {
	t.Helper()
	return newDoor(t, func(c *tcp.Config, _ *engine.Engine) {
		c.Auth = netserver.AuthConfig{Enabled: true, Secret: tcpSecret}
	})
}

// newDoor starts a TCP door alone over its own journal and engine, its
// config adjusted by mod.
func newDoor(t *testing.T, mod func(*tcp.Config, *engine.Engine)) *tcpFixture {
	t.Helper()
	j, err := log.Open(log.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{SnapshotEveryBytes: -1, MaxPopBytes: tcp.PopBytesFor(protocol.DefaultMaxFrame)}, j)
	if err != nil {
		j.Close()
		t.Fatal(err)
	}
	cfg := tcp.Config{Addr: "127.0.0.1:0"}
	mod(&cfg, e)
	srv, err := tcp.New(cfg, e)
	if err == nil {
		err = srv.Start()
	}
	if err != nil {
		e.Close()
		j.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		e.Close()
		j.Close()
	})
	f := &tcpFixture{t: t, addr: srv.Addr().String(), e: e, srv: srv}
	f.c = f.dial()
	t.Cleanup(func() { f.c.Close() })
	return f
}

// tryDial dials with opts and returns the error.
func (f *tcpFixture) tryDial(opts ...client.Option) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return client.Dial(ctx, f.addr, append([]client.Option{client.WithConns(1)}, opts...)...)
}

func wantCode(t *testing.T, what string, err error, code protocol.Code, text string) {
	t.Helper()
	if protocol.CodeOf(err) != code || !strings.Contains(err.Error(), text) {
		t.Errorf("%s: %v, want %s containing %q", what, err, code, text)
	}
}

// Over the binary protocol with auth on: nothing but Hello, Ping and Auth
// without a token; bad, expired and foreign tokens are refused at Dial;
// each role may do what its level allows and no more; pushes carry the
// token's subject.
func TestTCPAuthRoles(t *testing.T) {
	f := newAuthTCP(t) // f.c has no token
	ctx := ctx5(t)
	if _, err := f.c.Queues(ctx); err == nil {
		t.Fatal("queue list without a token")
	} else {
		wantCode(t, "queues without a token", err, protocol.CodeUnauthenticated, "requires a token")
	}
	_, err := f.c.Queue("secure").Push(ctx, []byte("x"))
	wantCode(t, "push without a token", err, protocol.CodeUnauthenticated, "requires a token")
	_, err = f.c.Configure(ctx, "secure", client.DefaultQueueOptions())
	wantCode(t, "configure without a token", err, protocol.CodeUnauthenticated, "")

	// Refused at Dial: the broker answers Auth with unauthenticated.
	for _, c := range []struct{ name, tok, text string }{
		{"garbage", "garbage", "malformed"},
		{"another key", hs256(t, []byte("other"), jwt.MapClaims{"role": "admin"}), "bad signature"},
		{"expired", roleToken(t, "admin", "exp", time.Now().Add(-time.Hour).Unix()), "expired"},
		{"exp a string", roleToken(t, "admin", "exp", "never"), "wrong type"},
		{"not yet", roleToken(t, "admin", "nbf", time.Now().Add(time.Hour).Unix()), "not valid yet"},
		{"issued in the future", roleToken(t, "admin", "iat", time.Now().Add(time.Hour).Unix()), "future"},
		{"alg none", func() string {
			s, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"role": "admin"}).SignedString(jwt.UnsafeAllowNoneSignatureType)
			return s
		}(), "algorithm not accepted"},
	} {
		c2, err := f.tryDial(client.WithToken(c.tok))
		if err == nil {
			c2.Close()
			t.Errorf("%s: Dial accepted the token", c.name)
			continue
		}
		wantCode(t, c.name, err, protocol.CodeUnauthenticated, c.text)
	}

	ro := f.dial(client.WithToken(roleToken(t, "read-only")))
	defer ro.Close()
	if _, err := ro.Queues(ctx); err != nil {
		t.Errorf("read-only lists queues: %v", err)
	}
	_, err = ro.Queue("secure").Push(ctx, []byte("x"))
	wantCode(t, "read-only push", err, protocol.CodeForbidden, "needs read-write")
	_, err = ro.Queue("secure").Group("g").Pop(ctx)
	wantCode(t, "read-only pop", err, protocol.CodeForbidden, "")

	none := f.dial(client.WithToken(roleToken(t, "nobody")))
	defer none.Close()
	_, err = none.Queues(ctx)
	wantCode(t, "a token naming no role", err, protocol.CodeForbidden, "needs read-only")

	rw := f.dial(client.WithToken(roleToken(t, "read-write")))
	defer rw.Close()
	if _, err := rw.Configure(ctx, "secure", client.DefaultQueueOptions()); err != nil {
		t.Fatalf("read-write configures: %v", err)
	}
	if _, err := rw.Queue("secure").Push(ctx, []byte("x")); err != nil {
		t.Fatalf("read-write pushes: %v", err)
	}
	_, err = rw.DeleteQueue(ctx, "secure")
	wantCode(t, "read-write deletes a queue", err, protocol.CodeForbidden, "needs admin")
	msgs, err := f.e.Pop(ctx, engine.PopRequest{Queue: "secure", Group: "auditor", Batch: 10, AutoAck: true})
	if err != nil || len(msgs) != 1 || msgs[0].ProducerSub != "svc-read-write" {
		t.Errorf("the push's producerSub: %+v %v, want svc-read-write", msgs, err)
	}

	admin := f.dial(client.WithToken(hs256(t, tcpSecret, jwt.MapClaims{"sub": "root", "roles": []string{"read-only", "admin"}})))
	defer admin.Close()
	if ok, err := admin.DeleteQueue(ctx, "secure"); err != nil || !ok {
		t.Errorf("admin deletes a queue: %v %v", ok, err)
	}
}

// A token that expires while the connection is open stops authorizing new
// requests: with WithToken they fail with unauthenticated; with a token
// source the client sends a fresh token on the same connection and goes
// on.
func TestTCPAuthExpiresOnAnOpenConnection(t *testing.T) {
	f := newAuthDoor(t)
	ctx := ctx5(t)
	static := f.dial(client.WithConns(1), client.WithToken(roleToken(t, "read-write")))
	defer static.Close()
	var issued int
	src := func(context.Context) (string, error) {
		issued++ // one connection: called from one goroutine at a time
		// The first for an hour, the next for four (past the moved clock).
		return roleToken(t, "read-write", "exp", time.Now().Add(time.Duration(3*issued-2)*time.Hour).Unix()), nil
	}
	renewing := f.dial(client.WithConns(1), client.WithTokenSource(src))
	defer renewing.Close()
	for _, c := range []*client.Client{static, renewing} {
		if _, err := c.Queue("exp").Push(ctx, []byte("before")); err != nil {
			t.Fatalf("push before expiry: %v", err)
		}
	}
	tcp.AdvanceAuthClock(f.srv, 2*time.Hour) // past exp + the 30 s skew
	_, err := static.Queue("exp").Push(ctx, []byte("after"))
	wantCode(t, "push after expiry", err, protocol.CodeUnauthenticated, "expired")
	if _, err := static.Queues(ctx); protocol.CodeOf(err) != protocol.CodeUnauthenticated {
		t.Errorf("queue list after expiry: %v", err)
	}
	if _, err := renewing.Queue("exp").Push(ctx, []byte("after")); err != nil {
		t.Errorf("push with a token source after expiry: %v (tokens issued %d)", err, issued)
	}
	if issued != 2 {
		t.Errorf("token source called %d times, want 2 (dial, renewal)", issued)
	}
	// Only "before" x2 and the renewing client's "after" went in.
	msgs, err := f.e.Pop(ctx, engine.PopRequest{Queue: "exp", Group: "g", Batch: 10, AutoAck: true})
	if err != nil || len(msgs) != 3 {
		t.Errorf("%d messages stored (%v), want 3", len(msgs), err)
	}
}

// A broker with auth off answers Auth as not enforced, and a client with a
// token works as without one.
func TestTCPAuthOffAcceptsTokens(t *testing.T) {
	f := newTCP(t)
	c := f.dial(client.WithToken("anything"))
	defer c.Close()
	if _, err := c.Queue("q").Push(ctx5(t), []byte("x")); err != nil {
		t.Fatal(err)
	}
	var pe *protocol.Error
	if _, err := c.Queues(ctx5(t)); errors.As(err, &pe) {
		t.Fatal(err)
	}
}

// A token source renews the token on the open connection before it
// expires, with no request to prompt it, and the connection goes on
// after the first token's expiry.
func TestTCPAuthTokenSourceRenewsBeforeExpiry(t *testing.T) {
	f := newTCP(t, func(c *tcp.Config) {
		c.Auth = netserver.AuthConfig{Enabled: true, Secret: tcpSecret, ClockSkew: time.Nanosecond}
	})
	var calls atomic.Int32
	first := time.Now().Add(2 * time.Second)
	src := func(context.Context) (string, error) {
		exp := first
		if calls.Add(1) > 1 {
			exp = time.Now().Add(time.Hour)
		}
		return roleToken(t, "read-write", "exp", exp.Unix()), nil
	}
	c := f.dial(client.WithConns(1), client.WithTokenSource(src))
	defer c.Close()
	brokertest.CheckFor(t, 10*time.Second, func() error {
		if n := calls.Load(); n < 2 {
			return fmt.Errorf("the token source was called %d times; want a renewal before the first token expires", n)
		}
		return nil
	})
	time.Sleep(time.Until(time.Unix(first.Unix()+1, 0))) // past the first token's exp (whole seconds)
	if _, err := c.Queue("renewed").Push(ctx5(t), []byte("x")); err != nil {
		t.Fatalf("push after the first token expired: %v", err)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("token source called %d times, want 2 (dial, renewal)", n)
	}
}
