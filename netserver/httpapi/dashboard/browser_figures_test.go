package dashboard_test

// Browser tests of what the overview's figures and charts say: cards that
// fit, charts that draw only what was measured and keep equal lines apart,
// and figures that name their window or define their words.

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/regentmq/regent/netserver"
)

// evalAs runs a JavaScript expression (awaiting a promise) and decodes its
// value into T.
func evalAs[T any](br *browser, expr string) T {
	br.t.Helper()
	v, err := chromedp.Run(br.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		br.t.Fatalf("evaluating %.80s…: %v", expr, err)
	}
	return v
}

// modules is JavaScript that imports the page's own modules (the same
// instances the page runs: same URLs) as lib and live.
const modules = `const lib = await import(new URL('dashboard/lib.js', document.baseURI).href);
const live = await import(new URL('dashboard/live.js', document.baseURI).href);
`

// overflowing lists the card texts (label, value, hint) whose text does not
// fit their box: cut off, or hidden behind an ellipsis.
const overflowing = `[...document.querySelectorAll('.card .label, .card .value, .card .hint')]
  .filter(e => e.scrollWidth > e.clientWidth || e.scrollHeight > e.clientHeight + 1)
  .map(e => e.closest('.card').dataset.stat + ' ' + e.className + ': ' + JSON.stringify(e.textContent) +
    ' (' + e.scrollWidth + ' px in ' + e.clientWidth + ')')`

func TestDashboardFigures(t *testing.T) {
	b := startBroker(t, netserver.AuthConfig{})
	seed(b)
	br := newBrowser(t, b.url)
	br.dir = shotDir(t)
	done := traffic(b, 4*time.Second)
	br.open("", 1)
	<-done
	br.waitMore(2) // two readings of the journal at least

	// The cards' texts fit at a 1400 px wide window (seven cards a row),
	// at 1280 and on a phone, on the overview and on a queue's page.
	for _, vp := range []struct{ w, h int64 }{{1400, 900}, {1280, 860}, {390, 844}} {
		br.do("viewport", chromedp.EmulateViewport(vp.w, vp.h))
		for _, page := range []string{"", "queue/orders"} {
			br.open(page, 1)
			br.waitMore(1)
			if cut := evalAs[[]string](br, overflowing); len(cut) > 0 {
				t.Errorf("at %d px, #/%s: card texts cut off:\n%s", vp.w, page, strings.Join(cut, "\n"))
			}
			if n := evalAs[int](br, `document.querySelectorAll('.card .hint').length`); n == 0 {
				t.Errorf("at %d px, #/%s: no card hints to check", vp.w, page)
			}
			if vp.w == 1400 && page == "" {
				br.screenshot("overview-1400")
			}
		}
	}
	br.do("viewport", chromedp.EmulateViewport(1280, 860))
	br.open("", 1)
	br.waitMore(1)

	// "Lagging" is defined where it is shown, from the broker's own
	// threshold: the groups card's tooltip, the groups page, its states.
	sys := b.get("/api/v1/dashboard/system")
	lagSecs := num(sys["laggingAfterSeconds"])
	if lagSecs <= 0 {
		t.Fatalf("the system feed gives no laggingAfterSeconds: %v", sys["laggingAfterSeconds"])
	}
	def := evalAs[string](br, `(async () => { `+modules+` return lib.lagDefinition(`+strconv.FormatFloat(lagSecs, 'f', -1, 64)+`); })()`)
	thr := evalAs[string](br, `(async () => { `+modules+` return lib.fmtSecs(`+strconv.FormatFloat(lagSecs, 'f', -1, 64)+`); })()`)
	if !strings.Contains(def, "Lagging") || !strings.Contains(def, "more than "+thr) {
		t.Errorf("the definition of lagging %q does not name the threshold %q", def, thr)
	}
	if got := evalAs[string](br, `document.querySelector('[data-stat="groups"] .hint').title`); got != def {
		t.Errorf("the groups card's hint has the tooltip %q, want %q", got, def)
	}
	br.expectContains(`[data-stat="groups"] .hint`, "lagging (oldest unfinished > "+thr+")")
	br.open("groups", 1)
	br.expectText(`[data-define="lagging"]`, def)
	if got := evalAs[string](br, `document.querySelector('tr[data-group="billing"] [data-col="state"]').title`); got != def {
		t.Errorf("a group's state has the tooltip %q, want %q", got, def)
	}
	br.noConsoleErrors("groups")

	// Each latency figure names its window: the fsync card over the last
	// minute at most (its value in the label, its p99 in the hint), the
	// chart's lines per poll, the figures since start in the tooltip.
	br.open("", 1)
	br.waitMore(1)
	win := evalAs[float64](br, `(async () => { `+modules+` return live.FSYNC_WINDOW_MS / 1000; })()`)
	label, hint := br.text(`[data-stat="fsync"] .label`), br.text(`[data-stat="fsync"] .hint`)
	m := regexp.MustCompile(`^fsync latency, avg over the last (\d+(?:\.\d+)?) s$`).FindStringSubmatch(label)
	if m == nil {
		t.Errorf("the fsync card's label %q names no window", label)
	} else if s, _ := strconv.ParseFloat(m[1], 64); s <= 0 || s > win {
		t.Errorf("the fsync card's window is %v s, want within (0, %v]", s, win)
	} else if want := "over the last " + m[1] + " s"; !strings.HasSuffix(hint, want) {
		t.Errorf("the fsync card's hint %q does not end with %q", hint, want)
	}
	if !strings.HasPrefix(hint, "p99 ") && !strings.HasPrefix(hint, "no fsync") {
		t.Errorf("the fsync card's hint %q gives no p99", hint)
	}
	if tip := evalAs[string](br, `document.querySelector('[data-stat="fsync"] .hint').title`); !strings.HasPrefix(tip, "Since start: avg ") {
		t.Errorf("the fsync card's tooltip %q does not give the figures since start", tip)
	}
	per := evalAs[string](br, `(async () => { `+modules+` return 'per ' + lib.fmtSecs(lib.POLL_MS / 1000); })()`)
	names := evalAs[[]string](br, `[...document.querySelectorAll('[data-chart="fsync"] path.line')].map(p => p.dataset.series)`)
	if len(names) != 2 {
		t.Errorf("the fsync chart draws %d lines, want 2 (%q)", len(names), names)
	}
	for _, n := range append(names, evalAs[[]string](br, `[...document.querySelectorAll('.panel:has([data-chart="fsync"]) .legend > span')].map(s => s.textContent)`)...) {
		if !strings.Contains(n, per) {
			t.Errorf("fsync series %q does not say it is %s", n, per)
		}
	}
	br.noConsoleErrors("overview")

	t.Run("throughput draws only what was measured", func(t *testing.T) { throughputGaps(t, br) })
	t.Run("equal lines stay visible", func(t *testing.T) { equalLines(t, br) })
}

// throughputGaps gives the throughput series three minutes of the broker's
// history (busy, idle, busy), then nothing for 45 s, then the page's own
// polls, and checks what the chart is given and what it draws: no line
// across the 45 s, the idle minute drawn at zero.
func throughputGaps(t *testing.T, br *browser) {
	type result struct {
		Min0, SeedEnd, LiveStart, Now float64
		Series                        []struct {
			Name   string
			Points [][]*float64
		}
		Paths []string
	}
	r := evalAs[result](br, `(async () => { `+modules+`
  const { store } = live, saved = [store.seed, store.samples];
  try {
    const now = Date.now(), min0 = Math.floor((now - 6 * 60000) / 60000) * 60000;
    store.seed = [[min0, 40], [min0 + 60000, 0], [min0 + 120000, 25]].map(([from, v]) => ({ from, t: from + 60000, in: v, out: v, ack: v }));
    const seedEnd = min0 + 180000, liveStart = seedEnd + 45000;
    store.samples = [];
    for (let t = liveStart; t + lib.POLL_MS <= now; t += lib.POLL_MS) store.samples.push({ from: t, t: t + lib.POLL_MS, in: 12, out: 12, ack: 12 });
    const series = live.throughputSeries();
    const box = document.createElement('div');
    box.style.width = '600px';
    document.body.append(box);
    lib.chart(box, series, { label: 'gap test' });
    const paths = [...box.querySelectorAll('path.line')].map(p => p.getAttribute('d'));
    box.remove();
    return { min0, seedEnd, liveStart, now, series: series.map(s => ({ name: s.name, points: s.points })), paths };
  } finally { [store.seed, store.samples] = saved; }
})()`)
	if len(r.Series) != 3 || len(r.Paths) != 3 {
		t.Fatalf("%d series, %d lines drawn; want 3 of each", len(r.Series), len(r.Paths))
	}
	measured := func(ts float64) bool {
		return ts >= r.Min0 && ts <= r.SeedEnd || ts >= r.LiveStart && ts <= r.Now
	}
	for _, s := range r.Series {
		var prev []*float64
		zeros := 0
		for _, p := range s.Points {
			if p[1] == nil {
				prev = nil
				continue
			}
			ts := *p[0]
			if !measured(ts) {
				t.Errorf("%s: a point at %+.0f s lies where nothing was measured", s.Name, (ts-r.SeedEnd)/1000)
			}
			if prev != nil && *prev[0] < r.LiveStart && ts > r.SeedEnd {
				t.Errorf("%s: a line from %+.0f s to %+.0f s crosses the %.0f s with no sample (from the history's end)",
					s.Name, (*prev[0]-r.SeedEnd)/1000, (ts-r.SeedEnd)/1000, (r.LiveStart-r.SeedEnd)/1000)
			}
			if *p[1] == 0 {
				if ts < r.Min0+60000 || ts > r.Min0+120000 {
					t.Errorf("%s: zero at %+.0f s, outside the idle minute", s.Name, (ts-r.SeedEnd)/1000)
				}
				zeros++
			}
			prev = p
		}
		if zeros == 0 {
			t.Errorf("%s: the idle minute (a measured zero) is not drawn", s.Name)
		}
	}
	for i, d := range r.Paths {
		if n := strings.Count(d, "M"); n != 2 {
			t.Errorf("line %d is drawn in %d pieces, want 2 (history, then the page's polls): %s", i, n, d)
		}
	}
}

// equalLines draws three series of the same values and checks, on a
// screenshot, that each one's colour shows; and that the lines and their
// legend swatches differ in dash or width.
func equalLines(t *testing.T, br *browser) {
	type style struct{ Stroke, Dash, Offset, Width, SwatchDash, SwatchWidth string }
	styles := evalAs[[]style](br, `(async () => { `+modules+`
  document.getElementById('eqtest')?.remove();
  const wrap = document.createElement('div');
  wrap.id = 'eqtest';
  wrap.className = 'panel';
  wrap.style.cssText = 'position:fixed;left:0;top:0;width:640px;z-index:100';
  const leg = document.createElement('div'), box = document.createElement('div');
  leg.className = 'legend';
  box.className = 'chart';
  wrap.append(leg, box);
  document.body.append(wrap);
  const now = Date.now(), pts = [];
  for (let t = now - 60000; t <= now; t += lib.POLL_MS) pts.push([t, 5]);
  const series = ['in (pushed)', 'out (delivered)', 'acked'].map(name => ({ name, points: pts }));
  lib.legend(leg, series);
  lib.chart(box, series, { label: 'equal lines', span: 60000 });
  const sw = [...leg.querySelectorAll('svg.swatch path')].map(p => getComputedStyle(p));
  return [...box.querySelectorAll('path.line')].map((p, i) => {
    const c = getComputedStyle(p);
    return { stroke: c.stroke, dash: c.strokeDasharray, offset: c.strokeDashoffset, width: c.strokeWidth, swatchDash: sw[i].strokeDasharray, swatchWidth: sw[i].strokeWidth };
  });
})()`)
	defer br.eval(`document.getElementById('eqtest').remove()`)
	if len(styles) != 3 {
		t.Fatalf("%d lines drawn, want 3", len(styles))
	}
	seen := map[string]bool{}
	for i, s := range styles {
		if k := s.Dash + "/" + s.Offset + "/" + s.Width; seen[k] {
			t.Errorf("line %d has the dash %q (offset %s) and width %s of another", i, s.Dash, s.Offset, s.Width)
		} else {
			seen[k] = true
		}
		if s.SwatchDash != s.Dash || s.SwatchWidth != s.Width {
			t.Errorf("line %d: the legend shows dash %q width %s, the chart %q width %s", i, s.SwatchDash, s.SwatchWidth, s.Dash, s.Width)
		}
	}
	shot, err := chromedp.Run(br.ctx, chromedp.Screenshot(chromedp.CSS("#eqtest")))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatal(err)
	}
	if br.dir != "" {
		br.writeFile("chart-equal-lines.png", shot)
	}
	for i, s := range styles {
		var r, g, b int
		if _, err := fmt.Sscanf(s.Stroke, "rgb(%d, %d, %d)", &r, &g, &b); err != nil {
			t.Fatalf("line %d: stroke %q: %v", i, s.Stroke, err)
		}
		// A chart line's run of pixels is far longer than its legend's.
		if n := pixelsNear(img, r, g, b); n < 100 {
			t.Errorf("line %d (%s) shows in %d pixels of the chart: hidden under the others", i, s.Stroke, n)
		}
	}
}

// pixelsNear counts the pixels of img within a small distance of a colour.
func pixelsNear(img image.Image, r, g, b int) int {
	n := 0
	bd := img.Bounds()
	for y := bd.Min.Y; y < bd.Max.Y; y++ {
		for x := bd.Min.X; x < bd.Max.X; x++ {
			pr, pg, pb, _ := img.At(x, y).RGBA()
			if abs(int(pr>>8)-r) <= 12 && abs(int(pg>>8)-g) <= 12 && abs(int(pb>>8)-b) <= 12 {
				n++
			}
		}
	}
	return n
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// TestDashboardDeadLettersSinceStart: the overview's "filed since start"
// counts the dead letters filed since this broker started, not those its
// journal brings back after a restart on the same directory.
func TestDashboardDeadLettersSinceStart(t *testing.T) {
	dir := t.TempDir()
	b := startBrokerOn(t, dir, netserver.AuthConfig{})
	fileDead := func(b *regent, n int) {
		t.Helper()
		var items []obj
		for i := range n {
			items = append(items, obj{"queue": "mails", "payload": obj{"n": i}})
		}
		b.push(items...)
		var acks []obj
		for _, m := range b.pop(fmt.Sprintf("mails?batch=%d", n)) {
			acks = append(acks, ackOf(m, "dlq", "bounced"))
		}
		if len(acks) != n {
			t.Fatalf("popped %d messages, want %d", len(acks), n)
		}
		b.ack("__QUEUE_MODE__", acks...)
	}
	check := func(b *regent, br *browser, stored, filed int) {
		t.Helper()
		br.base = b.url
		br.open("", 1)
		br.expectText(`[data-stat="dlq"] .value`, commas(float64(stored)))
		br.expectText(`[data-stat="dlq"] .hint`, commas(float64(filed))+" filed since start")
		if c := b.get("/api/v1/dashboard/system")["counters"].(obj); num(c["deadLettered"]) != float64(filed) {
			t.Errorf("the system feed counts %v dead-lettered since start, want %d", c["deadLettered"], filed)
		}
		if got := b.metric("regent_messages_dead_lettered_total"); got != float64(filed) {
			t.Errorf("/metrics/prometheus counts %v dead-lettered since start, want %d", got, filed)
		}
		br.noConsoleErrors("overview")
	}
	fileDead(b, 2)
	br := newBrowser(t, b.url)
	br.dir = shotDir(t)
	check(b, br, 2, 2)

	br.do("leave the page", chromedp.Navigate("about:blank")) // before its broker goes
	if err := b.b.Exit(); err != nil {
		t.Fatal(err)
	}
	b = startBrokerOn(t, dir, netserver.AuthConfig{})
	var dlq struct{ Total int }
	b.call("GET", "/api/v1/dlq?queue=mails", nil, 200, &dlq)
	if dlq.Total != 2 {
		t.Fatalf("after the restart the dead-letter queue holds %d entries, want the 2 filed before", dlq.Total)
	}
	check(b, br, 2, 0)
	fileDead(b, 1)
	check(b, br, 3, 1)
}

// metric reads one unlabelled figure from /metrics.
func (b *regent) metric(name string) float64 {
	b.t.Helper()
	resp, err := b.c.Get(b.url + "/metrics/prometheus")
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	for _, line := range strings.Split(buf.String(), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	b.t.Fatalf("/metrics/prometheus has no %s", name)
	return 0
}
