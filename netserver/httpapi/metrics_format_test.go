package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/client"
)

// reporter is what checkExposition reports to: a *testing.T, or a
// recorder in its own test.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

type recorder struct{ errs []string }

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// checkExposition checks text in Prometheus's text format (0.0.4) the way a
// strict parser reads it: every sample belongs to a family announced once by
// # HELP (with a text) and # TYPE (a known type), a family's samples come
// together, counters end in _total, and a histogram has its _bucket, _sum
// and _count. It returns the families with their sample lines.
func checkExposition(t reporter, text string) map[string][]string {
	t.Helper()
	families := map[string][]string{}
	types := map[string]string{}
	helped := map[string]bool{}
	done := map[string]bool{} // families whose samples ended
	current := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "# HELP "):
			f := strings.SplitN(strings.TrimPrefix(line, "# HELP "), " ", 2)
			if helped[f[0]] {
				t.Errorf("# HELP %s twice", f[0])
			}
			if strings.HasPrefix(f[0], "regent_") && (len(f) < 2 || strings.TrimSpace(f[1]) == "") {
				t.Errorf("# HELP %s has no text", f[0])
			}
			helped[f[0]] = true
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Fields(strings.TrimPrefix(line, "# TYPE "))
			if len(f) != 2 {
				t.Errorf("bad TYPE line %q", line)
				continue
			}
			if _, ok := types[f[0]]; ok {
				t.Errorf("# TYPE %s twice", f[0])
			}
			switch f[1] {
			case "counter", "gauge", "histogram", "summary", "untyped":
			default:
				t.Errorf("# TYPE %s: unknown type %q", f[0], f[1])
			}
			if f[1] == "counter" && strings.HasPrefix(f[0], "regent_") && !strings.HasSuffix(f[0], "_total") {
				t.Errorf("counter %s does not end in _total", f[0])
			}
			types[f[0]] = f[1]
			if current != "" {
				done[current] = true
			}
			current = f[0]
		case strings.HasPrefix(line, "#"):
			continue
		default:
			name := line[:strings.IndexAny(line, "{ ")]
			fam := name
			if types[current] == "histogram" || types[current] == "summary" {
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if strings.TrimSuffix(name, suf) == current {
						fam = current
					}
				}
			}
			if fam != current {
				t.Errorf("sample %q outside its family (the current family is %q)", line, current)
				continue
			}
			if done[fam] {
				t.Errorf("family %s split: %q after another family", fam, line)
			}
			if !helped[fam] {
				t.Errorf("family %s has no # HELP", fam)
			}
			families[fam] = append(families[fam], line)
		}
	}
	for name, typ := range types {
		if typ != "histogram" || !strings.HasPrefix(name, "regent_") {
			continue // the Go runtime's histograms have buckets only
		}
		var b, s, c bool
		for _, l := range families[name] {
			b = b || strings.HasPrefix(l, name+"_bucket{")
			s = s || strings.HasPrefix(l, name+"_sum ")
			c = c || strings.HasPrefix(l, name+"_count ")
		}
		if !b || !s || !c {
			t.Errorf("histogram %s lacks a part: bucket %v, sum %v, count %v", name, b, s, c)
		}
	}
	return families
}

// TestMetricsPrometheusFormat: /metrics answers Prometheus's text format,
// with # HELP and # TYPE and each family's samples together, when the
// scraper asks for it (Prometheus's Accept header, or OpenMetrics), and
// Queen's JSON otherwise; /metrics/prometheus always answers the text.
// The per-queue and per-group families come whole although queues and
// groups interleave in the engine.
func TestMetricsPrometheusFormat(t *testing.T) {
	b := brokertest.Start(t, broker.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, b.TCPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, q := range []string{"orders", `we"ird`} {
		for i := 0; i < 3; i++ {
			if _, err := c.Queue(q).Push(ctx, []byte(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
		for _, g := range []string{"ga", "gb"} {
			if _, err := c.Queue(q).Group(g).Batch(1).Pop(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	get := func(path, accept string) (string, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+b.HTTPAddr().String()+path, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
		}
		return resp.Header.Get("Content-Type"), string(body)
	}
	for _, accept := range []string{
		"text/plain;version=0.0.4;q=1,*/*;q=0.1", // Prometheus's scraper, text format
		"application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
	} {
		ct, text := get("/metrics", accept)
		if !strings.HasPrefix(ct, "text/plain") {
			t.Errorf("Accept %q: Content-Type %q", accept, ct)
		}
		fams := checkExposition(t, text)
		for _, want := range []struct {
			fam    string
			series int
		}{
			{"regent_messages_pushed_total", 1},
			{"regent_queue_messages", 2},
			{"regent_group_lag_messages", 4},
			{"regent_group_lag_seconds", 4},
			{"regent_journal_fsync_seconds", 0},
			{"go_goroutines", 1},
		} {
			if len(fams[want.fam]) < max(want.series, 1) {
				t.Errorf("family %s: %d samples, want %d", want.fam, len(fams[want.fam]), want.series)
			}
		}
		if got := strings.Join(fams["regent_messages_pushed_total"], ""); got != "regent_messages_pushed_total 6" {
			t.Errorf("pushed: %q", got)
		}
		if !strings.Contains(text, `regent_group_lag_messages{queue="we\"ird",group="gb"} 3`) {
			t.Errorf("no escaped group lag in:\n%s", text)
		}
	}
	_, text := get("/metrics/prometheus", "")
	checkExposition(t, text)

	ct, body := get("/metrics", "")
	var js map[string]any
	if !strings.HasPrefix(ct, "application/json") || json.Unmarshal([]byte(body), &js) != nil || js["messages"] == nil {
		t.Errorf("/metrics without Accept: %q %.200s", ct, body)
	}
}

// TestCheckExpositionCatchesBadText shows that the checker fails on what a
// strict parser refuses.
func TestCheckExpositionCatchesBadText(t *testing.T) {
	var r recorder
	if checkExposition(&r, "# HELP a x\n# TYPE a gauge\na 1\n"); len(r.errs) != 0 {
		t.Fatalf("good text refused: %v", r.errs)
	}
	for name, text := range map[string]string{
		"split family": "# HELP a x\n# TYPE a gauge\na{q=\"1\"} 1\n# HELP b x\n# TYPE b gauge\nb 1\na{q=\"2\"} 1\n",
		"no metadata":  "a 1\n",
		"empty help":   "# HELP regent_a\n# TYPE regent_a gauge\nregent_a 1\n",
		"counter name": "# HELP regent_a x\n# TYPE regent_a counter\nregent_a 1\n",
		"histogram":    "# HELP regent_h x\n# TYPE regent_h histogram\nregent_h_bucket{le=\"+Inf\"} 1\nregent_h_count 1\n",
		"two TYPEs":    "# HELP a x\n# TYPE a gauge\n# TYPE a gauge\na 1\n",
	} {
		var r recorder
		checkExposition(&r, text)
		if len(r.errs) == 0 {
			t.Errorf("%s: not caught", name)
		}
	}
}
