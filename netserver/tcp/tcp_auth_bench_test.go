package tcp

import (
	"testing"
	"time"

	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/protocol"
)

// BenchmarkTCPAuthorize is what auth adds to each request on an
// authenticated connection (a frame: a push of 100 messages is one): the
// level lookup, the role comparison and, for a token with exp, a clock
// read.
func BenchmarkTCPAuthorize(b *testing.B) {
	a, err := netserver.NewAuthenticator(netserver.AuthConfig{Enabled: true, Secret: []byte("s")})
	if err != nil {
		b.Fatal(err)
	}
	tc := &tcpConn{s: &Server{auth: a}, auth: connAuth{ok: true, lv: netserver.LevelAdmin, expires: time.Now().Add(time.Hour).UnixNano()}}
	for b.Loop() {
		if !tc.authorize(protocol.OpPush, 1) {
			b.Fatal("refused")
		}
	}
}
