package netserver

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/regentmq/regent/engine"
)

// AuthConfig turns on JWT authentication like Queen's (off by default).
// When on, every operation of both doors but the public ones needs a token
// whose role grants the operation's level (accessTable: read-only <
// read-write < admin). Over HTTP the token comes in "Authorization: Bearer
// <jwt>" (the prefix is case-insensitive and may be left out); over the
// binary protocol in an Auth frame after Hello, verified once for the
// connection. Public: /health, the dashboard's page and files, Hello, Ping
// and Auth, and /metrics and /metrics/prometheus unless MetricsAuth.
//
// Tokens are verified by github.com/golang-jwt/jwt/v5: the signature with
// the configured key and algorithms only (a token naming another algorithm
// is refused, so a public key is never taken for an HMAC secret), exp, nbf
// and iat as numbers (a claim of another type refuses the token) within
// ClockSkew, and iss and aud when configured. A token without exp does not
// expire, as in Queen.
type AuthConfig struct {
	Enabled bool
	// Algorithm accepted: "HS256", "RS256" (RS384 and RS512 too, as
	// Queen), "EdDSA", or "auto" (the default): any of them whose key is
	// configured.
	Algorithm string
	// Secret is the HS256 key.
	Secret []byte
	// PublicKey verifies RS256 (*rsa.PublicKey) or EdDSA
	// (ed25519.PublicKey) tokens; ParsePublicKeyPEM reads one.
	PublicKey crypto.PublicKey
	// KeySet verifies RS256 and EdDSA tokens by their kid header (a JWKS
	// file; ParseKeyFile reads one). A token without kid is verified with
	// PublicKey, or with the set's only key of its type.
	KeySet map[string]crypto.PublicKey
	// Issuer and Audience, when set, must match the iss and aud claims.
	Issuer, Audience string
	// ClockSkew is the leeway on exp, nbf and iat; default 30 s.
	ClockSkew time.Duration
	// MetricsAuth makes /metrics and /metrics/prometheus want a read-only
	// token (they are public by default, as in Queen).
	MetricsAuth bool
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

// ParseKeyFile reads the public keys of a file for AuthConfig: a PEM public
// key (RSA or Ed25519), or a JWKS document ({"keys":[...]}, RSA keys with n
// and e, Ed25519 keys with kty OKP, crv Ed25519 and x) whose keys are
// returned by kid (a key without kid gets its index as kid).
func ParseKeyFile(b []byte) (pub crypto.PublicKey, set map[string]crypto.PublicKey, err error) {
	t := bytes.TrimSpace(b)
	if len(t) == 0 || t[0] != '{' {
		pub, err = ParsePublicKeyPEM(b)
		return pub, nil, err
	}
	var doc struct {
		Keys []struct {
			Kty, Kid, Use, Alg, Crv, N, E, X string
		} `json:"keys"`
	}
	if err := json.Unmarshal(t, &doc); err != nil {
		return nil, nil, fmt.Errorf("%w: JWKS: %w", engine.ErrInvalid, err)
	}
	set = map[string]crypto.PublicKey{}
	for i, k := range doc.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		kid := k.Kid
		if kid == "" {
			kid = strconv.Itoa(i)
		}
		switch k.Kty {
		case "RSA":
			n, err1 := b64.DecodeString(strings.TrimRight(k.N, "="))
			e, err2 := b64.DecodeString(strings.TrimRight(k.E, "="))
			if err1 != nil || err2 != nil || len(n) == 0 || len(e) == 0 || len(e) > 4 {
				return nil, nil, fmt.Errorf("%w: JWKS key %q: bad n or e", engine.ErrInvalid, kid)
			}
			ev := 0
			for _, c := range e {
				ev = ev<<8 | int(c)
			}
			set[kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: ev}
		case "OKP":
			x, err := b64.DecodeString(strings.TrimRight(k.X, "="))
			if k.Crv != "Ed25519" || err != nil || len(x) != ed25519.PublicKeySize {
				return nil, nil, fmt.Errorf("%w: JWKS key %q: want crv Ed25519 and a 32-byte x", engine.ErrInvalid, kid)
			}
			set[kid] = ed25519.PublicKey(x)
		}
	}
	if len(set) == 0 {
		return nil, nil, fmt.Errorf("%w: JWKS without an RSA or Ed25519 signing key", engine.ErrInvalid)
	}
	return nil, set, nil
}

var b64 = base64.RawURLEncoding

// Authenticator verifies tokens for both doors: the HTTP door per request,
// the binary door once per Auth frame. Build one with NewAuthenticator.
type Authenticator struct {
	cfg  AuthConfig
	algs []string
	rsa  []*rsa.PublicKey // every RSA key (PublicKey and KeySet)
	ed   []ed25519.PublicKey
	// skew moves the clock forward (tests only: a token that expires
	// while a connection is open, without waiting for it).
	skew atomic.Int64
}

// Now is the time tokens are checked against.
func (a *Authenticator) Now() time.Time { return time.Now().Add(time.Duration(a.skew.Load())) }

// AdvanceClock moves the clock tokens are checked against forward by d
// (tests only: a token that expires while a connection is open, without
// waiting for it).
func (a *Authenticator) AdvanceClock(d time.Duration) { a.skew.Add(int64(d)) }

// NewAuthenticator checks c and returns its authenticator (c.Enabled is the
// caller's business: a door builds one only when auth is on).
func NewAuthenticator(c AuthConfig) (*Authenticator, error) {
	if c.ClockSkew == 0 {
		c.ClockSkew = 30 * time.Second
	}
	if c.ClockSkew < 0 {
		return nil, fmt.Errorf("%w: negative Auth.ClockSkew", engine.ErrInvalid)
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
	a := &Authenticator{cfg: c}
	add := func(k crypto.PublicKey) error {
		switch k := k.(type) {
		case *rsa.PublicKey:
			a.rsa = append(a.rsa, k)
		case ed25519.PublicKey:
			a.ed = append(a.ed, k)
		default:
			return fmt.Errorf("%w: Auth public key of type %T (want *rsa.PublicKey or ed25519.PublicKey)", engine.ErrInvalid, k)
		}
		return nil
	}
	if c.PublicKey != nil {
		if err := add(c.PublicKey); err != nil {
			return nil, err
		}
	}
	for _, k := range c.KeySet {
		if err := add(k); err != nil {
			return nil, err
		}
	}
	isRSA, isEd := len(a.rsa) > 0, len(a.ed) > 0
	switch strings.ToUpper(c.Algorithm) {
	case "", "AUTO":
		if len(c.Secret) > 0 {
			a.algs = append(a.algs, "HS256")
		}
		if isRSA {
			a.algs = append(a.algs, "RS256", "RS384", "RS512")
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
			return nil, fmt.Errorf("%w: RS256 auth needs an RSA public key", engine.ErrInvalid)
		}
		a.algs = []string{"RS256", "RS384", "RS512"}
	case "EDDSA":
		if !isEd {
			return nil, fmt.Errorf("%w: EdDSA auth needs an Ed25519 public key", engine.ErrInvalid)
		}
		a.algs = []string{"EdDSA"}
	default:
		return nil, fmt.Errorf("%w: unknown Auth.Algorithm %q (want HS256, RS256, EdDSA or auto)", engine.ErrInvalid, c.Algorithm)
	}
	if len(a.algs) == 0 {
		return nil, fmt.Errorf("%w: auth is on but neither Auth.Secret nor a public key is set", engine.ErrInvalid)
	}
	return a, nil
}

// Claims are the verified claims of a request's token.
type Claims struct {
	Subject string    // the token's sub
	Expires time.Time // exp plus the clock skew; zero: the token does not expire
	lv      Level
}

// Level is the highest level the token's roles grant.
func (c *Claims) Level() Level { return c.lv }

// Verify checks a compact JWS and its registered claims and returns the
// subject, the expiry and the role level.
func (a *Authenticator) Verify(tok string) (*Claims, error) {
	opts := []jwt.ParserOption{jwt.WithValidMethods(a.algs), jwt.WithLeeway(a.cfg.ClockSkew),
		jwt.WithIssuedAt(), jwt.WithTimeFunc(a.Now)}
	if a.cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(a.cfg.Issuer))
	}
	if a.cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(a.cfg.Audience))
	}
	var cl jwt.MapClaims
	_, err := jwt.NewParser(opts...).ParseWithClaims(tok, &cl, a.key)
	if err != nil {
		return nil, tokenError(err, a.algs)
	}
	c := &Claims{}
	c.Subject, _ = cl["sub"].(string)
	if exp, err := cl.GetExpirationTime(); err == nil && exp != nil {
		c.Expires = exp.Add(a.cfg.ClockSkew)
	}
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

// key returns the key that verifies t: the secret for HMAC, the public key
// of t's kid (or the only one of its type) for RSA and EdDSA. The parser
// has already refused an algorithm not in a.algs.
func (a *Authenticator) key(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	switch t.Method.(type) {
	case *jwt.SigningMethodHMAC:
		return a.cfg.Secret, nil
	case *jwt.SigningMethodRSA:
		if k, ok := a.cfg.KeySet[kid].(*rsa.PublicKey); ok && kid != "" {
			return k, nil
		}
		if k, ok := a.cfg.PublicKey.(*rsa.PublicKey); ok {
			return k, nil
		}
		if len(a.rsa) == 1 && kid == "" {
			return a.rsa[0], nil
		}
	case *jwt.SigningMethodEd25519:
		if k, ok := a.cfg.KeySet[kid].(ed25519.PublicKey); ok && kid != "" {
			return k, nil
		}
		if k, ok := a.cfg.PublicKey.(ed25519.PublicKey); ok {
			return k, nil
		}
		if len(a.ed) == 1 && kid == "" {
			return a.ed[0], nil
		}
	}
	return nil, fmt.Errorf("no key for kid %q", kid)
}

// tokenError words a verification failure for the client, as Queen does.
func tokenError(err error, algs []string) error {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return errors.New("malformed token")
	case errors.Is(err, jwt.ErrTokenUnverifiable),
		errors.Is(err, jwt.ErrTokenSignatureInvalid) && strings.Contains(err.Error(), "signing method"):
		return fmt.Errorf("algorithm not accepted (this broker takes %s)", strings.Join(algs, ", "))
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return errors.New("bad signature")
	case errors.Is(err, jwt.ErrInvalidType):
		return fmt.Errorf("a claim of the wrong type (%w)", err)
	case errors.Is(err, jwt.ErrTokenExpired):
		return errors.New("token expired")
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return errors.New("token not valid yet")
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return errors.New("token issued in the future")
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return errors.New("wrong issuer")
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return errors.New("wrong audience")
	}
	return err
}

func (a *Authenticator) levelOf(role string) Level {
	switch role {
	case a.cfg.RoleAdmin:
		return LevelAdmin
	case a.cfg.RoleReadWrite:
		return LevelReadWrite
	case a.cfg.RoleReadOnly:
		return LevelReadOnly
	}
	return LevelPublic
}
