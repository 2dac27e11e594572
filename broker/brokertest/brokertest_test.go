package brokertest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/client"
)

// TestStartServesBothDoors: a started broker answers the client over TCP
// and /health over HTTP.
func TestStartServesBothDoors(t *testing.T) {
	b := brokertest.Start(t, broker.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, b.TCPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Queue("q").Push(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if m, err := c.Queue("q").AutoAck(true).Pop(ctx); err != nil || len(m) != 1 || string(m[0].Payload) != "x" {
		t.Fatalf("pop: %v %v", m, err)
	}
	resp, err := http.Get("http://" + b.HTTPAddr().String() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/health: %s", resp.Status)
	}
	if err := b.Healthy(); err != nil {
		t.Fatal(err)
	}
}

// fakeTB records a failure instead of ending the test.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}

func TestCheckFor(t *testing.T) {
	n := 0
	brokertest.CheckFor(t, 5*time.Second, func() error {
		if n++; n < 3 {
			return fmt.Errorf("call %d", n)
		}
		return nil
	})
	if n != 3 {
		t.Fatalf("f called %d times, want 3", n)
	}
	// Past the deadline it fails with the last error seen.
	f := &fakeTB{TB: t}
	start := time.Now()
	calls := 0
	brokertest.CheckFor(f, 100*time.Millisecond, func() error {
		calls++
		return errors.New("still " + fmt.Sprint(calls))
	})
	if took := time.Since(start); took < 100*time.Millisecond || took > 2*time.Second {
		t.Errorf("CheckFor gave up after %v", took)
	}
	if want := fmt.Sprintf("still %d", calls); !strings.Contains(f.failed, want) {
		t.Fatalf("failed with %q, want the last error %q", f.failed, want)
	}
}
