package netserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver/internal/testhooks"
)

// TestLargestPayloadPopsOverBothDoors: the largest payload a push accepts
// (one byte more is refused) is popped whole over TCP and over HTTP,
// whichever door pushed it.
func TestLargestPayloadPopsOverBothDoors(t *testing.T) {
	if testhooks.Race {
		t.Skip("moves 16 MiB payloads: minutes under the race detector")
	}
	b := brokertest.Start(t, broker.Options{Engine: engine.Config{SnapshotEveryBytes: -1}})
	c, e := dial(t, b), b.Engine()
	base := "http://" + b.HTTPAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	max := e.MaxPayloadBytes()
	if max < 16<<20-4096 {
		t.Fatalf("the largest payload is %d bytes: far below the 16 MiB frame", max)
	}
	rnd := rand.New(rand.NewPCG(3, 4))
	text := func(n int) []byte { // JSON-safe, so both doors carry it as is
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a' + byte(rnd.IntN(26))
		}
		return b
	}
	// Over TCP: one byte too many is refused; the largest goes through.
	long := make([]byte, max+1)
	res, err := c.Push(ctx, client.Item{Queue: "huge", Partition: "tcp", Payload: long})
	if err == nil && res[0].Status != client.PushFailed {
		t.Fatalf("a payload of %d bytes (limit %d) was %v", max+1, max, res[0].Status)
	}
	viaTCP := text(max)
	if res, err := c.Push(ctx, client.Item{Queue: "huge", Partition: "tcp", Payload: viaTCP}); err != nil || res[0].Status != client.PushQueued {
		t.Fatalf("push of the largest payload over TCP: %v %+v", err, res)
	}
	// Over HTTP: a JSON string payload of the largest size.
	viaHTTP := text(max - 2) // with its quotes, max bytes as stored
	body := fmt.Sprintf(`{"items":[{"queue":"huge","partition":"http","payload":"%s"}]}`, viaHTTP)
	resp, err := http.Post(base+"/api/v1/push", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 || bytes.Contains(out, []byte(`"failed"`)) {
		t.Fatalf("push of the largest payload over HTTP: %d %.300s", resp.StatusCode, out)
	}
	for _, part := range []string{"tcp", "http"} {
		want := viaTCP
		if part == "http" {
			want = append(append([]byte{'"'}, viaHTTP...), '"')
		}
		// Over TCP.
		m, err := c.Queue("huge").Partition(part).Group("tcp-reader").Pop(ctx)
		if err != nil || len(m) != 1 || !bytes.Equal(m[0].Payload, want) {
			t.Fatalf("pop over TCP of the largest message pushed over %s: %d messages, %v", part, len(m), err)
		}
		// Over HTTP.
		resp, err := http.Get(base + "/api/v1/pop/queue/huge/partition/" + part + "?consumerGroup=http-reader")
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Messages []struct {
				Data json.RawMessage `json:"data"`
			} `json:"messages"`
		}
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || len(got.Messages) != 1 {
			t.Fatalf("pop over HTTP of the largest message pushed over %s: %d, %v", part, len(got.Messages), err)
		}
		if part == "http" && !bytes.Equal(got.Messages[0].Data, want) {
			t.Fatalf("pop over HTTP: the payload differs (%d bytes, want %d)", len(got.Messages[0].Data), len(want))
		}
		if part == "tcp" && len(got.Messages[0].Data) < len(want) {
			t.Fatalf("pop over HTTP of the TCP payload: %d bytes", len(got.Messages[0].Data))
		}
	}
}
