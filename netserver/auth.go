package netserver

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/regentmq/regent/engine"
)

// AuthConfig turns on JWT authentication like Queen's (off by default).
// When on, every route but the public ones (/health, /metrics,
// /metrics/prometheus) and SkipPaths needs "Authorization: Bearer <jwt>"
// (the prefix is case-insensitive and may be left out) whose role grants
// the route's level: read-only < read-write < admin.
type AuthConfig struct {
	Enabled bool
	// Algorithm accepted: "HS256", "RS256", "EdDSA", or "auto" (the
	// default): any of them whose key is configured.
	Algorithm string
	// Secret is the HS256 key.
	Secret []byte
	// PublicKey verifies RS256 (*rsa.PublicKey) or EdDSA
	// (ed25519.PublicKey) tokens; ParsePublicKeyPEM reads one.
	PublicKey crypto.PublicKey
	// Issuer and Audience, when set, must match the iss and aud claims.
	Issuer, Audience string
	// ClockSkew is the leeway on exp and nbf; default 30 s.
	ClockSkew time.Duration
	// SkipPaths are paths served without a token; default /health,
	// /metrics/prometheus, /metrics and /.
	SkipPaths []string
	// RoleClaim names the claim holding one role (default "role"),
	// RolesClaim the claim holding an array of roles (default "roles").
	RoleClaim, RolesClaim string
	// Role names; defaults "admin", "read-write", "read-only".
	RoleAdmin, RoleReadWrite, RoleReadOnly string
}

// ParsePublicKeyPEM reads an RSA or Ed25519 public key (PKIX "PUBLIC KEY",
// or PKCS #1 "RSA PUBLIC KEY") for AuthConfig.PublicKey.
func ParsePublicKeyPEM(b []byte) (crypto.PublicKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("%w: no PEM block in the public key", engine.ErrInvalid)
	}
	if blk.Type == "RSA PUBLIC KEY" {
		return x509.ParsePKCS1PublicKey(blk.Bytes)
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: public key: %w", engine.ErrInvalid, err)
	}
	switch k.(type) {
	case *rsa.PublicKey, ed25519.PublicKey:
		return k, nil
	}
	return nil, fmt.Errorf("%w: public key of type %T (want RSA or Ed25519)", engine.ErrInvalid, k)
}

type authenticator struct {
	cfg  AuthConfig
	algs []string
}

func newAuthenticator(c AuthConfig) (*authenticator, error) {
	if c.ClockSkew == 0 {
		c.ClockSkew = 30 * time.Second
	}
	if c.SkipPaths == nil {
		c.SkipPaths = []string{"/health", "/metrics/prometheus", "/metrics", "/"}
	}
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.RoleClaim, "role")
	def(&c.RolesClaim, "roles")
	def(&c.RoleAdmin, "admin")
	def(&c.RoleReadWrite, "read-write")
	def(&c.RoleReadOnly, "read-only")
	a := &authenticator{cfg: c}
	_, isRSA := c.PublicKey.(*rsa.PublicKey)
	_, isEd := c.PublicKey.(ed25519.PublicKey)
	if c.PublicKey != nil && !isRSA && !isEd {
		return nil, fmt.Errorf("%w: Auth.PublicKey of type %T (want *rsa.PublicKey or ed25519.PublicKey)", engine.ErrInvalid, c.PublicKey)
	}
	switch strings.ToUpper(c.Algorithm) {
	case "", "AUTO":
		if len(c.Secret) > 0 {
			a.algs = append(a.algs, "HS256")
		}
		if isRSA {
			a.algs = append(a.algs, "RS256")
		}
		if isEd {
			a.algs = append(a.algs, "EdDSA")
		}
	case "HS256":
		if len(c.Secret) == 0 {
			return nil, fmt.Errorf("%w: HS256 auth needs Auth.Secret", engine.ErrInvalid)
		}
		a.algs = []string{"HS256"}
	case "RS256":
		if !isRSA {
			return nil, fmt.Errorf("%w: RS256 auth needs an RSA Auth.PublicKey", engine.ErrInvalid)
		}
		a.algs = []string{"RS256"}
	case "EDDSA":
		if !isEd {
			return nil, fmt.Errorf("%w: EdDSA auth needs an Ed25519 Auth.PublicKey", engine.ErrInvalid)
		}
		a.algs = []string{"EdDSA"}
	default:
		return nil, fmt.Errorf("%w: unknown Auth.Algorithm %q (want HS256, RS256, EdDSA or auto)", engine.ErrInvalid, c.Algorithm)
	}
	if len(a.algs) == 0 {
		return nil, fmt.Errorf("%w: auth is on but neither Auth.Secret nor Auth.PublicKey is set", engine.ErrInvalid)
	}
	return a, nil
}

// Claims are the verified claims of a request's token.
type Claims struct {
	Subject string // the token's sub
	lv      level
}

type claimsKey struct{}

// ClaimsFrom returns the verified token claims of a request's context (nil
// when auth is off or the route is public).
func ClaimsFrom(ctx context.Context) *Claims {
	c, _ := ctx.Value(claimsKey{}).(*Claims)
	return c
}

// check authenticates r for a route of level lv. On failure it has answered
// 401 or 403.
func (a *authenticator) check(w http.ResponseWriter, r *http.Request, lv level) (*http.Request, bool) {
	if slices.Contains(a.cfg.SkipPaths, r.URL.Path) {
		return r, true
	}
	tok := strings.TrimSpace(r.Header.Get("Authorization"))
	if len(tok) >= 7 && strings.EqualFold(tok[:7], "bearer ") {
		tok = strings.TrimSpace(tok[7:])
	}
	if tok == "" {
		writeError(w, http.StatusUnauthorized, "Authentication required")
		return r, false
	}
	c, err := a.verify(tok, time.Now())
	if err != nil {
		writeError(w, http.StatusUnauthorized, "Invalid token: "+err.Error())
		return r, false
	}
	if c.lv < lv {
		writeError(w, http.StatusForbidden, "Insufficient permissions")
		return r, false
	}
	return r.WithContext(context.WithValue(r.Context(), claimsKey{}, c)), true
}

var b64 = base64.RawURLEncoding

// verify checks a compact JWS and its registered claims and returns the
// subject and role level.
func (a *authenticator) verify(tok string, now time.Time) (*Claims, error) {
	h, rest, ok1 := strings.Cut(tok, ".")
	p, sig, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.Contains(sig, ".") {
		return nil, errors.New("malformed token")
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	hb, err := b64.DecodeString(strings.TrimRight(h, "="))
	if err != nil || json.Unmarshal(hb, &hdr) != nil {
		return nil, errors.New("malformed token header")
	}
	if !slices.Contains(a.algs, hdr.Alg) {
		return nil, fmt.Errorf("algorithm %q not accepted", hdr.Alg)
	}
	sb, err := b64.DecodeString(strings.TrimRight(sig, "="))
	if err != nil {
		return nil, errors.New("malformed signature")
	}
	signed := tok[:len(h)+1+len(p)]
	switch hdr.Alg {
	case "HS256":
		mac := hmac.New(sha256.New, a.cfg.Secret)
		mac.Write([]byte(signed))
		if !hmac.Equal(mac.Sum(nil), sb) {
			return nil, errors.New("bad signature")
		}
	case "RS256":
		sum := sha256.Sum256([]byte(signed))
		if rsa.VerifyPKCS1v15(a.cfg.PublicKey.(*rsa.PublicKey), crypto.SHA256, sum[:], sb) != nil {
			return nil, errors.New("bad signature")
		}
	case "EdDSA":
		if !ed25519.Verify(a.cfg.PublicKey.(ed25519.PublicKey), []byte(signed), sb) {
			return nil, errors.New("bad signature")
		}
	}
	pb, err := b64.DecodeString(strings.TrimRight(p, "="))
	if err != nil {
		return nil, errors.New("malformed claims")
	}
	var cl map[string]any
	if err := json.Unmarshal(pb, &cl); err != nil {
		return nil, errors.New("malformed claims")
	}
	skew := a.cfg.ClockSkew
	if exp, ok := cl["exp"].(float64); ok && now.After(time.Unix(int64(exp), 0).Add(skew)) {
		return nil, errors.New("token expired")
	}
	if nbf, ok := cl["nbf"].(float64); ok && now.Add(skew).Before(time.Unix(int64(nbf), 0)) {
		return nil, errors.New("token not valid yet")
	}
	if a.cfg.Issuer != "" && cl["iss"] != a.cfg.Issuer {
		return nil, errors.New("wrong issuer")
	}
	if a.cfg.Audience != "" && !audienceHas(cl["aud"], a.cfg.Audience) {
		return nil, errors.New("wrong audience")
	}
	c := &Claims{}
	c.Subject, _ = cl["sub"].(string)
	if r, ok := cl[a.cfg.RoleClaim].(string); ok {
		c.lv = max(c.lv, a.levelOf(r))
	}
	if rs, ok := cl[a.cfg.RolesClaim].([]any); ok {
		for _, r := range rs {
			if s, ok := r.(string); ok {
				c.lv = max(c.lv, a.levelOf(s))
			}
		}
	}
	return c, nil
}

func audienceHas(aud any, want string) bool {
	switch v := aud.(type) {
	case string:
		return v == want
	case []any:
		for _, x := range v {
			if x == want {
				return true
			}
		}
	}
	return false
}

func (a *authenticator) levelOf(role string) level {
	switch role {
	case a.cfg.RoleAdmin:
		return levelAdmin
	case a.cfg.RoleReadWrite:
		return levelReadWrite
	case a.cfg.RoleReadOnly:
		return levelReadOnly
	}
	return levelPublic
}
