package client

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/regentmq/regent/protocol"
)

// TokenSource returns the token (a JWT) to send to the broker. A Client
// calls it for every new connection, and again on an open connection
// before the token the broker accepted expires (when the broker said it
// does): return a fresh token there. It must be safe for concurrent use.
type TokenSource func(ctx context.Context) (string, error)

// WithToken authenticates every connection with tok (a JWT, the bearer
// token of the HTTP API). The broker checks it once per connection; an
// operation its role does not allow fails with protocol.CodeForbidden, and
// one after the token expired with protocol.CodeUnauthenticated. For tokens
// that expire while the client runs, use WithTokenSource. A broker older
// than protocol 1.2 has no authentication (it lets every client do
// everything): the client goes on without sending the token.
func WithToken(tok string) Option {
	return func(o *options) {
		o.token = func(context.Context) (string, error) { return tok, nil }
		o.renew = false
	}
}

// WithTokenSource authenticates every connection with a token from src, and
// renews it on open connections before it expires: at four fifths of the
// time the broker gave it, again a few seconds later while src fails.
func WithTokenSource(src TokenSource) Option {
	return func(o *options) { o.token, o.renew = src, true }
}

// helloAuth sends the connection's first token, synchronously after Hello
// (before the pipeline starts), and returns the broker's answer (nil when
// there is no token or the broker predates 1.2).
func helloAuth(ctx context.Context, nc net.Conn, rd *protocol.Reader, o *options, minor uint16) (*protocol.AuthReply, error) {
	if o.token == nil || minor < 2 {
		return nil, nil
	}
	tok, err := o.token(ctx)
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	if _, err := nc.Write(protocol.AppendAuthRequest(nil, 0, &protocol.AuthRequest{Token: tok})); err != nil {
		return nil, err
	}
	f, err := rd.Next()
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	if f.IsError() {
		var er protocol.ErrorReply
		if err := er.Decode(f.Body); err != nil {
			return nil, fmt.Errorf("auth: %w", err)
		}
		return nil, er.Err()
	}
	var ar protocol.AuthReply
	if err := ar.Decode(f.Body); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	ar.Detach()
	return &ar, nil
}

// renewLoop sends a fresh token on the connection before the one the
// broker holds expires, until the connection ends.
func (c *conn) renewLoop(src TokenSource, expires int64) {
	for expires != 0 {
		left := time.Until(time.Unix(0, expires))
		wait := left * 4 / 5
		t := time.NewTimer(wait)
		select {
		case <-c.closed:
			t.Stop()
			return
		case <-t.C:
		}
		next, err := c.reauth(context.Background(), src)
		for err != nil {
			// Try again a few seconds later, while the old token lasts
			// (after it, requests fail with unauthenticated and Client.do
			// tries once more itself).
			left = time.Until(time.Unix(0, expires))
			if left <= 0 {
				left = 5 * time.Second
			}
			t := time.NewTimer(min(5*time.Second, left/2+time.Millisecond))
			select {
			case <-c.closed:
				t.Stop()
				return
			case <-t.C:
			}
			next, err = c.reauth(context.Background(), src)
		}
		expires = next
	}
}

// reauth sends a token from src on the open connection (ordered with the
// requests around it) and returns the new expiry.
func (c *conn) reauth(ctx context.Context, src TokenSource) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tok, err := src(ctx)
	if err != nil {
		return 0, err
	}
	var ar protocol.AuthReply
	err = c.do(ctx, protocol.OpAuth, func(dst []byte, id uint64) []byte {
		return protocol.AppendAuthRequest(dst, id, &protocol.AuthRequest{Token: tok})
	}, &ar)
	return ar.Expires, err
}
