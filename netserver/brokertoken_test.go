package netserver

import (
	"context"
	"testing"
	"time"
)

// TestBrokerTokenIsAcceptedAsAdmin: the token a broker mints from the
// cluster's HS256 secret passes the doors' verification with the admin
// level, under a configured issuer, audience and role names; with keys that
// only verify there is none to mint.
func TestBrokerTokenIsAcceptedAsAdmin(t *testing.T) {
	c := AuthConfig{Enabled: true, Secret: []byte("s3cret-s3cret-s3cret"), Issuer: "corp", Audience: "regent",
		RoleClaim: "grant", RoleAdmin: "superuser"}
	src, err := c.BrokerToken("regent-broker/b1")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := src(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAuthenticator(c)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := a.Verify(tok)
	if err != nil {
		t.Fatalf("a broker's token is refused: %v", err)
	}
	if cl.Level() != LevelAdmin || cl.Subject != "regent-broker/b1" {
		t.Fatalf("a broker's token grants %v to %q", cl.Level(), cl.Subject)
	}
	if left := time.Until(cl.Expires); left < BrokerTokenLife-time.Minute || left > BrokerTokenLife+2*time.Minute {
		t.Fatalf("a broker's token expires in %v", left)
	}
	if _, err := (AuthConfig{Enabled: true, Algorithm: "RS256", Secret: []byte("x")}).BrokerToken("b"); err == nil {
		t.Fatal("a token minted for an RS256-only configuration")
	}
	if _, err := (AuthConfig{Enabled: true}).BrokerToken("b"); err == nil {
		t.Fatal("a token minted with no secret")
	}
}
