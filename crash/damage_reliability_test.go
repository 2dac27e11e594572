package crash

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/client"
)

// TestMissingSegmentRefusedThenSalvaged: a WAL segment file in the middle of
// the journal is deleted while the broker is down (stopped cleanly: the
// snapshot covers everything, the messages stay in the journal). `regent
// serve` refuses to start, naming the file, the entries missing and
// --salvage (before, it started without a word and a pop of the queue
// answered 500 once it reached them, for ever). With --salvage it starts, logs the messages lost (queue,
// partition, offsets), and over HTTP, pops of any partition and of each
// partition answer 200 or 204, never 500, and deliver every message that
// survived once; survivors and the lost add up to what was pushed. Then it
// restarts without --salvage.
func TestMissingSegmentRefusedThenSalvaged(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	cfg := &Config{Binary: binary(t), Dir: t.TempDir(), StartTimeout: 30 * time.Second}
	b := startT(t, cfg)
	c := dialT(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// About 1 MiB each, 80 of them, over three partitions: many segments
	// (with the default 1 MiB segments, one entry each; the message then
	// names the one entry missing).
	rnd := rand.New(rand.NewPCG(11, 12))
	const n = 80
	raw := make([]byte, 768<<10)
	for i := 0; i < n; i++ {
		part := fmt.Sprint("p", i%3)
		for k := range raw {
			raw[k] = byte(rnd.Uint32())
		}
		pl := fmt.Sprintf("big-%s-%04d-%s", part, i, base64.StdEncoding.EncodeToString(raw))
		res, err := c.Queue("big").Partition(part).Push(ctx, []byte(pl))
		if err != nil || res[0].Status != client.PushQueued {
			t.Fatalf("push %d: %+v %v", i, res, err)
		}
	}
	if err := b.stop(30 * time.Second); err != nil { // a clean stop: its snapshot covers every entry
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(b.dataDir, "wal", strings.Repeat("[0-9]", 20)))
	sort.Strings(segs)
	if len(segs) < 4 {
		t.Fatalf("want at least 4 segments, have %d", len(segs))
	}
	gone := segs[len(segs)/2]
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}

	out, err := runServe(t, cfg.Binary, b.dataDir)
	if err == nil || !strings.Contains(out, "refusing to open") || !strings.Contains(out, "--salvage") ||
		!strings.Contains(out, filepath.Base(gone)) || !regexp.MustCompile(`(entry \d+ is|entries \S+ are) missing`).MatchString(out) {
		t.Fatalf("serve with a segment missing: %v\n%s", err, out)
	}
	t.Logf("without --salvage:\n%s", out)

	cfg.Args = []string{"--salvage"}
	if err := b.start(context.Background()); err != nil {
		t.Fatal(err)
	}
	logText := b.logTail()
	m := regexp.MustCompile(`lost_messages=(\d+) `).FindStringSubmatch(logText)
	if m == nil || !strings.Contains(logText, "recovery SALVAGE: messages lost to journal damage") || !strings.Contains(logText, "queue=big partition=p") {
		t.Fatalf("the loss is not reported:\n%s", logText)
	}
	lost, _ := strconv.Atoi(m[1])
	if lost == 0 {
		t.Fatalf("nothing reported lost:\n%s", logText)
	}
	t.Logf("with --salvage, the log says:\n%s", logText)

	// regent queue and the HTTP resource name the lost offsets, and add up
	// to what the log says.
	qout, err := exec.Command(cfg.Binary, "queue", "big", "--addr", b.tcpAddr).CombinedOutput()
	listed := 0
	for _, m := range regexp.MustCompile(`partition p\d: offsets (\S+) LOST to journal damage`).FindAllStringSubmatch(string(qout), -1) {
		listed += countOffsets(t, m[1])
	}
	if err != nil || listed != lost || !strings.Contains(string(qout), fmt.Sprintf("queue big: %d messages", n-lost)) {
		t.Fatalf("regent queue lists %d lost offsets, the log %d, %d held (%v):\n%s", listed, lost, n-lost, err, qout)
	}
	t.Logf("regent queue big:\n%s", qout)
	brokertest.CheckFor(t, 20*time.Second, httpUp(b.httpAddr))
	resp, err := http.Get("http://" + b.httpAddr + "/api/v1/resources/queues/big")
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Partitions []struct {
			Lost []struct{ First, Last int } `json:"lostOffsets"`
		} `json:"partitions"`
	}
	err = json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	listed = 0
	for _, p := range res.Partitions {
		for _, r := range p.Lost {
			listed += r.Last - r.First + 1
		}
	}
	if err != nil || listed != lost {
		t.Fatalf("GET /api/v1/resources/queues/big lists %d lost offsets, the log %d (%v)", listed, lost, err)
	}

	// Any partition, then each partition by name (another group), over HTTP
	// (whose port opens just after the TCP one that start waited for).
	brokertest.CheckFor(t, 20*time.Second, httpUp(b.httpAddr))
	any := httpDrain(t, b.httpAddr, "/api/v1/pop/queue/big", "any")
	byName := map[string]bool{}
	for p := 0; p < 3; p++ {
		for k := range httpDrain(t, b.httpAddr, fmt.Sprintf("/api/v1/pop/queue/big/partition/p%d", p), "named") {
			byName[k] = true
		}
	}
	if len(any) != len(byName) || len(any)+lost != n {
		t.Fatalf("delivered %d to a group popping any partition, %d by partition; %d lost; %d were pushed", len(any), len(byName), lost, n)
	}
	for k := range any {
		if !byName[k] {
			t.Fatalf("%s delivered to one group, not the other", k)
		}
	}
	t.Logf("%d of %d messages delivered, %d reported lost, no pop answered 500", len(any), n, lost)

	// The salvage is done for good: a start without --salvage is a plain one.
	if err := b.stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	cfg.Args = nil
	if err := b.start(context.Background()); err != nil {
		t.Fatalf("restart without --salvage: %v", err)
	}
}

// httpUp checks that the HTTP door at addr answers /health.
func httpUp(addr string) func() error {
	return func() error {
		resp, err := http.Get("http://" + addr + "/health")
		if err != nil {
			return fmt.Errorf("the HTTP door does not answer: %w", err)
		}
		resp.Body.Close()
		return nil
	}
}

// httpDrain pops path (autoAck, group) until it answers 204, checking that
// every answer is 200 or 204 and that no message comes twice. It returns the
// messages' keys ("big-p0-0003").
func httpDrain(t *testing.T, addr, path, group string) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	hc := &http.Client{Timeout: 30 * time.Second}
	for {
		resp, err := hc.Get("http://" + addr + path + "?batch=4&autoAck=true&consumerGroup=" + group)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusNoContent:
			return got
		case http.StatusOK:
		default:
			t.Fatalf("GET %s: %d %.300s", path, resp.StatusCode, body)
		}
		var out struct {
			Messages []struct {
				Data string `json:"data"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &out); err != nil || len(out.Messages) == 0 {
			t.Fatalf("GET %s: %v %.300s", path, err, body)
		}
		for _, m := range out.Messages {
			k := m.Data[:min(len(m.Data), 11)]
			if got[k] || !strings.HasPrefix(k, "big-p") {
				t.Fatalf("GET %s: %q twice or unknown", path, k)
			}
			got[k] = true
		}
	}
}

// countOffsets counts the offsets of a list such as "3-9,12".
func countOffsets(t *testing.T, list string) int {
	t.Helper()
	n := 0
	for _, r := range strings.Split(list, ",") {
		first, last, ok := strings.Cut(r, "-")
		if !ok {
			last = first
		}
		f, err1 := strconv.Atoi(first)
		l, err2 := strconv.Atoi(last)
		if err1 != nil || err2 != nil || l < f {
			t.Fatalf("offsets %q", list)
		}
		n += l - f + 1
	}
	return n
}
