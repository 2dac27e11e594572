package netserver_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/netserver/httpapi"
	"github.com/regentmq/regent/netserver/tcp"
	"github.com/regentmq/regent/protocol"
)

// Resource abuse: clients that never read, slow loris on both ports,
// connection floods past the limits, thousands of parked long polls. Each
// test states its bound.

// closedWithin reads from nc until the server closes it (EOF or reset),
// failing if that takes longer than d. It returns how long it took.
func closedWithin(t *testing.T, nc net.Conn, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	nc.SetReadDeadline(start.Add(d))
	_, err := io.Copy(io.Discard, nc)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %v", d)
	}
	return time.Since(start)
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// memInUse is heap and goroutine stacks.
func memInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

// TestHTTPClientThatNeverReads: a client pipelines requests for large
// answers and never reads them. Bound: the server holds one answer for it
// at a time (net/http serves a connection's requests one after another), so
// its heap grows by less than 8 MiB whatever the client sends, and the
// connection is closed within WriteTimeout (here 300ms) of the answer that
// could not be written.
func TestHTTPClientThatNeverReads(t *testing.T) {
	f := newAbuse(t, nil, func(c *httpapi.Config) { c.WriteTimeout = 300 * time.Millisecond })
	for i := 0; i < 200; i++ { // a queue list of ~20 KiB per answer
		f.do(t, "POST", "/api/v1/push", fmt.Sprintf(`{"items":[{"queue":"a-queue-with-a-long-name-%03d","payload":1}]}`, i), nil)
	}
	before := heapInUse()
	nc, err := net.Dial("tcp", f.httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.(*net.TCPConn).SetReadBuffer(4096)
	req := []byte("GET /api/v1/resources/queues HTTP/1.1\r\nHost: x\r\n\r\n")
	var burst []byte
	for i := 0; i < 100; i++ {
		burst = append(burst, req...)
	}
	closed := make(chan error, 1)
	sent := 0
	go func() {
		for i := 0; i < 10000; i++ {
			nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := nc.Write(burst); err != nil {
				closed <- err
				return
			}
			sent += len(burst)
		}
		closed <- nil
	}()
	var ne net.Error
	if err := <-closed; err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("a client that never reads was not disconnected by the server (%v)", err)
	}
	grew := int64(heapInUse()) - int64(before)
	t.Logf("the client sent %d KiB of requests before it was cut off; server heap grew by %d KiB", sent>>10, grew>>10)
	if grew > 8<<20 {
		t.Fatalf("heap grew by %d bytes for one client that does not read", grew)
	}
	f.othersStillWork(t)
}

// TestHTTPSlowLoris: headers sent a byte at a time are cut off after
// ReadHeaderTimeout (300ms here), and a body trickled in after
// ReadBodyTimeout (300ms here). Bound: closed within the timeout + 1s.
func TestHTTPSlowLoris(t *testing.T) {
	f := newAbuse(t, nil, func(c *httpapi.Config) {
		c.ReadHeaderTimeout, c.ReadBodyTimeout = 300*time.Millisecond, 300*time.Millisecond
	})
	trickle := func(nc net.Conn, s string) {
		go func() {
			for i := 0; i < len(s); i++ {
				if _, err := nc.Write([]byte{s[i]}); err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	t.Run("headers", func(t *testing.T) {
		nc, err := net.Dial("tcp", f.httpAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		trickle(nc, "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: "+strings.Repeat("a", 1000))
		took := closedWithin(t, nc, 1300*time.Millisecond)
		t.Logf("closed after %v", took.Round(time.Millisecond))
		f.othersStillWork(t)
	})
	t.Run("body", func(t *testing.T) {
		nc, err := net.Dial("tcp", f.httpAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.Write([]byte("POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"))
		trickle(nc, `{"items":[{"queue":"slow","payload":"`+strings.Repeat("b", 900))
		nc.SetReadDeadline(time.Now().Add(1300 * time.Millisecond))
		resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
		if err != nil {
			t.Fatalf("no answer to a trickled body: %v", err)
		}
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("status %d, want 400", resp.StatusCode)
		}
		closedWithin(t, nc, time.Second)
		f.othersStillWork(t)
	})
}

// TestTCPSlowLoris: a connection that never says Hello, and one that
// trickles a frame a byte at a time, are closed after FrameTimeout (300ms
// here) even though bytes keep coming. Bound: closed within the timeout +
// 1s.
func TestTCPSlowLoris(t *testing.T) {
	f := newAbuse(t, []func(*tcp.Config){func(c *tcp.Config) { c.FrameTimeout = 300 * time.Millisecond }})
	t.Run("no hello", func(t *testing.T) {
		nc := f.raw(t, false)
		took := closedWithin(t, nc, 1300*time.Millisecond)
		t.Logf("closed after %v", took.Round(time.Millisecond))
		f.othersStillWork(t)
	})
	t.Run("trickled frame", func(t *testing.T) {
		nc := f.raw(t, true)
		frame := protocol.AppendPushRequest(nil, 5, &protocol.PushRequest{Items: []protocol.PushItem{{Queue: "slow", Payload: make([]byte, 500)}}})
		go func() {
			for i := 0; i < len(frame); i++ {
				if _, err := nc.Write(frame[i : i+1]); err != nil {
					return
				}
				time.Sleep(30 * time.Millisecond)
			}
		}()
		took := closedWithin(t, nc, 1300*time.Millisecond)
		t.Logf("closed after %v", took.Round(time.Millisecond))
		f.othersStillWork(t)
	})
}

// TestTCPSlowLorisSparesBusyClients: a client streaming many frames whose
// reads often end mid-frame is not closed (only a read that completes no
// frame counts). Its own fixture, with FrameTimeout at 1s: under the race
// detector on a loaded 2-core machine either side can stall a few hundred
// milliseconds mid-frame, and at 300ms such a stall is a trickle (CI saw
// one).
func TestTCPSlowLorisSparesBusyClients(t *testing.T) {
	const frameTimeout = time.Second
	f := newAbuse(t, []func(*tcp.Config){func(c *tcp.Config) { c.FrameTimeout = frameTimeout }})
	nc := f.raw(t, true)
	ping := protocol.AppendPingRequest(nil, 1)
	var stream []byte
	for i := 0; i < 20; i++ {
		stream = append(stream, ping...)
	}
	go io.Copy(io.Discard, nc)
	start := time.Now()
	var longest time.Duration // between two writes of one burst
	for time.Since(start) < 2*frameTimeout+300*time.Millisecond {
		// Cut the stream mid-frame on every write.
		last := time.Now()
		for off := 0; off < len(stream); off += 7 {
			if _, err := nc.Write(stream[off:min(off+7, len(stream))]); err != nil {
				t.Fatalf("a busy client was disconnected after %v (longest pause mid-burst %v): %v",
					time.Since(start).Round(time.Millisecond), longest.Round(time.Millisecond), err)
			}
			longest = max(longest, time.Since(last))
			last = time.Now()
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTCPSlowLorisLargeFrame: a connection that sends the first 128 KiB of
// a 512 KiB frame at once and then trickles the rest is closed after
// FrameTimeout too: past 64 KiB buffered the loop reads only the header of
// a frame still arriving (tcp's partialFrame), and the watch runs there as
// well.
func TestTCPSlowLorisLargeFrame(t *testing.T) {
	f := newAbuse(t, []func(*tcp.Config){func(c *tcp.Config) {
		c.FrameTimeout = 300 * time.Millisecond
		c.MaxFrameBytes = 1 << 20
	}})
	nc := f.raw(t, true)
	frame := protocol.AppendPushRequest(nil, 6, &protocol.PushRequest{Items: []protocol.PushItem{{Queue: "slow", Payload: make([]byte, 512<<10)}}})
	go func() {
		if _, err := nc.Write(frame[:128<<10]); err != nil {
			return
		}
		for i := 128 << 10; i < len(frame); i++ {
			if _, err := nc.Write(frame[i : i+1]); err != nil {
				return
			}
			time.Sleep(30 * time.Millisecond)
		}
	}()
	took := closedWithin(t, nc, 1300*time.Millisecond)
	if took < 250*time.Millisecond {
		t.Fatalf("closed after %v, before FrameTimeout: not for trickling", took)
	}
	t.Logf("closed after %v", took.Round(time.Millisecond))
	f.othersStillWork(t)
}

// TestConnectionFloods: past MaxConns (20 here) new connections are
// refused with a clear answer and closed; the connections already open are
// served, the servers keep running, and once the flood leaves new
// connections are admitted again.
func TestConnectionFloods(t *testing.T) {
	const limit = 20
	f := newAbuse(t, []func(*tcp.Config){func(c *tcp.Config) { c.MaxConns = limit }},
		func(c *httpapi.Config) { c.MaxConns = limit })
	t.Run("tcp", func(t *testing.T) {
		var held []net.Conn
		for i := 0; i < limit-1; i++ { // the fixture's client holds one
			held = append(held, f.raw(t, true))
		}
		refused := 0
		for i := 0; i < 100; i++ {
			nc, err := net.Dial("tcp", f.b.TCPAddr().String())
			if err != nil {
				t.Fatal(err)
			}
			nc.SetReadDeadline(time.Now().Add(2 * time.Second))
			fr, err := protocol.NewReader(nc, 0).Next()
			var er protocol.ErrorReply
			if err == nil && fr.IsError() && er.Decode(fr.Body) == nil && er.Code == protocol.CodeOverloaded && strings.Contains(er.Message, "too many connections") {
				refused++
			}
			nc.Close()
		}
		if refused < 100 {
			t.Fatalf("%d of 100 connections past the limit were refused with CodeOverloaded", refused)
		}
		f.othersStillWork(t)
		for _, nc := range held {
			nc.Close()
		}
		brokertest.CheckFor(t, abuseWait, func() error {
			if n := f.b.TCPConnections(); n > 2 {
				return fmt.Errorf("%d TCP connections still open, want the connections released", n)
			}
			return nil
		})
		f.raw(t, true) // admitted again
	})
	t.Run("http", func(t *testing.T) {
		var held []net.Conn
		for i := 0; i < limit-2; i++ {
			nc, err := net.Dial("tcp", f.httpAddr)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, nc)
		}
		refused := 0
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := 0; i < 100; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				nc, err := net.Dial("tcp", f.httpAddr)
				if err != nil {
					return
				}
				defer nc.Close()
				nc.SetDeadline(time.Now().Add(5 * time.Second))
				nc.Write([]byte("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"))
				resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
				if err == nil && resp.StatusCode == http.StatusServiceUnavailable {
					b, _ := io.ReadAll(resp.Body)
					if strings.Contains(string(b), "too many connections") {
						mu.Lock()
						refused++
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		if refused < 50 {
			t.Fatalf("%d of 100 connections past the limit were answered 503", refused)
		}
		f.othersStillWork(t)
		for _, nc := range held {
			nc.Close()
		}
		brokertest.CheckFor(t, abuseWait, func() error { // a new connection is served
			resp, err := http.Get("http://" + f.httpAddr + "/health")
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("a new connection: /health answered %d", resp.StatusCode)
			}
			return nil
		})
	})
}

// TestParkedLongPollMemory parks thousands of long polls (5,000 over the
// binary protocol on 2 connections, 1,000 over HTTP, one connection each)
// and measures the server's memory (heap and goroutine stacks) per parked
// poll. Bounds: 4 KiB per TCP poll, 64 KiB per HTTP poll (two goroutines,
// the connection's buffers and the request). Parked polls are released
// when their connections close.
func TestParkedLongPollMemory(t *testing.T) {
	f := newAbuse(t, []func(*tcp.Config){func(c *tcp.Config) { c.MaxInFlight = 4096 }})
	const tcpPolls, httpPolls = 5000, 1000
	if n := fdLimit(); n < 2*httpPolls+500 {
		t.Skipf("file descriptor limit %d is too low", n)
	}
	before := memInUse()
	var conns []net.Conn
	for c := 0; c < 2; c++ {
		nc := f.raw(t, true)
		conns = append(conns, nc)
		var buf []byte
		for i := 0; i < tcpPolls/2; i++ {
			buf = protocol.AppendPopRequest(buf, uint64(100+i), &protocol.PopRequest{Queue: "parked", Group: fmt.Sprint("g", i%50), Wait: true, TimeoutMs: 60000, Batch: 1})
		}
		if _, err := nc.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	brokertest.CheckFor(t, abuseWait, func() error {
		if n := f.b.TCPInFlight(); n < tcpPolls {
			return fmt.Errorf("%d of %d TCP polls parked", n, tcpPolls)
		}
		return nil
	})
	tcpBytes := int64(memInUse()) - int64(before)
	t.Logf("%d parked TCP polls: %d KiB of heap and stacks, %d bytes each", tcpPolls, tcpBytes>>10, tcpBytes/tcpPolls)
	if tcpBytes/tcpPolls > 4<<10 {
		t.Fatalf("%d bytes per parked TCP poll", tcpBytes/tcpPolls)
	}
	f.othersStillWork(t)

	before = memInUse()
	var hconns []net.Conn
	for i := 0; i < httpPolls; i++ {
		nc, err := net.Dial("tcp", f.httpAddr)
		if err != nil {
			t.Fatal(err)
		}
		hconns = append(hconns, nc)
		fmt.Fprintf(nc, "GET /api/v1/pop/queue/parked-http?wait=true&timeout=60000&consumerGroup=h%d HTTP/1.1\r\nHost: x\r\n\r\n", i%50)
	}
	brokertest.CheckFor(t, abuseWait, func() error {
		if n := parkedHTTP(t, f); n < httpPolls {
			return fmt.Errorf("%d of %d HTTP polls parked", n, httpPolls)
		}
		return nil
	})
	httpBytes := int64(memInUse()) - int64(before)
	t.Logf("%d parked HTTP polls: %d KiB of heap and stacks, %d bytes each (%d goroutines in the process)",
		httpPolls, httpBytes>>10, httpBytes/httpPolls, runtime.NumGoroutine())
	if httpBytes/httpPolls > 64<<10 {
		t.Fatalf("%d bytes per parked HTTP poll", httpBytes/httpPolls)
	}
	f.othersStillWork(t)
	for _, nc := range append(conns, hconns...) {
		nc.Close()
	}
	brokertest.CheckFor(t, abuseWait, func() error {
		if tn, hn := f.b.TCPInFlight(), parkedHTTP(t, f); tn != 0 || hn != 0 {
			return fmt.Errorf("%d TCP and %d HTTP polls still parked, want them gone with their connections", tn, hn)
		}
		return nil
	})
}

// parkedHTTP reads the HTTP bridge's count of parked long polls.
func parkedHTTP(t *testing.T, f *abuseFixture) int {
	_, body := f.do(t, "GET", "/metrics/prometheus", "", nil)
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "regent_http_parked_polls "); ok {
			var n int
			fmt.Sscan(v, &n)
			return n
		}
	}
	return -1
}

// abuseWait is how long the tests wait for the servers to reach a state.
const abuseWait = 20 * time.Second

func fdLimit() int {
	b, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		return 1 << 20
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "Max open files") {
			var soft int
			fmt.Sscan(strings.Fields(line)[3], &soft)
			return soft
		}
	}
	return 1 << 20
}
