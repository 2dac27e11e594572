package dashboard_test

// Browser tests of the dashboard: a real broker (brokertest.Start:
// journal, engine, both doors) on 127.0.0.1:0 with data in it, and headless
// Chromium driven by chromedp. Each page must load without console errors
// and show the figures the JSON routes give; seek, delete, redrive and
// purge must do what they say. Screenshots of every page go to
// $REGENT_DASHBOARD_SCREENSHOTS (default a temporary directory).
//
// Without Chromium the package runs no test, and says so (TestMain, in
// main_test.go; REGENT_CHROMIUM names the binary to use, and one that does
// not exist counts as none; REGENT_REQUIRE_CHROMIUM=1 fails instead).

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/netserver/internal/testhooks"
)

func chromiumPath() string {
	if p := os.Getenv("REGENT_CHROMIUM"); p != "" {
		if p, err := exec.LookPath(p); err == nil {
			return p
		}
		return ""
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

func shotDir(t *testing.T) string {
	if d := os.Getenv("REGENT_DASHBOARD_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// regent is a running broker (brokertest's), driven over its HTTP door.
type regent struct {
	t     *testing.T
	b     *broker.Broker
	url   string
	c     *http.Client
	token string
}

func startBroker(t *testing.T, auth netserver.AuthConfig) *regent {
	t.Helper()
	return startBrokerOn(t, "", auth)
}

// startBrokerOn starts a broker on the data directory dir ("" for a new
// one).
func startBrokerOn(t *testing.T, dir string, auth netserver.AuthConfig) *regent {
	t.Helper()
	b := brokertest.Start(t, broker.Options{
		Journal: log.Config{Dir: dir, Sync: log.SyncAlways},
		Engine:  engine.Config{Stripes: 4, TimerTick: 5 * time.Millisecond},
		Auth:    auth,
		Version: "test",
	})
	r := &regent{t: t, b: b, url: "http://" + b.HTTPAddr().String(), c: &http.Client{Timeout: testhooks.Patience(10 * time.Second)}}
	// Before brokertest's Exit: an unused connection would hold the HTTP
	// door's shutdown for 5 s (net/http counts it active).
	t.Cleanup(r.c.CloseIdleConnections)
	return r
}

type obj = map[string]any

// call sends a JSON request, checks the status and decodes the answer.
func (b *regent) call(method, path string, body any, want int, out any) {
	b.t.Helper()
	var rd io.Reader
	if body != nil {
		enc, _ := json.Marshal(body)
		rd = bytes.NewReader(enc)
	}
	req, _ := http.NewRequest(method, b.url+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		b.t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			b.t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
}

func (b *regent) get(path string) obj {
	b.t.Helper()
	var o obj
	b.call("GET", path, nil, 200, &o)
	return o
}

func (b *regent) push(items ...obj) []obj {
	b.t.Helper()
	var res []obj
	b.call("POST", "/api/v1/push", obj{"items": items}, 201, &res)
	return res
}

func (b *regent) pop(path string) []obj {
	b.t.Helper()
	var res struct{ Messages []obj }
	req, _ := http.NewRequest("GET", b.url+"/api/v1/pop/queue/"+path, nil)
	if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == 204 {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		b.t.Fatal(err)
	}
	return res.Messages
}

func (b *regent) ack(group string, acks ...obj) {
	b.t.Helper()
	var res []obj
	b.call("POST", "/api/v1/ack/batch", obj{"consumerGroup": group, "acknowledgments": acks}, 200, &res)
	for _, r := range res {
		if r["success"] != true {
			b.t.Fatalf("ack refused: %v", r)
		}
	}
}

func ackOf(m obj, status, errText string) obj {
	a := obj{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"], "status": status}
	if errText != "" {
		a["error"] = errText
	}
	return a
}

// seed fills the broker: a configured queue "orders" with three partitions
// read by two groups (billing has finished part of it, audit holds a
// lease), an auto-created queue "emails.send" whose queue-mode consumer
// dead-lettered two messages, and a trace.
func seed(b *regent) {
	b.t.Helper()
	b.call("POST", "/api/v1/configure", obj{"queue": "orders", "namespace": "shop", "task": "checkout",
		"options": obj{"leaseTime": 120, "retryLimit": 2, "retryDelay": 500, "maxSize": 100000}}, 200, nil)
	var items []obj
	for i := range 12 {
		items = append(items, obj{"queue": "orders", "partition": []string{"eu", "us", "asia"}[i%3],
			"transactionId": fmt.Sprintf("order-%d", i), "payload": obj{"order": i, "item": "tea", "amount": 3.5 + float64(i)}})
	}
	b.push(items...)
	b.push(
		obj{"queue": "emails.send", "transactionId": "mail-1", "payload": obj{"to": "ada@example.org", "template": "welcome"}},
		obj{"queue": "emails.send", "transactionId": "mail-2", "payload": obj{"to": "bob@example.org", "template": "missing"}},
		obj{"queue": "emails.send", "transactionId": "mail-3", "payload": obj{"to": "cy@example.org", "template": "receipt"}},
	)
	// billing finishes the eu partition; audit holds a lease on two messages.
	ms := b.pop("orders/partition/eu?consumerGroup=billing&batch=10")
	if len(ms) != 4 {
		b.t.Fatalf("billing popped %d messages, want 4", len(ms))
	}
	var acks []obj
	for _, m := range ms {
		acks = append(acks, ackOf(m, "completed", ""))
	}
	b.ack("billing", acks...)
	// billing also reads us and asia (so it has cursors there) without
	// finishing them: pop one each and give it back.
	for _, p := range []string{"us", "asia"} {
		m := b.pop("orders/partition/" + p + "?consumerGroup=billing&batch=1")
		b.ack("billing", ackOf(m[0], "retry", ""))
	}
	if ms := b.pop("orders/partition/us?consumerGroup=audit&batch=2"); len(ms) != 2 {
		b.t.Fatalf("audit popped %d messages, want 2", len(ms))
	}
	// The queue-mode consumer of emails.send dead-letters two messages.
	ms = b.pop("emails.send?batch=3")
	if len(ms) != 3 {
		b.t.Fatalf("popped %d emails, want 3", len(ms))
	}
	b.ack("__QUEUE_MODE__", ackOf(ms[0], "completed", ""),
		ackOf(ms[1], "dlq", "smtp: 550 mailbox unavailable"), ackOf(ms[2], "dlq", "template receipt: missing field total"))
	b.call("POST", "/api/v1/traces", obj{"transactionId": "order-0", "partitionId": partitionID(b, "orders", "eu"),
		"consumerGroup": "billing", "eventType": "info", "data": obj{"step": "charged", "card": "visa"}, "traceNames": "checkout"}, 201, nil)
}

func partitionID(b *regent, queue, part string) string {
	b.t.Helper()
	q := b.get("/api/v1/resources/queues/" + queue)
	for _, p := range q["partitions"].([]any) {
		if p.(obj)["name"] == part {
			return p.(obj)["id"].(string)
		}
	}
	b.t.Fatalf("no partition %s/%s", queue, part)
	return ""
}

// traffic pushes to "events" and drains it with autoAck for d, so that the
// throughput chart has something to show.
func traffic(b *regent, d time.Duration) (done <-chan struct{}) {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		end := time.Now().Add(d)
		for i := 0; time.Now().Before(end); i++ {
			items := make([]obj, 8)
			for k := range items {
				items[k] = obj{"queue": "events", "partition": fmt.Sprintf("p%d", k%2), "payload": obj{"seq": i*8 + k, "kind": "click"}}
			}
			b.push(items...)
			b.pop("events?consumerGroup=indexer&autoAck=true&batch=6")
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return ch
}

// commas formats n as the page does (en-US grouping).
func commas(n float64) string {
	s := strconv.FormatInt(int64(n+0.5), 10)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// browser is a headless Chromium tab that records console errors.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string
	dir  string
	mu   sync.Mutex
	errs []string
	// allow reports console errors that are expected (nil: none are).
	allow func(string) bool
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	exe := chromiumPath()
	if exe == "" {
		t.Fatal("no Chromium found (TestMain stops the package before this)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 860),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, testhooks.Patience(90*time.Second))
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	br := &browser{t: t, ctx: ctx, base: base}
	if err := chromedp.Do(ctx); err != nil { // starts the browser and opens the tab
		t.Fatalf("starting Chromium: %v", err)
	}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException || m.Type == chromedp.ConsoleWarning {
				br.mu.Lock()
				br.errs = append(br.errs, m.String()+" ("+m.URL+")")
				br.mu.Unlock()
			}
		}
	}()
	return br
}

// noConsoleErrors fails the test if the page wrote an error or a warning
// (one allow does not excuse) since the last check.
func (br *browser) noConsoleErrors(page string) {
	br.t.Helper()
	time.Sleep(50 * time.Millisecond) // let the last events arrive
	br.mu.Lock()
	errs := br.errs
	br.errs = nil
	br.mu.Unlock()
	for _, e := range errs {
		if br.allow == nil || !br.allow(e) {
			br.t.Errorf("%s: console: %s", page, e)
		}
	}
}

func (br *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	br.t.Helper()
	if err := chromedp.Do(br.ctx, steps...); err != nil {
		br.t.Fatalf("%s: %v", what, err)
	}
}

// open navigates to a page (the fragment after #/) and waits until it has
// drawn its data at least n times.
func (br *browser) open(hash string, n int) {
	br.t.Helper()
	br.do("navigate to #/"+hash, chromedp.Navigate(br.base+"/#/"+hash))
	br.waitDrawn(n)
}

func (br *browser) waitDrawn(n int) {
	br.t.Helper()
	br.poll(fmt.Sprintf(`document.querySelector('main').dataset.loaded === '1' && Number(document.querySelector('main').dataset.rev) >= %d`, n),
		"the page to draw")
}

// waitMore waits until the page has drawn n more times.
func (br *browser) waitMore(n int) {
	br.t.Helper()
	rev, err := chromedp.Run(br.ctx, chromedp.Evaluate[string](`document.querySelector('main').dataset.rev || '0'`))
	if err != nil {
		br.t.Fatal(err)
	}
	cur, _ := strconv.Atoi(rev)
	br.waitDrawn(cur + n)
}

// poll waits until a JavaScript expression is true (10 s, longer under the
// race detector, which slows the broker several times over).
func (br *browser) poll(expr, what string) {
	br.t.Helper()
	if _, err := chromedp.Run(br.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(testhooks.Patience(10*time.Second)))); err != nil {
		banner, _ := chromedp.Run(br.ctx, chromedp.Evaluate[string](`document.getElementById('banner').textContent`))
		br.t.Fatalf("waiting for %s: %v (banner: %q)", what, err, banner)
	}
}

// eval runs a JavaScript expression (its value is dropped).
func (br *browser) eval(expr string) {
	br.t.Helper()
	if _, err := chromedp.Run(br.ctx, chromedp.Evaluate[any](expr)); err != nil {
		br.t.Fatalf("evaluating %s: %v", expr, err)
	}
}

// text returns the trimmed text of the element sel selects.
func (br *browser) text(sel string) string {
	br.t.Helper()
	js, _ := json.Marshal(sel)
	v, err := chromedp.Run(br.ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%s)?.textContent ?? '<missing>').trim()`, js)))
	if err != nil {
		br.t.Fatalf("text of %s: %v", sel, err)
	}
	return v
}

// expectText waits until sel's text is want.
func (br *browser) expectText(sel, want string) {
	br.t.Helper()
	js, _ := json.Marshal(sel)
	w, _ := json.Marshal(want)
	expr := fmt.Sprintf(`(document.querySelector(%s)?.textContent ?? '').trim() === %s`, js, w)
	if _, err := chromedp.Run(br.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(testhooks.Patience(6*time.Second)))); err != nil {
		br.t.Errorf("%s: text %q, want %q", sel, br.text(sel), want)
	}
}

// expectContains waits until sel's text contains want.
func (br *browser) expectContains(sel, want string) {
	br.t.Helper()
	js, _ := json.Marshal(sel)
	w, _ := json.Marshal(want)
	expr := fmt.Sprintf(`(document.querySelector(%s)?.textContent ?? '').includes(%s)`, js, w)
	if _, err := chromedp.Run(br.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(testhooks.Patience(6*time.Second)))); err != nil {
		br.t.Errorf("%s: text %q does not contain %q", sel, br.text(sel), want)
	}
}

func (br *browser) click(sel string) {
	br.t.Helper()
	br.do("click "+sel, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
}

// screenshot saves the whole page as name.png.
func (br *browser) screenshot(name string) {
	br.t.Helper()
	if br.dir == "" {
		return
	}
	png, err := chromedp.Run(br.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		br.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(br.dir, name+".png"), png, 0o644); err != nil {
		br.t.Fatal(err)
	}
}

// writeFile saves an image taken otherwise (an element's screenshot).
func (br *browser) writeFile(name string, b []byte) {
	br.t.Helper()
	if err := os.WriteFile(filepath.Join(br.dir, name), b, 0o644); err != nil {
		br.t.Fatal(err)
	}
}

func num(v any) float64 { f, _ := v.(float64); return f }

func TestDashboardPages(t *testing.T) {
	b := startBroker(t, netserver.AuthConfig{})
	seed(b)
	br := newBrowser(t, b.url)
	br.dir = shotDir(t)

	// Overview, while messages flow and after.
	done := traffic(b, 8*time.Second)
	br.open("", 1)
	br.waitDrawn(5) // samples while messages flow
	br.screenshot("overview")
	<-done
	br.waitMore(3) // and after they stopped
	sys := b.get("/api/v1/dashboard/system")
	msgs := sys["messages"].(obj)
	br.expectText(`[data-stat="depth"] .value`, commas(num(sys["depth"])))
	br.expectText(`[data-stat="stored"] .value`, commas(num(msgs["total"])))
	br.expectText(`[data-stat="dlq"] .value`, "2")
	br.expectText(`[data-stat="queues"] .value`, commas(num(sys["queues"])))
	br.expectText(`[data-stat="partitions"] .value`, commas(num(sys["partitions"])))
	br.expectText(`[data-stat="groups"] .value`, commas(num(sys["groups"])))
	br.expectContains(`[data-stat="in"] .hint`, commas(num(sys["counters"].(obj)["pushed"]))+" pushed")
	if v := br.text(`[data-stat="journal"] .value`); v == "n/a" || v == "–" {
		t.Errorf("journal size card shows %q", v)
	}
	br.poll(`document.querySelectorAll('[data-chart="throughput"] path.line').length === 3`, "three throughput lines")
	br.poll(`document.querySelectorAll('[data-chart="lag"] path.line').length >= 1`, "a lag line")
	br.expectContains(`[data-queue="orders"]`, "orders")
	br.noConsoleErrors("overview")

	// Dark theme: the button switches it and the choice sticks.
	br.click("#theme")
	br.poll(`document.documentElement.dataset.theme === 'dark'`, "the dark theme")
	bg, _ := chromedp.Run(br.ctx, chromedp.Evaluate[string](`getComputedStyle(document.body).backgroundColor`))
	if bg != "rgb(15, 18, 24)" {
		t.Errorf("dark background is %s", bg)
	}
	br.screenshot("overview-dark")
	br.click("#theme")
	br.poll(`document.documentElement.dataset.theme === 'light'`, "the light theme")

	// Queues.
	br.open("queues", 1)
	var qs struct{ Queues []obj }
	b.call("GET", "/api/v1/dashboard/queues", nil, 200, &qs)
	for _, q := range qs.Queues {
		name := q["name"].(string)
		if name == "events" {
			continue // drained by autoAck: its figures settle, but are not what this test is about
		}
		row := fmt.Sprintf(`tr[data-queue=%q]`, name)
		br.expectText(row+` [data-col="partitions"]`, commas(num(q["partitions"])))
		br.expectText(row+` [data-col="depth"]`, commas(num(q["depth"])))
		br.expectText(row+` [data-col="stored"]`, commas(num(q["messages"].(obj)["total"])))
		br.expectText(row+` [data-col="dead"]`, commas(num(q["deadLetters"])))
		for _, g := range q["groups"].([]any) {
			g := g.(obj)
			br.expectContains(row+fmt.Sprintf(` .chip[data-group=%q]`, g["name"]), commas(num(g["offsetLag"])))
		}
	}
	br.expectContains(`tr[data-queue="orders"] details summary`, "lease 2 min · 2 retries · delay 500 ms · max 100,000")
	br.screenshot("queues")
	br.noConsoleErrors("queues")

	// One queue: cursors per group and partition, the lease, the newest messages.
	br.open("queue/orders", 1)
	q := b.get("/api/v1/dashboard/queues/orders")
	for _, p := range q["partitions"].([]any) {
		p := p.(obj)
		for _, c := range p["cursors"].([]any) {
			c := c.(obj)
			row := fmt.Sprintf(`tr[data-partition=%q][data-group=%q]`, p["name"], c["group"])
			br.expectText(row+` [data-col="cursor"]`, commas(num(c["cursor"])))
			br.expectContains(row+` [data-col="lag"]`, commas(num(c["offsetLag"])))
			if c["lease"] != nil {
				br.expectContains(row+` [data-col="lease"]`, "leased")
			}
		}
	}
	br.expectContains(`tr[data-partition="us"][data-group="audit"] [data-col="lease"]`, "leased 0–1 · 0 acked")
	br.expectContains(`[data-option="retryLimit"]`, "2")
	br.expectContains(`tr[data-message="order-11"]`, `"order":11`)
	br.expectText(`[data-stat="depth"] .value`, commas(num(q["depth"])))
	br.screenshot("queue")
	br.noConsoleErrors("queue")

	// The same page on a phone.
	br.do("phone viewport", chromedp.EmulateViewport(390, 844))
	br.open("queues", 1)
	br.open("queue/orders", 2)
	br.screenshot("queue-phone")
	br.do("laptop viewport", chromedp.EmulateViewport(1280, 860))

	// A message, opened from the queue page.
	br.open("queue/orders", 1)
	br.click(`tr[data-message="order-0"] a`)
	br.poll(`document.querySelector('main').dataset.page === 'message'`, "the message page")
	br.waitDrawn(1)
	br.expectContains(`[data-col="payload"]`, `"item": "tea"`)
	br.expectText(`tr[data-group="billing"] [data-col="passed"]`, "passed")
	br.expectContains(`.timeline`, "charged")
	br.screenshot("message")
	br.noConsoleErrors("message")

	// Consumer groups: the figures, then seek and delete.
	br.open("groups", 1)
	var groups []obj
	b.call("GET", "/api/v1/consumer-groups", nil, 200, &groups)
	for _, g := range groups {
		if g["queueName"] == "events" {
			continue
		}
		row := fmt.Sprintf(`tr[data-group=%q][data-queue=%q]`, g["name"], g["queueName"])
		br.expectText(row+` [data-col="lag"]`, commas(num(g["totalLag"])))
		br.expectText(row+` [data-col="state"]`, g["state"].(string))
	}
	br.screenshot("groups")
	br.click("#pause") // hold the table still while clicking in it
	br.click(`tr[data-group="billing"][data-queue="orders"] button[data-action="seek"]`)
	br.click(`dialog[open] button[data-role="ok"]`) // "to the end" is the default
	br.poll(`!document.querySelector('dialog[open]')`, "the seek dialog to close")
	br.expectContains("#toast", "Moved billing on")
	br.expectText(`tr[data-group="billing"][data-queue="orders"] [data-col="lag"]`, "0")
	for _, g := range lagOf(b, "orders") {
		if g["name"] == "billing" && num(g["totalLag"]) != 0 {
			t.Errorf("after seek to end, billing's lag on orders is %v", g["totalLag"])
		}
	}
	br.click(`tr[data-group="audit"][data-queue="orders"] button[data-action="delete"]`)
	br.expectContains(`dialog[open]`, "This cannot be undone")
	br.click(`dialog[open] button[data-role="ok"]`)
	br.poll(`!document.querySelector('tr[data-group="audit"][data-queue="orders"]')`, "audit's row to go")
	for _, g := range lagOf(b, "orders") {
		if g["name"] == "audit" {
			t.Errorf("audit is still a group of orders after delete: %v", g)
		}
	}
	br.click("#pause")
	br.noConsoleErrors("groups")

	// Dead-letter queue: filters, entries, redrive and purge.
	br.open("dlq?queue=emails.send", 1)
	var dlq struct {
		Messages []obj
		Total    int
	}
	b.call("GET", "/api/v1/dlq?queue=emails.send", nil, 200, &dlq)
	if dlq.Total != 2 {
		t.Fatalf("dlq total %d, want 2", dlq.Total)
	}
	for _, m := range dlq.Messages {
		sel := fmt.Sprintf(`article[data-dlq=%q]`, m["transactionId"])
		br.expectText(sel+` [data-col="error"]`, m["errorMessage"].(string))
		br.expectContains(sel, m["data"].(obj)["to"].(string))
	}
	br.expectContains(".bar .muted", "1–2 of 2 entries")
	if v, _ := chromedp.Run(br.ctx, chromedp.Value(chromedp.CSS(`select[name="queue"]`))); v != "emails.send" {
		t.Errorf("the queue filter shows %q, want emails.send", v)
	}
	br.screenshot("dlq")
	// A filter that matches nothing, then none.
	br.do("filter by a group", chromedp.SendKeys(chromedp.CSS(`input[name="consumerGroup"]`), "nobody\t"))
	br.expectContains(".bar .muted", "No entries")
	br.eval(`(() => { const i = document.querySelector('input[name="consumerGroup"]'); i.value = ''; return i.dispatchEvent(new Event('change')); })()`)
	br.expectContains(".bar .muted", "1–2 of 2 entries")
	br.click(`article[data-dlq="mail-2"] button[data-action="redrive"]`)
	br.click(`dialog[open] button[data-role="ok"]`)
	br.expectContains("#toast", "Redrove 1 dead letter")
	br.poll(`!document.querySelector('article[data-dlq="mail-2"]')`, "the redriven entry to go")
	if n := len(b.pop("emails.send?batch=5")); n != 1 {
		t.Errorf("after redrive, emails.send delivers %d messages, want 1", n)
	}
	br.click(`article[data-dlq="mail-3"] button[data-action="purge"]`)
	br.expectContains(`dialog[open]`, "Remove this dead letter for good")
	br.click(`dialog[open] button[data-role="ok"]`)
	br.expectContains("#toast", "Purged 1 dead letter")
	br.poll(`!document.querySelector('article[data-dlq="mail-3"]')`, "the purged entry to go")
	b.call("GET", "/api/v1/dlq?queue=emails.send", nil, 200, &dlq)
	if dlq.Total != 0 {
		t.Errorf("after redrive and purge, %d dead letters remain", dlq.Total)
	}
	br.expectContains(".bar .muted", "No entries")
	br.noConsoleErrors("dlq")

	// Unknown API paths still answer 404, and the page's files are served.
	var nf obj
	b.call("GET", "/api/v1/no-such-route", nil, 404, &nf)
	b.call("GET", "/dashboard/nope.js", nil, 404, nil)
}

func lagOf(b *regent, queue string) []obj {
	var gs []obj
	b.call("GET", "/api/v1/consumer-groups", nil, 200, &gs)
	var out []obj
	for _, g := range gs {
		if g["queueName"] == queue {
			out = append(out, g)
		}
	}
	return out
}

// hs256 signs a JWT with claims.
func hs256(secret []byte, claims obj) string {
	enc := base64.RawURLEncoding
	h := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	c, _ := json.Marshal(claims)
	msg := h + "." + enc.EncodeToString(c)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(msg))
	return msg + "." + enc.EncodeToString(m.Sum(nil))
}

// With auth on, the page asks for a token, then sends it with every
// request.
func TestDashboardAuth(t *testing.T) {
	secret := []byte("dashboard-test-secret")
	b := startBroker(t, netserver.AuthConfig{Enabled: true, Algorithm: "HS256", Secret: secret})
	b.token = hs256(secret, obj{"sub": "producer", "role": "read-write", "exp": time.Now().Add(time.Hour).Unix()})
	b.push(obj{"queue": "orders", "payload": obj{"n": 1}})
	viewer := hs256(secret, obj{"sub": "ops", "role": "read-only", "exp": time.Now().Add(time.Hour).Unix()})
	br := newBrowser(t, b.url)
	// The refused requests before signing in are logged by the browser.
	br.allow = func(s string) bool { return strings.Contains(s, "status of 401") }
	br.do("open", chromedp.Navigate(b.url+"/#/queues"))
	br.do("wait for the sign-in", chromedp.WaitVisible(chromedp.CSS(`dialog[open] input[name="token"]`)))
	br.do("type a wrong token", chromedp.SendKeys(chromedp.CSS(`dialog[open] input[name="token"]`), "not-a-token"))
	br.click(`dialog[open] button[data-role="ok"]`)
	br.expectContains(`dialog[open] .error`, "refused")
	br.do("type the token", chromedp.SetValue(chromedp.CSS(`dialog[open] input[name="token"]`), viewer))
	br.click(`dialog[open] button[data-role="ok"]`)
	br.waitDrawn(1)
	br.expectText(`tr[data-queue="orders"] [data-col="stored"]`, "1")
	if hidden, _ := chromedp.Run(br.ctx, chromedp.Evaluate[bool](`document.getElementById('signout').hidden`)); hidden {
		t.Error("no sign-out button after signing in")
	}
	br.noConsoleErrors("auth")
}

// TestDashboardFollowsPages: the pages show every queue and every consumer
// group when the broker answers them a page (1,000) at a time, and the
// dead-letter pager goes on where a page cut short by its size ended.
func TestDashboardFollowsPages(t *testing.T) {
	b := startBroker(t, netserver.AuthConfig{})
	const n = 1005
	var items []obj
	for i := 0; i < n; i++ {
		items = append(items, obj{"queue": fmt.Sprintf("q%04d", i), "payload": obj{"n": i}})
	}
	b.push(items...)
	for i := 0; i < n; i++ {
		b.pop(fmt.Sprintf("q%04d?consumerGroup=reader&batch=1", i))
	}
	var first []obj
	b.call("GET", "/api/v1/consumer-groups", nil, 200, &first)
	if len(first) != 1000 {
		t.Fatalf("the first page of groups has %d entries, want 1000", len(first))
	}
	big := strings.Repeat("x", 1<<20)
	for i := 0; i < 18; i++ {
		b.push(obj{"queue": "fat", "transactionId": fmt.Sprintf("fat-%02d", i), "payload": big})
	}
	for filed := 0; filed < 18; { // a pop answers what fits about 16 MiB
		var acks []obj
		for _, m := range b.pop("fat?batch=18") {
			acks = append(acks, ackOf(m, "dlq", "too big"))
		}
		if len(acks) == 0 {
			t.Fatalf("%d dead-lettered, then nothing to pop", filed)
		}
		b.ack("__QUEUE_MODE__", acks...)
		filed += len(acks)
	}
	var page struct {
		Messages []obj
		Total    int
	}
	b.call("GET", "/api/v1/dlq?queue=fat&limit=25", nil, 200, &page)
	cut := len(page.Messages)
	if cut == 0 || cut >= 18 || page.Total != 18 {
		t.Fatalf("a dead-letter page of 25 holds %d entries of 1 MiB of %d: not cut by size", cut, page.Total)
	}

	br := newBrowser(t, b.url)
	br.open("queues", 1)
	br.poll(fmt.Sprintf(`document.querySelectorAll('tr[data-queue]').length === %d`, n+1), fmt.Sprintf("%d queue rows", n+1))
	br.expectText(`tr[data-queue="q1004"] [data-col="stored"]`, "1")
	br.noConsoleErrors("queues")
	br.open("groups", 1)
	br.poll(fmt.Sprintf(`document.querySelectorAll('tr[data-group="reader"]').length === %d`, n), fmt.Sprintf("%d group rows", n))
	br.noConsoleErrors("groups")
	br.open("dlq?queue=fat", 1)
	br.expectContains(".bar .muted", fmt.Sprintf("1–%d of 18 entries", cut))
	br.click(`button[data-action="next"]`)
	br.expectContains(".bar .muted", fmt.Sprintf("%d–18 of 18 entries", cut+1))
	br.poll(`!!document.querySelector('article[data-dlq="fat-17"]')`, "the last entry")
	br.noConsoleErrors("dlq")
}
