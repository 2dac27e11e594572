package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeLimitsAndJSON: the limits are serve's settings, and serve
// --json prints one JSON object at start and logs in JSON. A message of
// exactly --max-message is taken and one byte more is refused naming the
// limit; an HTTP body over --max-body gets 413; limits that contradict
// each other are usage mistakes.
func TestServeLimitsAndJSON(t *testing.T) {
	_, bin := buildRegent(t)
	cmd := exec.Command(bin, "serve", "--json", "--data", t.TempDir(), "--tcp", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--max-message", "1KiB", "--max-frame", "64KiB", "--max-body", "4KiB", "--max-bodies-in-flight", "1MiB",
		"--pprof", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	logs := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case logs <- sc.Text():
			default:
			}
		}
	}()
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(20 * time.Second):
		t.Fatal("regent serve --json printed nothing in 20 s")
	}
	var banner struct {
		TCP, HTTP                      string
		MaxMessageBytes, MaxFrameBytes int
		MaxBodyBytes                   int64
		MaxBodiesInFlightByte          int64 `json:"maxBodiesInFlightBytes"`
		Auth                           bool
		MemoryLimit                    int64 `json:"memoryLimitBytes"`
		CacheBytes                     int64
		Pprof                          string
	}
	if err := json.Unmarshal([]byte(line), &banner); err != nil {
		t.Fatalf("serve --json's first line is not JSON: %v\n%s", err, line)
	}
	// --pprof: Go's profiles on their own listener, never on the HTTP door.
	for _, c := range []struct {
		addr string
		want int
	}{{banner.Pprof, 200}, {banner.HTTP, 404}} {
		resp, err := http.Get("http://" + c.addr + "/debug/pprof/heap?debug=1")
		if err != nil {
			t.Fatalf("--pprof (banner %q): %v", banner.Pprof, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want || (c.want == 200 && !strings.Contains(string(b), "heap profile")) {
			t.Fatalf("GET %s/debug/pprof/heap: %d %.100s, want %d", c.addr, resp.StatusCode, b, c.want)
		}
	}
	if banner.TCP == "" || banner.HTTP == "" || banner.MaxMessageBytes != 1<<10 || banner.MaxFrameBytes != 64<<10 ||
		banner.MaxBodyBytes != 4<<10 || banner.MaxBodiesInFlightByte != 1<<20 || banner.Auth ||
		banner.MemoryLimit != 128<<20 || banner.CacheBytes != 8<<20 {
		t.Fatalf("banner %+v from %s", banner, line)
	}
	select {
	case l := <-logs:
		if !json.Valid([]byte(l)) {
			t.Fatalf("serve --json logs a line that is not JSON: %s", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve logged nothing")
	}

	if code, out, errs := runBin(t, bin, "", "--addr", banner.TCP, "push", "limits", strings.Repeat("m", 1<<10)); code != 0 {
		t.Fatalf("a message of --max-message: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs := runBin(t, bin, "", "--addr", banner.TCP, "push", "limits", strings.Repeat("m", 1<<10+1))
	if code != 1 || !strings.Contains(out+errs, "above the limit of 1024") {
		t.Fatalf("a message one byte over --max-message: exit %d, want 1 and an error naming the limit of 1024\n%s%s", code, out, errs)
	}
	body := fmt.Sprintf(`{"items":[{"queue":"limits","payload":%q}]}`, strings.Repeat("h", 5<<10))
	resp, err := http.Post("http://"+banner.HTTP+"/api/v1/push", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("an HTTP body over --max-body: %s, want 413", resp.Status)
	}

	for _, bad := range [][]string{
		{"--max-frame", "1MiB", "--max-message", "2MiB"},
		{"--max-frame", "1KiB"},
		{"--max-frame", "32MiB"},
		{"--max-message", "0"},
		{"--max-message", "ten"},
		{"--max-body", "12XB"},
		{"--max-body", "8MiB", "--max-bodies-in-flight", "4MiB"},
		{"--memory-limit", "16MiB"},
		{"--memory-limit", "lots"},
	} {
		args := append([]string{"serve", "--data", t.TempDir(), "--tcp", "127.0.0.1:0", "--http", "127.0.0.1:0"}, bad...)
		code, out, errs := runBin(t, bin, "", args...)
		if code != 2 || !strings.Contains(errs, bad[len(bad)-2]) {
			t.Errorf("serve %v: exit %d, want 2 naming %s\n%s%s", bad, code, bad[len(bad)-2], out, errs)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "1048576": 1 << 20, "1MiB": 1 << 20, "512KiB": 512 << 10, "1 GiB": 1 << 30,
		"1MB": 1e6, "3KB": 3e3, "7B": 7, "1024GiB": 1 << 40,
	} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1.5MiB", "MiB", "1TiB", "1025GiB", "1 M", "9223372036854775807KiB"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		}
	}
}

// TestMemoryLimitShares: --memory-limit bounds what the broker holds, not
// just the cache: the cache of recent payloads, the journal's entries decoded
// for reads, the records waiting for the disk and HTTP request bodies each
// get their share (the last unless --max-bodies-in-flight is given, and
// never less than one body of --max-body).
func TestMemoryLimitShares(t *testing.T) {
	for _, c := range []struct {
		args                        []string
		mem                         int64
		cache, read, queued, bodies int64
	}{
		{nil, 128 << 20, 8 << 20, 8 << 20, 32 << 20, 64 << 20},
		{[]string{"--memory-limit", "64MiB"}, 64 << 20, 4 << 20, 4 << 20, 16 << 20, 64 << 20},
		{[]string{"--memory-limit", "64MiB", "--max-body", "1MiB"}, 64 << 20, 4 << 20, 4 << 20, 16 << 20, 16 << 20},
		{[]string{"--memory-limit", "1GiB"}, 1 << 30, 64 << 20, 64 << 20, 256 << 20, 256 << 20},
		{[]string{"--memory-limit", "1GiB", "--max-bodies-in-flight", "100MiB"}, 1 << 30, 64 << 20, 64 << 20, 256 << 20, 100 << 20},
	} {
		cfg, code, ok := parseServe(c.args, io.Discard)
		if !ok {
			t.Fatalf("%q: exit %d", c.args, code)
		}
		o := cfg.opts
		if cfg.memoryLimit != c.mem || o.Engine.CacheBytes != c.cache || int64(o.Journal.ReadCacheBytes) != c.read ||
			int64(o.Journal.MaxQueuedBytes) != c.queued || o.MaxBodyBytesInFlight != c.bodies {
			t.Errorf("%q: limit %d, cache %d, read cache %d, queued %d, bodies %d; want %d, %d, %d, %d, %d", c.args,
				cfg.memoryLimit, o.Engine.CacheBytes, o.Journal.ReadCacheBytes, o.Journal.MaxQueuedBytes, o.MaxBodyBytesInFlight,
				c.mem, c.cache, c.read, c.queued, c.bodies)
		}
	}
}
