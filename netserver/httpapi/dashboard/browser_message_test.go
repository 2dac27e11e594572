package dashboard_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/regentmq/regent/netserver"
)

// find fills the Message page's form (empty strings leave a field empty)
// and submits it.
func (br *browser) find(queue, partition, offset, txn string) {
	br.t.Helper()
	br.open("message", 1)
	for name, v := range map[string]string{"queue": queue, "partition": partition, "offset": offset, "transactionId": txn} {
		br.eval(fmt.Sprintf(`document.querySelector('form input[name=%q]').value = %q`, name, v))
	}
	br.eval(`document.querySelector('main').dataset.rev = '0'`) // what is drawn next is the answer
	br.click(`form button[type="submit"]`)
	br.waitDrawn(1)
}

// TestDashboardFindMessage: the Message page finds a message by queue,
// partition name and offset, or by transaction id, as the queue feed lists
// them; lists the messages that share a transaction id; says when there is
// none; and asks for no partition id.
func TestDashboardFindMessage(t *testing.T) {
	b := startBroker(t, netserver.AuthConfig{})
	seed(b)
	b.push(obj{"queue": "orders", "partition": "eu", "transactionId": "dup-1", "payload": obj{"copy": "eu"}},
		obj{"queue": "orders", "partition": "asia", "transactionId": "dup-1", "payload": obj{"copy": "asia"}})
	q := b.get("/api/v1/dashboard/queues/orders?messages=200")
	byPart := map[string][]obj{}
	for _, m := range q["newest"].([]any) {
		m := m.(obj)
		byPart[m["partition"].(string)] = append(byPart[m["partition"].(string)], m)
	}
	if len(byPart["us"]) < 2 || len(byPart["asia"]) < 2 {
		t.Fatalf("the queue feed lists %d messages in us, %d in asia", len(byPart["us"]), len(byPart["asia"]))
	}
	br := newBrowser(t, b.url)
	br.dir = shotDir(t)
	// The finder's 404s (asked for below) are logged by the browser.
	br.allow = func(s string) bool {
		return strings.Contains(s, "status of 404") && strings.Contains(s, "/api/v1/dashboard/messages?")
	}
	br.open("message", 1)
	if n := evalAs[int](br, `document.querySelectorAll('input[name="partitionId"]').length`); n != 0 {
		t.Errorf("the Message page asks for a partition id")
	}

	// By place: each of us's messages (the feed lists newest first).
	for _, m := range byPart["us"] {
		off := fmt.Sprint(m["offset"])
		br.find("orders", "us", off, "")
		br.expectText(`[data-col="transactionId"]`, m["transactionId"].(string))
		br.expectText(`[data-col="offset"]`, commas(num(m["offset"])))
		br.expectContains(`dl.kv`, "us")
	}
	br.screenshot("message-find")

	// By transaction id alone.
	m := byPart["asia"][len(byPart["asia"])-1]
	br.find("", "", "", m["transactionId"].(string))
	br.expectText(`[data-col="transactionId"]`, m["transactionId"].(string))
	br.expectText(`[data-col="offset"]`, commas(num(m["offset"])))

	// One transaction id in two partitions: both listed, each opens.
	br.find("", "", "", "dup-1")
	br.poll(`document.querySelectorAll('tr[data-found]').length === 2`, "two messages with dup-1")
	for _, p := range []string{"eu", "asia"} {
		m := byPart[p][0] // the newest of each is dup-1's
		if m["transactionId"] != "dup-1" {
			t.Fatalf("the newest of %s is %v, want dup-1", p, m["transactionId"])
		}
		sel := fmt.Sprintf(`tr[data-found="orders/%s/%v"] a`, p, m["offset"])
		br.click(sel)
		br.waitDrawn(1)
		br.expectContains(`[data-col="payload"]`, `"copy": "`+p+`"`)
		br.do("back", chromedp.NavigateBack())
		br.waitDrawn(1)
	}
	// Narrowed to a partition, one.
	br.find("orders", "asia", "", "dup-1")
	br.expectContains(`[data-col="payload"]`, `"copy": "asia"`)

	// The older address, #/message/PARTITION_ID/TXN, still opens the
	// message: it becomes the search by transaction id, in that partition.
	for _, p := range []string{"eu", "asia"} {
		m := byPart[p][0]
		br.eval(`document.querySelector('main').dataset.rev = '0'`)
		br.open(fmt.Sprintf("message/%s/dup-1", m["partitionId"]), 1)
		br.expectContains(`[data-col="payload"]`, `"copy": "`+p+`"`)
		if h := evalAs[string](br, `location.hash`); h != "#/message?transactionId=dup-1" {
			t.Errorf("the older address became %q, want #/message?transactionId=dup-1", h)
		}
		if v := evalAs[string](br, `document.querySelector('form input[name="transactionId"]').value`); v != "dup-1" {
			t.Errorf("the form of the older address shows transaction id %q", v)
		}
	}

	// Nothing there: the page says so, with the broker's words.
	var next float64
	for _, p := range q["partitions"].([]any) {
		if p := p.(obj); p["name"] == "us" {
			next = num(p["next"])
		}
	}
	br.find("orders", "us", fmt.Sprint(next), "")
	br.expectContains(`[data-col="not-found"]`, "Message not found: orders / us at offset "+fmt.Sprint(next))
	br.find("", "", "", "no-such-transaction")
	br.expectContains(`[data-col="not-found"]`, "Message not found: transaction id no-such-transaction")
	br.noConsoleErrors("message")
}
