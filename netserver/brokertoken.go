package netserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// BrokerTokenLife is how long a token BrokerToken mints is valid. A
// connection that presents one is made again before it expires (the Raft
// link redials at four fifths of it; a client renews it on the open
// connection).
const BrokerTokenLife = time.Hour

// BrokerToken returns where the brokers of a cluster get the token they
// present to each other's doors when authentication is on: their Raft link
// and their forwarding clients speak the binary protocol like any client.
// With c's HS256 secret, which every broker holds, each call mints a token
// of the admin role for subject (the broker's name), with c's issuer and
// audience; without one (keys that only verify: RS256, EdDSA), there is
// nothing to mint with and the operator gives the token (a broker's
// --link-token), so this fails.
func (c AuthConfig) BrokerToken(subject string) (func(context.Context) (string, error), error) {
	alg := strings.ToUpper(c.Algorithm)
	if len(c.Secret) == 0 || (alg != "" && alg != "AUTO" && alg != "HS256") {
		return nil, errors.New("netserver: the brokers of a cluster present a token to each other, and with no HS256 secret there is none to mint: give one (an admin token the doors accept) to every broker")
	}
	role, roleClaim := c.RoleAdmin, c.RoleClaim
	if role == "" {
		role = "admin"
	}
	if roleClaim == "" {
		roleClaim = "role"
	}
	secret := append([]byte(nil), c.Secret...)
	return func(context.Context) (string, error) {
		now := time.Now()
		claims := jwt.MapClaims{"sub": subject, roleClaim: role, "iat": now.Unix(), "exp": now.Add(BrokerTokenLife).Unix()}
		if c.Issuer != "" {
			claims["iss"] = c.Issuer
		}
		if c.Audience != "" {
			claims["aud"] = c.Audience
		}
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
		if err != nil {
			return "", fmt.Errorf("netserver: minting a broker's token: %w", err)
		}
		return tok, nil
	}, nil
}
