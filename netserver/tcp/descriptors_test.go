package tcp_test

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/protocol"
)

// TestTheDoorOutlivesRunningOutOfDescriptors: the process runs out of
// descriptors while connections arrive (its soft limit is lowered to what it
// holds plus a few, and the test dials until it can open no more). The door
// cannot accept then; once descriptors are free again it serves new
// connections. gnet's own listener ended the whole engine on that accept
// error (EMFILE): the door was gone for good.
func TestTheDoorOutlivesRunningOutOfDescriptors(t *testing.T) {
	f := newTCP(t)
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	open, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	low := rl
	low.Cur = uint64(len(open)) + 40
	if low.Cur >= rl.Cur {
		t.Skipf("the descriptor limit %d is already low", rl.Cur)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer restore()
	hello := protocol.AppendHelloRequest(nil, 1, &protocol.HelloRequest{Major: protocol.VersionMajor, Minor: protocol.VersionMinor})
	var flood []net.Conn
	dialFailed := false
	for i := 0; i < 200 && !dialFailed; i++ {
		nc, err := net.DialTimeout("tcp", f.addr, time.Second)
		if err != nil {
			dialFailed = true // the test's side ran out: so did the server's
			break
		}
		nc.Write(hello)
		flood = append(flood, nc)
	}
	if !dialFailed {
		t.Fatalf("%d connections opened under a limit of %d descriptors", len(flood), low.Cur)
	}
	// The connections dialed last wait in the listen backlog: the server's
	// accept fails (EMFILE) and retries while the descriptors stay short.
	time.Sleep(200 * time.Millisecond)
	for _, nc := range flood {
		nc.Close()
	}
	restore()
	brokertest.CheckFor(t, 10*time.Second, func() error {
		nc, err := net.DialTimeout("tcp", f.addr, time.Second)
		if err != nil {
			return err
		}
		defer nc.Close()
		nc.Write(hello)
		nc.SetReadDeadline(time.Now().Add(time.Second))
		fr, err := protocol.NewReader(nc, 0).Next()
		if err != nil {
			return fmt.Errorf("no answer to Hello after the descriptors came back: %v", err)
		}
		if fr.IsError() {
			return fmt.Errorf("Hello refused after the descriptors came back")
		}
		return nil
	})
	ctx := ctx5(t)
	if _, err := f.c.Queue("fds").Partition("p").Push(ctx, []byte("after")); err != nil {
		t.Fatalf("the connection held through the shortage no longer works: %v", err)
	}
}
