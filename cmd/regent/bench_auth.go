package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/regentmq/regent/bench"
)

// benchAuth turns authentication on in the brokers the harness starts
// (--auth): a fresh HS256 secret for each session, and an admin token for
// the harness's clients (which configure queues). The binary protocol
// checks the token once per connection; HTTP on every request.
func benchAuth(opts *bench.Options) error {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	secret := hex.EncodeToString(b)
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "regent-bench", "role": "admin", "exp": time.Now().Add(24 * time.Hour).Unix(),
	}).SignedString([]byte(secret))
	if err != nil {
		return err
	}
	opts.Token = tok
	opts.ServeEnv = append(opts.ServeEnv, "REGENT_JWT_SECRET="+secret)
	if opts.InProcess != nil {
		opts.InProcess = func(ctx context.Context, sync string) (*bench.Server, error) {
			return startInProcessWith(ctx, sync, security{auth: authHS256(secret)})
		}
	}
	return nil
}
