package httpapi_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/netserver/httpapi"
)

// TestRequestBodiesInFlightAreBounded: request bodies held at once are
// bounded by MaxBodyBytesInFlight across connections: with 8 MiB of room,
// two clients trickling 4 MiB bodies hold it all, and a third body waits
// BodyWait and is answered 503 with Retry-After without being read; once
// the two finish, the next one goes through. (Bodies in flight were bounded
// only by MaxConns × MaxBodyBytes: 40 connections × 8 MiB added 320 MB.)
func TestRequestBodiesInFlightAreBounded(t *testing.T) {
	h := newDoorHarness(t, func(c *httpapi.Config, _ *engineConfig) {
		c.MaxBodyBytes, c.MaxBodyBytesInFlight, c.BodyWait = 4<<20, 8<<20, 200*time.Millisecond
	})
	addr := strings.TrimPrefix(h.url, "http://")
	payload := strings.Repeat("y", 4<<20-100)
	body := fmt.Sprintf(`{"items":[{"queue":"b","payload":"%s"}]}`, payload)
	header := fmt.Sprintf("POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	// Two clients send their headers and half their bodies, then stall.
	var stalled []net.Conn
	for i := 0; i < 2; i++ {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.Write([]byte(header))
		nc.Write([]byte(body[:len(body)/2]))
		stalled = append(stalled, nc)
	}
	brokertest.CheckFor(t, 10*time.Second, func() error {
		if n := httpapi.BodyBytesHeld(h.s); n != 2*int64(len(body)) {
			return fmt.Errorf("%d bytes held, waiting for the two stalled bodies to hold the room", n)
		}
		return nil
	})
	// A third body finds no room: 503 with Retry-After, after BodyWait.
	start := time.Now()
	code, resp := h.do("POST", "/api/v1/push", body)
	if code != http.StatusServiceUnavailable || !strings.Contains(string(resp), "request bodies") {
		t.Fatalf("a body past MaxBodyBytesInFlight: %d %s", code, resp)
	}
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Fatalf("refused after %v, without waiting for room", waited)
	}
	// The stalled ones finish and are queued; then there is room again.
	for _, nc := range stalled {
		nc.Write([]byte(body[len(body)/2:]))
		st, err := http.ReadResponse(bufio.NewReader(nc), nil)
		if err != nil || st.StatusCode != http.StatusCreated {
			t.Fatalf("a stalled body, finished: %v %v", st, err)
		}
		st.Body.Close()
	}
	brokertest.CheckFor(t, 10*time.Second, func() error {
		if n := httpapi.BodyBytesHeld(h.s); n != 0 {
			return fmt.Errorf("%d bytes held, waiting for the room to be given back", n)
		}
		return nil
	})
	if code, resp := h.do("POST", "/api/v1/push", body); code != http.StatusCreated {
		t.Fatalf("a body once there is room: %d %.200s", code, resp)
	}
	if httpapi.BodyBytesHeld(h.s) != 0 {
		t.Fatalf("%d bytes still held after every request was answered", httpapi.BodyBytesHeld(h.s))
	}
}
