package httpapi_test

import (
	"crypto"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/netserver/httpapi"
)

// signJWT makes a compact JWS for tests.
func signJWT(t *testing.T, alg string, key any, claims obj) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signed := enc(obj{"alg": alg, "typ": "JWT"}) + "." + enc(claims)
	var sig []byte
	switch alg {
	case "HS256":
		m := hmac.New(sha256.New, key.([]byte))
		m.Write([]byte(signed))
		sig = m.Sum(nil)
	case "RS256":
		sum := sha256.Sum256([]byte(signed))
		var err error
		if sig, err = rsa.SignPKCS1v15(rand.Reader, key.(*rsa.PrivateKey), crypto.SHA256, sum[:]); err != nil {
			t.Fatal(err)
		}
	case "EdDSA":
		sig = ed25519.Sign(key.(ed25519.PrivateKey), []byte(signed))
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func claims(role string, extra ...any) obj {
	c := obj{"sub": "svc-" + role, "role": role, "exp": time.Now().Add(time.Hour).Unix()}
	for i := 0; i+1 < len(extra); i += 2 {
		c[extra[i].(string)] = extra[i+1]
	}
	return c
}

func TestHTTPAuthHS256(t *testing.T) {
	secret := []byte("s3cret")
	h := newHarness(t, func(c *httpapi.Config, _ *engineConfig) {
		c.Auth = netserver.AuthConfig{Enabled: true, Secret: secret, Issuer: "regent-tests", Audience: "queen"}
	})
	tok := func(role string, extra ...any) string {
		return signJWT(t, "HS256", secret, claims(role, append([]any{"iss", "regent-tests", "aud", []string{"x", "queen"}}, extra...)...))
	}
	expect := func(token, method, path string, body any, want int, wantErr string) {
		t.Helper()
		h.token = token
		code, b := h.do(method, path, body)
		if code != want || (wantErr != "" && !strings.Contains(string(b), wantErr)) {
			t.Errorf("%s %s with %.20q: %d %s, want %d %q", method, path, token, code, b, want, wantErr)
		}
	}
	push := obj{"items": []obj{{"queue": "secure", "payload": 1, "producerSub": "forged"}}}
	// Public routes need no token.
	expect("", "GET", "/health", nil, 200, "")
	expect("", "GET", "/metrics/prometheus", nil, 200, "")
	// No token, a bad one, an expired one, a wrong issuer: 401.
	expect("", "POST", "/api/v1/push", push, 401, "Authentication required")
	expect("garbage", "POST", "/api/v1/push", push, 401, "Invalid token")
	expect(tok("admin")+"x", "POST", "/api/v1/push", push, 401, "bad signature")
	expect(signJWT(t, "HS256", []byte("other"), claims("admin")), "POST", "/api/v1/push", push, 401, "bad signature")
	expect(tok("admin", "exp", time.Now().Add(-time.Hour).Unix()), "POST", "/api/v1/push", push, 401, "expired")
	// An exp that is not a number (the hand-written verifier skipped it and
	// took the token), an iat in the future, a bad iss type.
	expect(tok("admin", "exp", "2099-01-01"), "POST", "/api/v1/push", push, 401, "wrong type")
	expect(tok("admin", "exp", obj{"t": 1}), "POST", "/api/v1/push", push, 401, "wrong type")
	expect(tok("admin", "iat", time.Now().Add(time.Hour).Unix()), "POST", "/api/v1/push", push, 401, "future")
	expect(tok("read-only", "exp", time.Now().Add(-10*time.Second).Unix()), "GET", "/api/v1/resources/queues", nil, 200, "") // within the 30 s skew
	expect(tok("admin", "nbf", time.Now().Add(time.Hour).Unix()), "POST", "/api/v1/push", push, 401, "not valid yet")
	expect(tok("admin", "iss", "someone"), "POST", "/api/v1/push", push, 401, "issuer")
	expect(tok("admin", "aud", "other"), "POST", "/api/v1/push", push, 401, "audience")
	// Roles: read-only reads, read-write writes, admin administers.
	expect(tok("read-only"), "POST", "/api/v1/push", push, 403, "Insufficient permissions")
	expect(tok("read-only"), "GET", "/api/v1/resources/queues", nil, 200, "")
	expect(tok("nobody"), "GET", "/api/v1/resources/queues", nil, 403, "")
	expect(tok("read-write"), "POST", "/api/v1/push", push, 201, "")
	// The token's sub is stamped on the message; the body's producerSub is ignored.
	expect(tok("read-write"), "GET", "/api/v1/pop/queue/secure", nil, 200, `"producerSub":"svc-read-write"`)
	expect(tok("read-write"), "DELETE", "/api/v1/resources/queues/secure", nil, 403, "")
	expect(tok("read-write"), "POST", "/api/v1/system/maintenance/pop", obj{"enabled": false}, 403, "")
	expect(tok("", "roles", []string{"read-only", "admin"}), "DELETE", "/api/v1/resources/queues/secure", nil, 200, "")
	// The Bearer prefix is case-insensitive and may be left out.
	h.token = ""
	for _, hdr := range []string{"BEARER " + tok("read-only"), "bearer " + tok("read-only"), tok("read-only")} {
		req, _ := http.NewRequest("GET", h.url+"/api/v1/dlq", nil)
		req.Header.Set("Authorization", hdr)
		resp, err := h.c.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("Authorization %.12q: %v %v", hdr, resp, err)
			continue
		}
		resp.Body.Close()
	}
	// Preflights pass without a token.
	req, _ := http.NewRequest("OPTIONS", h.url+"/api/v1/push", nil)
	if resp, err := h.c.Do(req); err != nil || resp.StatusCode != 204 {
		t.Errorf("preflight with auth on: %v %v", resp, err)
	}
	// An algorithm that is not configured is refused.
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	expect(signJWT(t, "EdDSA", edKey, claims("admin")), "GET", "/api/v1/dlq", nil, 401, "not accepted")
	expect(signJWT(t, "none", []byte{}, claims("admin")), "GET", "/api/v1/dlq", nil, 401, "not accepted")
}

// A JWKS file's keys verify tokens by kid; an HS256 token signed with the
// public key's bytes as its secret (algorithm confusion) is refused; with
// MetricsAuth, /metrics wants a token.
func TestHTTPAuthKeyFiles(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	edPub, edKey, _ := ed25519.GenerateKey(rand.Reader)
	e := big.NewInt(int64(rsaKey.E)).Bytes()
	jwks := fmt.Sprintf(`{"keys":[{"kty":"RSA","kid":"r1","use":"sig","n":%q,"e":%q},{"kty":"OKP","crv":"Ed25519","kid":"e1","x":%q}]}`,
		base64.RawURLEncoding.EncodeToString(rsaKey.N.Bytes()), base64.RawURLEncoding.EncodeToString(e), base64.RawURLEncoding.EncodeToString(edPub))
	pub, set, err := netserver.ParseKeyFile([]byte(jwks))
	if err != nil || pub != nil || len(set) != 2 {
		t.Fatalf("netserver.ParseKeyFile(JWKS): %v %v %v", pub, set, err)
	}
	h := newHarness(t, func(hc *httpapi.Config, _ *engineConfig) {
		hc.Auth = netserver.AuthConfig{Enabled: true, KeySet: set, MetricsAuth: true}
	})
	withKid := func(alg, kid string, key any, c obj) string {
		t.Helper()
		tok := signJWT(t, alg, key, c)
		// Re-sign with a kid header.
		hdr := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf(`{"alg":%q,"typ":"JWT","kid":%q}`, alg, kid)))
		parts := strings.SplitN(tok, ".", 3)
		signed := hdr + "." + parts[1]
		return signWith(t, alg, key, signed)
	}
	for _, c := range []struct {
		name, tok string
		want      int
	}{
		{"RS256 r1", withKid("RS256", "r1", rsaKey, claims("read-only")), 200},
		{"EdDSA e1", withKid("EdDSA", "e1", edKey, claims("read-only")), 200},
		{"RS256 with the Ed25519 kid", withKid("RS256", "e1", rsaKey, claims("read-only")), 401},
		{"unknown kid", withKid("RS256", "zz", rsaKey, claims("read-only")), 401},
		{"HS256 with the public key as secret", signJWT(t, "HS256", x509.MarshalPKCS1PublicKey(&rsaKey.PublicKey), claims("admin")), 401},
		{"no token on /metrics", "", 401},
	} {
		h.token = c.tok
		if code, b := h.do("GET", "/metrics", nil); code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, code, b, c.want)
		}
	}
	h.token = ""
	if code, _ := h.do("GET", "/health", nil); code != 200 {
		t.Errorf("/health with MetricsAuth: %d", code)
	}
	der, _ := x509.MarshalPKIXPublicKey(edPub)
	if pub, set, err := netserver.ParseKeyFile(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})); err != nil || set != nil || pub == nil {
		t.Errorf("netserver.ParseKeyFile(PEM): %v %v %v", pub, set, err)
	}
	for _, bad := range []string{`{"keys":[]}`, `{"keys":[{"kty":"OKP","crv":"X25519","x":"AA"}]}`, `{nope`} {
		if _, _, err := netserver.ParseKeyFile([]byte(bad)); err == nil {
			t.Errorf("netserver.ParseKeyFile(%s) accepted", bad)
		}
	}
}

// signWith signs an already encoded header.claims.
func signWith(t *testing.T, alg string, key any, signed string) string {
	t.Helper()
	var sig []byte
	switch alg {
	case "RS256":
		sum := sha256.Sum256([]byte(signed))
		var err error
		if sig, err = rsa.SignPKCS1v15(rand.Reader, key.(*rsa.PrivateKey), crypto.SHA256, sum[:]); err != nil {
			t.Fatal(err)
		}
	case "EdDSA":
		sig = ed25519.Sign(key.(ed25519.PrivateKey), []byte(signed))
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func TestHTTPAuthPublicKeys(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	edPub, edKey, _ := ed25519.GenerateKey(rand.Reader)
	for _, c := range []struct {
		alg  string
		pub  any
		priv any
	}{
		{"RS256", &rsaKey.PublicKey, rsaKey},
		{"EdDSA", edPub, edKey},
	} {
		t.Run(c.alg, func(t *testing.T) {
			der, err := x509.MarshalPKIXPublicKey(c.pub)
			if err != nil {
				t.Fatal(err)
			}
			pub, err := netserver.ParsePublicKeyPEM(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
			if err != nil {
				t.Fatal(err)
			}
			h := newHarness(t, func(hc *httpapi.Config, _ *engineConfig) {
				hc.Auth = netserver.AuthConfig{Enabled: true, Algorithm: c.alg, PublicKey: pub}
			})
			h.token = signJWT(t, c.alg, c.priv, claims("read-write"))
			if code, b := h.do("POST", "/api/v1/push", obj{"items": []obj{{"queue": "k", "payload": 1}}}); code != 201 {
				t.Errorf("push: %d %s", code, b)
			}
			h.token = signJWT(t, "HS256", []byte("guess"), claims("admin"))
			if code, _ := h.do("GET", "/api/v1/dlq", nil); code != 401 {
				t.Errorf("HS256 token against a %s server: %d", c.alg, code)
			}
		})
	}
	if _, err := httpapi.New(httpapi.Config{Auth: netserver.AuthConfig{Enabled: true}}, nil); err == nil {
		t.Error("New without an engine")
	}
	h := newHarness(t)
	for _, ac := range []netserver.AuthConfig{
		{Enabled: true},
		{Enabled: true, Algorithm: "RS256", Secret: []byte("x")},
		{Enabled: true, Algorithm: "ES256", Secret: []byte("x")},
		{Enabled: true, PublicKey: "not a key"},
	} {
		if _, err := httpapi.New(httpapi.Config{Auth: ac}, h.e); err == nil {
			t.Errorf("New accepted %+v", ac)
		}
	}
	if _, err := netserver.ParsePublicKeyPEM([]byte("nope")); err == nil {
		t.Error("ParsePublicKeyPEM accepted garbage")
	}
}
