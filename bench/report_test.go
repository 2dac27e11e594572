package bench

import (
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func fakeResult(scen, target, durability string, round int, mps float64, p99 time.Duration) Result {
	c := Config{Scenario: scen, Target: target}
	c.Defaults()
	return Result{Config: c, Durability: durability, Round: round, MsgsPerSec: mps, MBPerSec: mps * 128 / 1e6,
		Msgs: int64(mps * 10), Elapsed: 10 * time.Second,
		Latency: Latency{P50: int64(p99 / 4), P99: int64(p99), P999: int64(2 * p99), Max: int64(3 * p99)},
		Server:  &ServerUsage{CPUSeconds: 5, CPUPerMsgUs: 5e6 / (mps * 10), PeakRSS: 100 << 20}}
}

func writeFixtures(t *testing.T, dir string) {
	t.Helper()
	env := Env{Date: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), CPU: "Test CPU", Cores: 2, MemoryB: 24 << 30,
		Kernel: "6.1", OS: "linux/amd64", GoVersion: "go1.26.8", Commit: "abc123"}
	ra := RegentDurability("always")
	nd, na := NATSDurability(false), NATSDurability(true)
	cmp := &File{Kind: "compare", Command: "regent bench compare push --start-peer", Env: env}
	for r, f := range []float64{1, 0.8, 1.2} {
		cmp.Results = append(cmp.Results,
			fakeResult(Push, TargetRegent, ra, r+1, 600000*f, 5*time.Millisecond),
			fakeResult(Push, TargetNATS, nd, r+1, 100000*f, 20*time.Millisecond),
			fakeResult(Push, TargetNATS, na, r+1, 3000*f, 300*time.Millisecond))
	}
	sweep := &File{Kind: "sweep", Command: "regent bench push --batch 1,10,100 --target regent,nats --start-peer", Env: env}
	for _, b := range []int{1, 10, 100} {
		for _, tg := range []string{TargetRegent, TargetNATS} {
			r := fakeResult(Push, tg, ra, 0, float64(1000*b), time.Millisecond)
			r.Batch, r.Sweep = b, "batch"
			sweep.Results = append(sweep.Results, r)
		}
	}
	parts := &File{Kind: "sweep", Command: "regent bench partitions --partitions 1,100,100000", Env: env}
	for _, p := range []int{1, 100, 100000} {
		r := fakeResult(Partitions, TargetRegent, ra, 0, 200000-float64(p), time.Millisecond)
		r.Partitions, r.Sweep = p, "partitions"
		parts.Results = append(parts.Results, r)
	}
	run := &File{Kind: "run", Command: "regent bench http", Env: env,
		Results: []Result{fakeResult(HTTP, TargetRegentHTTP, ra, 0, 150000, 40*time.Millisecond)}}
	for name, f := range map[string]*File{"a-compare": cmp, "b-batch": sweep, "c-parts": parts, "d-http": run} {
		if err := WriteFile(filepath.Join(dir, name+".json"), f); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte("Hand-written notes.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReport(t *testing.T) {
	dir := t.TempDir()
	results := filepath.Join(dir, "docs", "bench", "results")
	writeFixtures(t, results)
	md := filepath.Join(dir, "BENCHMARKS.md")
	before := "# Benchmarks\n\nHand-written go-test figures.\n\n"
	after := "\n\n## Later hand-written section\n"
	if err := os.WriteFile(md, []byte(before+MarkBegin+"\nold generated text\n"+MarkEnd+after), 0o644); err != nil {
		t.Fatal(err)
	}
	o := ReportOptions{Results: results, Markdown: md, Charts: filepath.Join(dir, "docs", "bench")}
	n, err := Report(o)
	if err != nil || n != 4 {
		t.Fatalf("Report: %d files, %v", n, err)
	}
	got, _ := os.ReadFile(md)
	s := string(got)
	if !strings.HasPrefix(s, before) || !strings.HasSuffix(s, after) {
		t.Fatalf("hand-written parts changed:\n%s", s)
	}
	if strings.Contains(s, "old generated text") || strings.Count(s, MarkBegin) != 1 || strings.Count(s, MarkEnd) != 1 {
		t.Fatalf("section not replaced once:\n%s", s)
	}
	for _, want := range []string{
		"**Machine:** Test CPU, 2 cores, 24 GiB", "go1.26.8", "`abc123`",
		"regent bench compare push --start-peer", "regent bench http",
		"| push |", "| http |", "600,000", // Regent's median msgs/s
		"**6.0×** (6.0, 6.0, 6.0)", "**200.0×**", // ratios per round and median
		"| push | 4 producers × 8 in flight, batch 100 | nats (default sync) | msgs/s ≥ 4× | 6.0× | **met** | `abc123`, 2026-12-02 |",
		"| push | 4 producers × 8 in flight, batch 100 | nats (sync always) | msgs/s ≥ 100× | 200.0× | **met** | `abc123`, 2026-12-02 |",
		"](docs/bench/batch.svg)", "](docs/bench/partitions.svg)", "](docs/bench/latency.svg)",
		"Hand-written notes.",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, c := range []string{"batch.svg", "partitions.svg", "latency.svg"} {
		b, err := os.ReadFile(filepath.Join(o.Charts, c))
		if err != nil {
			t.Fatal(err)
		}
		checkSVG(t, c, b)
	}
	// Idempotent.
	if _, err := Report(o); err != nil {
		t.Fatal(err)
	}
	again, _ := os.ReadFile(md)
	if string(again) != s {
		t.Fatal("a second report changed the file")
	}
}

// checkSVG: well-formed XML, an svg root with a size, and data drawn.
func checkSVG(t *testing.T, name string, b []byte) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(string(b)))
	root, shapes := "", 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: not well-formed: %v", name, err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
				var w, h bool
				for _, a := range se.Attr {
					w = w || a.Name.Local == "width"
					h = h || a.Name.Local == "height"
				}
				if !w || !h {
					t.Errorf("%s: svg without width and height", name)
				}
			}
			if se.Name.Local == "circle" || se.Name.Local == "rect" || se.Name.Local == "polyline" {
				shapes++
			}
		}
	}
	if root != "svg" || shapes < 3 {
		t.Errorf("%s: root %q with %d shapes", name, root, shapes)
	}
	if strings.Contains(string(b), "NaN") || strings.Contains(string(b), "Inf") {
		t.Errorf("%s: NaN or Inf in coordinates", name)
	}
}

func TestReportCreatesFileAndMarkers(t *testing.T) {
	dir := t.TempDir()
	writeFixtures(t, dir)
	md := filepath.Join(dir, "NEW.md")
	if _, err := Report(ReportOptions{Results: dir, Markdown: md, Charts: filepath.Join(dir, "charts")}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(md)
	if !strings.HasPrefix(string(b), "# Benchmarks\n\n"+MarkBegin) || !strings.Contains(string(b), "](charts/batch.svg)") {
		t.Fatalf("new file:\n%.300s", b)
	}
	// A file without markers keeps its text and gets the section at its end.
	md2 := filepath.Join(dir, "OLD.md")
	os.WriteFile(md2, []byte("# Mine\n\ntext\n"), 0o644)
	if _, err := Report(ReportOptions{Results: dir, Markdown: md2, Charts: filepath.Join(dir, "charts")}); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(md2)
	if !strings.HasPrefix(string(b), "# Mine\n\ntext\n\n"+MarkBegin) || !strings.HasSuffix(string(b), MarkEnd+"\n") {
		t.Fatalf("file without markers:\n%.300s", b)
	}
	if _, err := Report(ReportOptions{Results: t.TempDir(), Markdown: md2, Charts: dir}); err == nil {
		t.Fatal("no error without result files")
	}
}

func TestSummarizeRatios(t *testing.T) {
	rs := []Result{
		fakeResult(Consume, TargetRegent, "a", 1, 100, time.Millisecond),
		fakeResult(Consume, TargetNATS, NATSDurability(false), 1, 50, time.Millisecond),
		fakeResult(Consume, TargetRegent, "a", 2, 300, time.Millisecond),
		fakeResult(Consume, TargetNATS, NATSDurability(false), 2, 100, time.Millisecond),
		fakeResult(Consume, TargetRegent, "a", 3, 200, time.Millisecond),
		fakeResult(Consume, TargetNATS, NATSDurability(false), 3, 25, time.Millisecond),
	}
	s := Summarize(rs)
	if len(s) != 2 || s[0].MsgsPerSec != 200 || s[1].MsgsPerSec != 50 {
		t.Fatalf("medians: %+v", s)
	}
	// Ratios per round 2, 3, 8: median 3 (not 200/50 = 4).
	if s[1].Ratio != 3 || len(s[1].Ratios) != 3 {
		t.Fatalf("ratio %v from %v, want 3", s[1].Ratio, s[1].Ratios)
	}
}

func TestParseIntsAndCommandLine(t *testing.T) {
	got, err := ParseInts("1, 10,1e5,100_000")
	if err != nil || len(got) != 4 || got[2] != 100000 || got[3] != 100000 {
		t.Fatalf("ParseInts: %v %v", got, err)
	}
	for _, bad := range []string{"", "x", "1.5"} {
		if _, err := ParseInts(bad); err == nil {
			t.Errorf("ParseInts(%q): no error", bad)
		}
	}
	if s := CommandLine([]string{"regent", "bench", "--peer-sync", "a b", "it's"}); s != `regent bench --peer-sync 'a b' 'it'\''s'` {
		t.Fatalf("CommandLine: %s", s)
	}
}

func TestProcParsers(t *testing.T) {
	d, err := parseStatCPU([]byte("123 (a b) c) S 1 2 3 4 5 6 7 8 9 10 250 150 0 0"))
	if err != nil || d != 4*time.Second {
		t.Fatalf("parseStatCPU: %v %v", d, err)
	}
	// Children that ended count (cutime, cstime); what follows does not.
	d, err = parseStatCPU([]byte("123 (redis-server) S 1 2 3 4 5 6 7 8 9 10 250 150 70 30 20 0 4 0 99"))
	if err != nil || d != 5*time.Second {
		t.Fatalf("parseStatCPU with children: %v %v", d, err)
	}
	if _, err := parseStatCPU([]byte("123 (x) S 1 2 3 4 5 6 7 8 9 10 250 150")); err == nil {
		t.Fatal("parseStatCPU: no error on a short line")
	}
	kb, err := parseStatusKB([]byte("Name:\tx\nVmHWM:\t  2048 kB\n"), "VmHWM:")
	if err != nil || kb != 2048<<10 {
		t.Fatalf("parseStatusKB: %v %v", kb, err)
	}
	// This process reads as a probe of itself.
	p := procProbe(os.Getpid())
	if _, err := p.CPU(); err != nil {
		t.Skip("no /proc here")
	}
	if rss, err := p.PeakRSS(); err != nil || rss <= 0 {
		t.Fatalf("PeakRSS: %v %v", rss, err)
	}
}

// backlogResult is a backlog run with both phases, as runBacklog fills it.
func backlogResult(target, durability string, round int, pushMps, drainMps float64, pushRSS, drainRSS int64) Result {
	c := Config{Scenario: Backlog, Target: target}
	c.Defaults()
	ph := func(name string, mps float64, rss int64) Phase {
		return Phase{Name: name, Msgs: c.Messages, Elapsed: time.Duration(float64(c.Messages) / mps * 1e9), MsgsPerSec: mps,
			MBPerSec: mps * 128 / 1e6, Latency: Latency{Count: 10, P50: 1e6, P99: 2e6, P999: 3e6, Max: 4e6},
			Server: &ServerUsage{CPUSeconds: 2, CPUPerMsgUs: 2e6 / float64(c.Messages), PeakRSS: rss, RSSSamples: 40}}
	}
	push, drain := ph("push", pushMps, pushRSS), ph("drain", drainMps, drainRSS)
	return Result{Config: c, Durability: durability, Round: round, Pushed: c.Messages, Filled: c.Messages,
		Delivered: c.Messages, Consumed: c.Messages, Msgs: c.Messages, MsgsPerSec: drainMps, MBPerSec: drain.MBPerSec,
		Elapsed: drain.Elapsed, Latency: drain.Latency, PushLatency: &push.Latency, Server: drain.Server,
		Phases: []Phase{push, drain}}
}

// TestReportBacklog: a backlog comparison shows each phase's msgs/s, CPU
// and RSS per side, and the drain ratio per round; a backlog run outside a
// comparison gets its phase table too.
func TestReportBacklog(t *testing.T) {
	env := Env{Date: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), Cores: 2, GoVersion: "go1.26.8"}
	cmp := &File{Kind: "compare", Command: "regent bench compare backlog --messages 20000000 --start-peer", Env: env}
	for r, f := range []float64{1, 0.5, 2} {
		cmp.Results = append(cmp.Results,
			backlogResult(TargetRegent, RegentDurability("always"), r+1, 400000*f, 900000*f, 300<<20, 200<<20),
			backlogResult(TargetNATS, NATSDurability(false), r+1, 100000*f, 150000*f, 700<<20, 900<<20))
	}
	run := &File{Kind: "run", Command: "regent bench backlog --messages 1000", Env: env,
		Results: []Result{backlogResult(TargetRegent, RegentDurability("always"), 0, 1000, 2000, 10<<20, 20<<20)}}
	s := reportOf(t, map[string]*File{"a-backlog": cmp, "b-backlog-run": run})
	for _, want := range []string{
		"push-phase peak RSS", "drain-phase peak RSS", "**drain msgs/s**",
		// regent: push median 400,000, 300 MiB; drain median 900,000, 200 MiB; ratio 6.0 in every round
		"| regent | 3 | 1,000,000 | 400,000 | 2.00 | 300 MiB | **900,000** | 2.0ms | 2.00 | 200 MiB | — |",
		"| nats (default sync) | 3 | 1,000,000 | 100,000 | 2.00 | 700 MiB | **150,000** | 2.0ms | 2.00 | 900 MiB | **6.0×** (6.0, 6.0, 6.0) |",
		"### backlog: ", "`regent bench backlog --messages 1000`",
		"| backlog (push) | 1,000,000 messages | — | peak RSS ≤ 256 MiB | 300 MiB | **missed** | 2026-12-02 |",
		"| backlog (drain) | 1,000,000 messages | — | peak RSS ≤ 256 MiB | 200 MiB | **met** | 2026-12-02 |",
		"| backlog | 1,000,000 messages | nats (default sync) | drain msgs/s ≥ 2× | 6.0× | **met** | 2026-12-02 |",
		"| regent | 1 | 1,000,000 | 1,000 | 2.00 | 10 MiB | **2,000** | 2.0ms | 2.00 | 20 MiB |\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", s)
	}
	var out strings.Builder
	WriteSummary(&out, Summarize(cmp.Results))
	if !strings.Contains(out.String(), "backlog phases") || !strings.Contains(out.String(), "900 MiB") {
		t.Errorf("summary:\n%s", out.String())
	}
	out.Reset()
	WriteResult(&out, &cmp.Results[0])
	for _, want := range []string{"push   1,000,000 msgs", "drain  1,000,000 msgs", "peak RSS 200 MiB (largest of 40 readings)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("result lacks %q:\n%s", want, out.String())
		}
	}
}

// TestReportRedisPeer: a comparison with NATS and Redis sides names both
// peers, gives Redis's sides their columns and ratios, and holds Regent
// to 2× Redis with appendfsync always and 1× with everysec.
func TestReportRedisPeer(t *testing.T) {
	env := Env{Date: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), Cores: 2, GoVersion: "go1.26.8"}
	cmp := &File{Kind: "compare", Command: "regent bench compare push --target regent,nats,redis --start-peer", Env: env}
	for r := 1; r <= 3; r++ {
		cmp.Results = append(cmp.Results,
			fakeResult(Push, TargetRegent, RegentDurability("always"), r, 600000, 5*time.Millisecond),
			fakeResult(Push, TargetNATS, NATSDurability(false), r, 100000, 20*time.Millisecond),
			fakeResult(Push, TargetRedis, RedisDurability("everysec"), r, 300000, 10*time.Millisecond),
			fakeResult(Push, TargetRedis, RedisDurability("always"), r, 200000, 10*time.Millisecond))
	}
	s := reportOf(t, map[string]*File{"a": cmp})
	for _, want := range []string{
		"### push: Regent vs NATS JetStream and Redis Streams",
		"| redis (appendfsync everysec) | appendfsync everysec: ", "| redis (appendfsync always) | appendfsync always: ",
		"**2.0×** (2.0, 2.0, 2.0)", "**3.0×** (3.0, 3.0, 3.0)",
		"Regent ÷ redis (appendfsync everysec) |", " 2.0× | 3.0× |",
		"| push | 4 producers × 8 in flight, batch 100 | nats (default sync) | msgs/s ≥ 4× | 6.0× | **met** | 2026-12-02 |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, want := range []string{
		"| push | 4 producers × 8 in flight, batch 100 | redis (appendfsync always) | msgs/s ≥ 2× | 3.0× | **met** | 2026-12-02 |",
		"| push | 4 producers × 8 in flight, batch 100 | redis (appendfsync everysec) | msgs/s ≥ 1× | 2.0× | **met** | 2026-12-02 |",
		// Every side of fakeResult peaks at 100 MiB; Regent's CPU is 5 s
		// for 6,000,000 messages.
		"| push | 4 producers × 8 in flight, batch 100 | nats (default sync) | peak RSS ≤ 2× | 1.00× (100 MiB ÷ 100 MiB) | **met** | 2026-12-02 |",
		"| push | 4 producers × 8 in flight, batch 100 | redis (appendfsync always) | peak RSS below | 1.00× (100 MiB ÷ 100 MiB) | **missed** | 2026-12-02 |",
		"| push | 4 producers × 8 in flight, batch 100 | — | server CPU ≤ 0.7 µs/msg | 0.83 µs | **missed** | 2026-12-02 |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", s)
	}
}

// TestReportHTTPTarget: Regent's HTTP bridge is held to 1× NATS's binary
// protocol (default sync), not to the binary protocol's 4×, and has no
// target against NATS with sync always.
func TestReportHTTPTarget(t *testing.T) {
	env := Env{Date: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), Cores: 2, GoVersion: "go1.26.8"}
	cmp := &File{Kind: "compare", Command: "regent bench compare consume --target regent-http,nats --start-peer", Env: env}
	for r := 1; r <= 3; r++ {
		cmp.Results = append(cmp.Results,
			fakeResult(Consume, TargetRegentHTTP, RegentDurability("always"), r, 150000, 5*time.Millisecond),
			fakeResult(Consume, TargetNATS, NATSDurability(false), r, 100000, 20*time.Millisecond),
			fakeResult(Consume, TargetNATS, NATSDurability(true), r, 100000, 20*time.Millisecond))
	}
	s := reportOf(t, map[string]*File{"a": cmp})
	if want := "| consume over HTTP | 4 consumers × 8 acks in flight, batch 100 | nats (default sync) | msgs/s ≥ 1× | 1.5× | **met** |"; !strings.Contains(s, want) {
		t.Errorf("report lacks %q:\n%s", want, s)
	}
	if strings.Contains(s, "| consume over HTTP | 4 consumers × 8 acks in flight, batch 100 | nats (sync always)") ||
		strings.Contains(s, "| consume | 4 consumers") {
		t.Errorf("the HTTP side was held to a binary-protocol target:\n%s", s)
	}
}

// TestOverviewTakesTheNewestFile: a scenario measured in two files shows,
// side by side, the newer file's runs only, even for a side only the older
// ran (its Regent is not the newer one's); the older keeps its section.
func TestOverviewTakesTheNewestFile(t *testing.T) {
	files := map[string]*File{}
	for i, mps := range []float64{100000, 700000} {
		env := Env{Date: time.Date(2026, 12, 2+i, 10, 0, 0, 0, time.UTC), Cores: 2, GoVersion: "go1.26.8"}
		f := &File{Kind: "compare", Command: "regent bench compare push", Env: env}
		for r := 1; r <= 3; r++ {
			f.Results = append(f.Results,
				fakeResult(Push, TargetRegent, RegentDurability("always"), r, mps, 5*time.Millisecond),
				fakeResult(Push, TargetNATS, NATSDurability(false), r, 100000, 20*time.Millisecond))
			if i == 0 {
				f.Results = append(f.Results, fakeResult(Push, TargetNATS, NATSDurability(true), r, 5000, 20*time.Millisecond))
			}
		}
		files[strconv.Itoa(10+i)] = f
	}
	s := reportOf(t, files)
	overview := s[strings.Index(s, "### Scenarios side by side"):strings.Index(s, "### Targets")]
	if !strings.Contains(overview, "| push | 128 B, batch 100, 4 producers × 8 in flight, 16 partitions, 10s | 700,000 |") ||
		!strings.HasSuffix(strings.TrimSpace(overview), "| 100,000 | 20.0ms | 7.0× |") ||
		strings.Contains(overview, "sync always") {
		t.Errorf("the overview is not the newer file's:\n%s", overview)
	}
	if !strings.Contains(s, "| nats (sync always) |") {
		t.Errorf("the older file lost its section:\n%s", s)
	}
}

// reportOf writes files (by name, without .json) into a fresh results
// folder and returns the BENCHMARKS.md that Report makes of them.
func reportOf(t *testing.T, files map[string]*File) string {
	t.Helper()
	dir := t.TempDir()
	for name, f := range files {
		if err := WriteFile(filepath.Join(dir, name+".json"), f); err != nil {
			t.Fatal(err)
		}
	}
	md := filepath.Join(dir, "B.md")
	if _, err := Report(ReportOptions{Results: dir, Markdown: md, Charts: filepath.Join(dir, "charts")}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
