package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func token(t *testing.T, secret, role string, extra ...any) string {
	t.Helper()
	c := jwt.MapClaims{"sub": "cli-" + role, "role": role, "exp": time.Now().Add(time.Hour).Unix()}
	for i := 0; i+1 < len(extra); i += 2 {
		c[extra[i].(string)] = extra[i+1]
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serveAuth starts `regent serve` with args and env and returns its TCP and
// HTTP addresses.
func serveAuth(t *testing.T, bin string, env []string, args ...string) (tcp, httpAddr string) {
	t.Helper()
	tcp, httpAddr = freePort(t), freePort(t)
	cmd := exec.Command(bin, append([]string{"serve", "--data", t.TempDir(), "--tcp", tcp, "--http", httpAddr, "--log-level", "warn"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	startServeWith(t, cmd)
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	return tcp, httpAddr
}

func httpDo(t *testing.T, c *http.Client, method, url, tok, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// `regent serve --jwt-secret S` closes both doors: the list, over
// HTTP and over the binary protocol with the operator commands.
func TestServeWithJWTSecret(t *testing.T) {
	_, bin := buildRegent(t)
	const secret = "serve-s3cret"
	tcp, web := serveAuth(t, bin, nil, "--jwt-secret", secret)
	hc := &http.Client{Timeout: 10 * time.Second}
	push := `{"items":[{"queue":"sec","payload":{"n":1}}]}`
	for _, c := range []struct {
		name, tok string
		want      int
	}{
		{"no token", "", 401},
		{"expired", token(t, secret, "admin", "exp", time.Now().Add(-time.Hour).Unix()), 401},
		{"exp a string", token(t, secret, "admin", "exp", "tomorrow"), 401},
		{"another key", token(t, "another", "admin"), 401},
		{"read-only", token(t, secret, "read-only"), 403},
		{"read-write", token(t, secret, "read-write"), 201},
	} {
		if code, body := httpDo(t, hc, "POST", "http://"+web+"/api/v1/push", c.tok, push); code != c.want {
			t.Errorf("HTTP push, %s: %d %s, want %d", c.name, code, body, c.want)
		}
	}
	for _, p := range []string{"/health", "/metrics", "/metrics/prometheus"} {
		if code, _ := httpDo(t, hc, "GET", "http://"+web+p, "", ""); code != 200 {
			t.Errorf("GET %s without a token: %d, want 200 (public)", p, code)
		}
	}

	// The binary protocol, through the operator commands.
	code, _, errs := cli(t, tcp, "", "queues")
	if code != exitFailure || !strings.Contains(errs, "unauthenticated") || !strings.Contains(errs, "REGENT_TOKEN") {
		t.Errorf("queues without a token: exit %d, %q", code, errs)
	}
	ro, rw := token(t, secret, "read-only"), token(t, secret, "read-write")
	if code, out, errs := cli(t, tcp, "", "queues", "--token", ro); code != exitOK || !strings.Contains(out, "sec") {
		t.Errorf("queues with a read-only token: exit %d, %q %q", code, out, errs)
	}
	if code, _, errs := cli(t, tcp, "", "push", "sec", "x", "--token", ro); code != exitFailure || !strings.Contains(errs, "forbidden") {
		t.Errorf("push with a read-only token: exit %d, %q", code, errs)
	}
	expired := token(t, secret, "read-write", "exp", time.Now().Add(-time.Hour).Unix())
	if code, _, errs := cli(t, tcp, "", "push", "sec", "x", "--token", expired); code != exitFailure || !strings.Contains(errs, "expired") {
		t.Errorf("push with an expired token: exit %d, %q", code, errs)
	}
	if code, out, errs := cli(t, tcp, "", "push", "sec", "x", "--token", rw); code != exitOK || !strings.HasPrefix(out, "queued") {
		t.Errorf("push with a read-write token: exit %d, %q %q", code, out, errs)
	}
	t.Setenv("REGENT_TOKEN", rw)
	if code, out, errs := cli(t, tcp, "", "push", "sec", "y"); code != exitOK || !strings.HasPrefix(out, "queued") {
		t.Errorf("push with REGENT_TOKEN: exit %d, %q %q", code, out, errs)
	}
	t.Setenv("REGENT_TOKEN", ro)
	if code, _, errs := cli(t, tcp, "", "push", "sec", "z"); code != exitFailure || !strings.Contains(errs, "forbidden") {
		t.Errorf("push with a read-only REGENT_TOKEN: exit %d, %q", code, errs)
	}
	// The pushes that went through: the HTTP one and two over TCP.
	if code, out, errs := cli(t, tcp, "", "pop", "sec", "--batch", "10", "--group", "g", "--token", rw, "--json"); code != exitOK || strings.Count(out, `"payload"`) != 3 {
		t.Errorf("pop: exit %d, %q %q", code, out, errs)
	}
}

// A Queen deployment's variables carry over (JWT_ENABLED=true,
// JWT_SECRET, JWT_CLOCK_SKEW in seconds), and --tls-cert/--tls-key serve
// HTTPS.
func TestServeWithQueenVariablesAndTLS(t *testing.T) {
	dir, bin := buildRegent(t)
	cert, key := selfSigned(t, dir)
	const secret = "queen-s3cret"
	tcp, web := serveAuth(t, bin, []string{"JWT_ENABLED=true", "JWT_SECRET=" + secret, "JWT_CLOCK_SKEW=5", "JWT_ROLE_READ_WRITE=writer"},
		"--tls-cert", cert, "--tls-key", key)
	pool := x509.NewCertPool()
	pemBytes, _ := os.ReadFile(cert)
	pool.AppendCertsFromPEM(pemBytes)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	push := `{"items":[{"queue":"q","payload":1}]}`
	if code, body := httpDo(t, hc, "POST", "https://"+web+"/api/v1/push", "", push); code != 401 {
		t.Errorf("HTTPS push without a token: %d %s", code, body)
	}
	if code, body := httpDo(t, hc, "POST", "https://"+web+"/api/v1/push", token(t, secret, "writer"), push); code != 201 {
		t.Errorf("HTTPS push with a token of JWT_ROLE_READ_WRITE: %d %s", code, body)
	}
	// Skew of 5 s: a token expired 20 s ago is refused (30 s would take it).
	if code, _ := httpDo(t, hc, "POST", "https://"+web+"/api/v1/push", token(t, secret, "writer", "exp", time.Now().Add(-20*time.Second).Unix()), push); code != 401 {
		t.Errorf("a token expired 20 s ago with JWT_CLOCK_SKEW=5: %d", code)
	}
	if code, _, errs := cli(t, tcp, "", "queues", "--token", token(t, secret, "writer")); code != exitOK {
		t.Errorf("queues over TCP with the Queen-configured secret: exit %d, %q", code, errs)
	}
}

// TestServeAuthSettingsRefused: contradictory or incomplete settings stop
// serve before it starts (exit 2).
func TestServeAuthSettingsRefused(t *testing.T) {
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"JWT_ENABLED=true"}, nil, "no key"},
		{[]string{"JWT_ENABLED=true", "JWT_JWKS_URL=https://idp.example/jwks"}, nil, "JWT_JWKS_URL"},
		{[]string{"JWT_ENABLED=maybe"}, nil, "JWT_ENABLED"},
		{nil, []string{"--tls-cert", "x.pem"}, "go together"},
		{nil, []string{"--jwt-public-key", "/nonexistent/key.pem"}, "--jwt-public-key"},
		{nil, []string{"--jwt-secret", "s", "--jwt-clock-skew", "soon"}, "--jwt-clock-skew"},
	} {
		for _, kv := range c.env {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		var out, errb strings.Builder
		code := run(append([]string{"serve", "--data", t.TempDir(), "--tcp", "127.0.0.1:0", "--http", "127.0.0.1:0"}, c.args...), &out, &errb)
		if code != exitUsage || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v %v: exit %d, %q", c.env, c.args, code, errb.String())
		}
		for _, kv := range c.env {
			k, _, _ := strings.Cut(kv, "=")
			os.Unsetenv(k)
		}
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key into dir.
func selfSigned(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "regent-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalPKCS8PrivateKey(k)
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600)
	return cert, key
}

// The operator commands speak TLS to a TLS terminator in front of the
// binary protocol (--tls-ca), the alternative the README documents.
func TestOperatorCommandsThroughATLSTerminator(t *testing.T) {
	addr := testBroker(t)
	cert, key := selfSigned(t, t.TempDir())
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				defer b.Close()
				go io.Copy(b, c)
				io.Copy(c, b)
			}()
		}
	}()
	front := l.Addr().String()
	if code, out, errs := cli(t, front, "", "push", "tls", "x", "--tls-ca", cert); code != exitOK || !strings.HasPrefix(out, "queued") {
		t.Errorf("push through the terminator: exit %d %q %q", code, out, errs)
	}
	if code, _, _ := cli(t, front, "", "queues", "--timeout", "2s"); code != exitFailure {
		t.Errorf("plain TCP to the TLS terminator: exit %d, want 1", code)
	}
	if code, _, errs := cli(t, front, "", "queues", "--tls-ca", key); code != exitFailure || !strings.Contains(errs, "no PEM certificate") {
		t.Errorf("--tls-ca of a key file: exit %d %q", code, errs)
	}
}
