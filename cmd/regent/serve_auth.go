package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/regentmq/regent/broker"
)

// The security settings of serve: authentication (JWT, both doors), TLS on
// the HTTP door, and whether /metrics wants a token.
var securitySettings = []setting{
	{"jwt-secret", "REGENT_JWT_SECRET", "", "HS256 secret; setting it (or --jwt-public-key) turns authentication on for both doors"},
	{"jwt-public-key", "REGENT_JWT_PUBLIC_KEY", "", "`FILE` of an RS256 or EdDSA public key (PEM) or a JWKS (keys by kid); setting it turns authentication on"},
	{"jwt-algorithm", "REGENT_JWT_ALGORITHM", "auto", "HS256, RS256, EdDSA, or auto: any whose key is set"},
	{"jwt-issuer", "REGENT_JWT_ISSUER", "", "the iss claim tokens must carry (empty: any)"},
	{"jwt-audience", "REGENT_JWT_AUDIENCE", "", "an aud value tokens must carry (empty: any)"},
	{"jwt-clock-skew", "REGENT_JWT_CLOCK_SKEW", "30s", "leeway on the exp, nbf and iat claims"},
	{"jwt-role-claim", "REGENT_JWT_ROLE_CLAIM", "role", "the claim holding one role"},
	{"jwt-roles-claim", "REGENT_JWT_ROLES_CLAIM", "roles", "the claim holding an array of roles"},
	{"jwt-role-admin", "REGENT_JWT_ROLE_ADMIN", "admin", "the role that may do everything"},
	{"jwt-role-read-write", "REGENT_JWT_ROLE_READ_WRITE", "read-write", "the role that may push, pop, ack and configure"},
	{"jwt-role-read-only", "REGENT_JWT_ROLE_READ_ONLY", "read-only", "the role that may read"},
	{"metrics-auth", "REGENT_METRICS_AUTH", "false", "true: /metrics and /metrics/prometheus want a read-only token (public by default, as in Queen)"},
	{"tls-cert", "REGENT_TLS_CERT", "", "certificate chain `FILE` (PEM); with --tls-key the HTTP door serves HTTPS"},
	{"tls-key", "REGENT_TLS_KEY", "", "the certificate's private key `FILE` (PEM)"},
}

func init() {
	serveSettings = append(serveSettings, securitySettings...)
	hiddenSettings["jwt-secret"] = true
}

// queenAuthEnv is Queen's variable for each setting: a Queen deployment's
// settings carry over. They are read only with JWT_ENABLED=true (Queen
// ignores them otherwise), and a flag or a REGENT_ variable wins.
var queenAuthEnv = []struct{ flag, env string }{
	{"jwt-secret", "JWT_SECRET"},
	{"jwt-public-key", "JWT_PUBLIC_KEY"},
	{"jwt-algorithm", "JWT_ALGORITHM"},
	{"jwt-issuer", "JWT_ISSUER"},
	{"jwt-audience", "JWT_AUDIENCE"},
	{"jwt-clock-skew", "JWT_CLOCK_SKEW"},
	{"jwt-role-claim", "JWT_ROLES_CLAIM"},
	{"jwt-roles-claim", "JWT_ROLES_ARRAY_CLAIM"},
	{"jwt-role-admin", "JWT_ROLE_ADMIN"},
	{"jwt-role-read-write", "JWT_ROLE_READ_WRITE"},
	{"jwt-role-read-only", "JWT_ROLE_READ_ONLY"},
}

// queenEnvHelp ends serve --help.
var queenEnvHelp = func() string {
	var b strings.Builder
	b.WriteString("\nQueen's JWT variables are read too when JWT_ENABLED=true (a flag or a REGENT_ variable wins):\n")
	for _, q := range queenAuthEnv {
		fmt.Fprintf(&b, "  %-22s --%s\n", q.env, q.flag)
	}
	b.WriteString("  (JWT_PUBLIC_KEY may hold the PEM itself; JWT_CLOCK_SKEW is in seconds. JWT_JWKS_URL is not\n" +
		"  fetched: save the key set to a file for --jwt-public-key. JWT_SKIP_PATHS is not read.)\n")
	return b.String()
}()

// security is what the security settings turn on.
type security struct {
	auth broker.AuthConfig
	tls  *tls.Config // nil: plain HTTP
	how  string      // the algorithms, for the banner
}

// securityFrom reads the security settings, Queen's variables included.
func securityFrom(s *settings, logger *slog.Logger) (security, error) {
	explicit := map[string]bool{}
	s.fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	for _, st := range securitySettings {
		if _, ok := os.LookupEnv(st.env); ok {
			explicit[st.flag] = true
		}
	}
	queen := false
	if v, ok := os.LookupEnv("JWT_ENABLED"); ok {
		on, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return security{}, fmt.Errorf("JWT_ENABLED=%q: want true or false", v)
		}
		queen = on
	}
	get := func(name string) (string, bool) { // the value, and whether it is Queen's
		if !explicit[name] && queen {
			for _, q := range queenAuthEnv {
				if q.flag == name {
					if v, ok := os.LookupEnv(q.env); ok {
						return v, true
					}
				}
			}
		}
		return s.get(name), false
	}
	if !queen {
		for _, env := range []string{"JWT_SECRET", "JWT_PUBLIC_KEY", "JWT_JWKS_URL"} {
			if _, ok := os.LookupEnv(env); ok {
				logger.Warn(env + " is set but JWT_ENABLED is not true: Queen's JWT variables are not read (as in Queen); use --jwt-secret or --jwt-public-key")
				break
			}
		}
	}
	var sec security
	a := &sec.auth
	secret, _ := get("jwt-secret")
	a.Secret = []byte(secret)
	if key, fromQueen := get("jwt-public-key"); key != "" {
		b := []byte(key)
		if !fromQueen || !strings.Contains(key, "-----BEGIN") {
			var err error
			if b, err = os.ReadFile(key); err != nil {
				return sec, fmt.Errorf("--jwt-public-key: %w", err)
			}
		}
		var err error
		if a.PublicKey, a.KeySet, err = broker.ParseKeyFile(b); err != nil {
			return sec, fmt.Errorf("--jwt-public-key: %w", err)
		}
	}
	a.Enabled = len(a.Secret) > 0 || a.PublicKey != nil || a.KeySet != nil
	if queen {
		if url := os.Getenv("JWT_JWKS_URL"); url != "" && a.PublicKey == nil && a.KeySet == nil {
			return sec, errors.New("JWT_JWKS_URL is not fetched by Regent: save the key set to a file and give --jwt-public-key FILE")
		}
		if !a.Enabled {
			return sec, errors.New("JWT_ENABLED=true but no key: set JWT_SECRET (HS256) or JWT_PUBLIC_KEY, or --jwt-secret / --jwt-public-key")
		}
		if _, ok := os.LookupEnv("JWT_SKIP_PATHS"); ok {
			logger.Warn("JWT_SKIP_PATHS is not read: the public routes are /health, the dashboard's page and, unless --metrics-auth, /metrics")
		}
	}
	a.Algorithm, _ = get("jwt-algorithm")
	a.Issuer, _ = get("jwt-issuer")
	a.Audience, _ = get("jwt-audience")
	a.RoleClaim, _ = get("jwt-role-claim")
	a.RolesClaim, _ = get("jwt-roles-claim")
	a.RoleAdmin, _ = get("jwt-role-admin")
	a.RoleReadWrite, _ = get("jwt-role-read-write")
	a.RoleReadOnly, _ = get("jwt-role-read-only")
	skew, fromQueen := get("jwt-clock-skew")
	if n, err := strconv.Atoi(strings.TrimSpace(skew)); err == nil && fromQueen {
		skew = strconv.Itoa(n) + "s" // Queen's JWT_CLOCK_SKEW is in seconds
	}
	d, err := time.ParseDuration(skew)
	if err != nil || d < 0 {
		return sec, fmt.Errorf("--jwt-clock-skew %q: want a duration such as 30s", skew)
	}
	a.ClockSkew = max(d, time.Nanosecond) // 0 would mean the default
	if a.MetricsAuth, err = strconv.ParseBool(s.get("metrics-auth")); err != nil {
		return sec, errors.New("--metrics-auth: want true or false")
	}
	if a.Enabled {
		// The server checks the rest (an algorithm without its key).
		sec.how = strings.ToUpper(a.Algorithm)
	}
	cert, key := s.get("tls-cert"), s.get("tls-key")
	if (cert == "") != (key == "") {
		return sec, errors.New("--tls-cert and --tls-key go together")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return sec, fmt.Errorf("--tls-cert, --tls-key: %w", err)
		}
		sec.tls = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	}
	return sec, nil
}

// authHS256 is the AuthConfig of an HS256 secret and the defaults.
func authHS256(secret string) broker.AuthConfig {
	return broker.AuthConfig{Enabled: true, Secret: []byte(secret)}
}

// tlsConfigCA is a client's TLS configuration trusting the CA
// certificates of a PEM file, or the system's for "system".
func tlsConfigCA(file string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if file == "system" {
		return cfg, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca: %w", err)
	}
	cfg.RootCAs = x509.NewCertPool()
	if !cfg.RootCAs.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", file)
	}
	return cfg, nil
}

// banner is what serve prints of its security at start.
func (sec *security) banner() string {
	scheme := "http (plain)"
	if sec.tls != nil {
		scheme = "https on the HTTP door"
	}
	if !sec.auth.Enabled {
		return "  auth    off: every client may do everything (" + scheme + ")\n"
	}
	metrics := "/metrics public"
	if sec.auth.MetricsAuth {
		metrics = "/metrics wants a token"
	}
	return fmt.Sprintf("  auth    JWT (%s) on both doors, %s (%s)\n", sec.how, metrics, scheme)
}
