package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver/httpapi"
)

// get answers a GET with its status, decoded body and X-Total-Count.
func (h *harness) get(path string, out any) (code int, total string) {
	h.t.Helper()
	resp, err := h.c.Get(h.url + path)
	if err != nil {
		h.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	if resp.StatusCode == 200 && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			h.t.Fatalf("GET %s: decoding %.200s: %v", path, b, err)
		}
	}
	return resp.StatusCode, resp.Header.Get("X-Total-Count")
}

type pageAnswer struct {
	Partitions []struct {
		ID    string `json:"id"`
		Name  string `json:"name"`
		Stats struct {
			Total      uint64 `json:"total"`
			DeadLetter uint64 `json:"deadLetter"`
		} `json:"stats"`
	} `json:"partitions"`
	Totals struct {
		Total      uint64 `json:"total"`
		DeadLetter uint64 `json:"deadLetter"`
	} `json:"totals"`
	Pagination struct {
		Limit  int     `json:"limit"`
		Offset int     `json:"offset"`
		Total  int     `json:"total"`
		Next   *string `json:"next"`
	} `json:"pagination"`
}

// TestHTTPPartitionPages: a queue's partitions come a page at a time
// (default 1,000, at most 10,000), in creation order, by cursor or offset;
// following pagination.next lists each once; totals sum all of them.
func TestHTTPPartitionPages(t *testing.T) {
	h := newHarness(t)
	const n = 2500
	fillPartitions(t, h.e, "big", n)
	m := msgsOf(h.pop("big/partition/partition-5?consumerGroup=d"))
	h.ackBatch("d", ackOf(m[0], "dlq"))

	for _, route := range []string{"/api/v1/resources/queues/big", "/api/v1/status/queues/big"} {
		var a pageAnswer
		h.get(route, &a)
		p := a.Pagination
		if len(a.Partitions) != 1000 || p.Limit != 1000 || p.Offset != 0 || p.Total != n || p.Next == nil || *p.Next != a.Partitions[999].ID {
			t.Fatalf("%s: %d partitions, pagination %+v", route, len(a.Partitions), p)
		}
		// By cursor, 700 at a time: every partition once, in creation order.
		var names []string
		after := ""
		for pages := 0; ; pages++ {
			var a pageAnswer
			h.get(route+"?limit=700&after="+after, &a)
			if a.Pagination.Offset != len(names) {
				t.Fatalf("%s page %d: offset %d after %d partitions", route, pages, a.Pagination.Offset, len(names))
			}
			for _, p := range a.Partitions {
				names = append(names, p.Name)
				if p.Name == "partition-5" && p.Stats.DeadLetter != 1 {
					t.Errorf("%s: partition-5 counts %d dead letters", route, p.Stats.DeadLetter)
				}
			}
			if a.Totals.Total != n || a.Totals.DeadLetter != 1 {
				t.Errorf("%s: totals %+v over a page", route, a.Totals)
			}
			if a.Pagination.Next == nil {
				break
			}
			after = *a.Pagination.Next
		}
		if len(names) != n {
			t.Fatalf("%s: %d partitions listed, want %d", route, len(names), n)
		}
		for i, name := range names {
			if name != "partition-"+strconv.Itoa(i) {
				t.Fatalf("%s: partition %d is %s", route, i, name)
			}
		}
	}

	var a pageAnswer
	h.get("/api/v1/resources/queues/big?limit=20000", &a)
	if a.Pagination.Limit != engine.MaxPartitionPage || len(a.Partitions) != n || a.Pagination.Next != nil {
		t.Errorf("limit 20000: pagination %+v, %d partitions", a.Pagination, len(a.Partitions))
	}
	h.get("/api/v1/resources/queues/big?offset=2400&limit=50", &a)
	if a.Pagination.Offset != 2400 || len(a.Partitions) != 50 || a.Partitions[0].Name != "partition-2400" || *a.Pagination.Next != a.Partitions[49].ID {
		t.Errorf("offset 2400: pagination %+v, first %s", a.Pagination, a.Partitions[0].Name)
	}
	other := h.push(obj{"queue": "other", "payload": 1})
	for _, after := range []string{"nope", other[0]["partition_id"].(string)} {
		if code, _ := h.get("/api/v1/resources/queues/big?after="+after, nil); code != 400 {
			t.Errorf("after=%s: status %d, want 400", after, code)
		}
	}
}

// TestHTTPListPages: the other lists take limit and offset with a default
// and a maximum, and say how many there are (pagination, or X-Total-Count
// for Queen's bare arrays); lists sorted by lag or time refuse a page past
// 20,000.
func TestHTTPListPages(t *testing.T) {
	h := newHarness(t)
	for i := 0; i < 5; i++ {
		h.pushN(fmt.Sprintf("ns%d.q%d", i%2, i), "p", 1)
	}
	type listPage struct {
		Queues     []obj `json:"queues"`
		Namespaces []obj `json:"namespaces"`
		Pagination struct {
			Limit, Offset, Total int
			Next                 *int
		} `json:"pagination"`
	}
	var l listPage
	h.get("/api/v1/resources/queues?limit=2&offset=1", &l)
	if len(l.Queues) != 2 || l.Queues[0]["name"] != "ns0.q2" || l.Pagination.Total != 5 || l.Pagination.Next == nil || *l.Pagination.Next != 3 {
		t.Errorf("queues limit 2 offset 1: %v %+v", l.Queues, l.Pagination)
	}
	l = listPage{}
	h.get("/api/v1/dashboard/queues?limit=2&offset=4", &l)
	if len(l.Queues) != 1 || l.Queues[0]["name"] != "ns1.q3" || l.Pagination.Next != nil {
		t.Errorf("dashboard queues offset 4: %v %+v", l.Queues, l.Pagination)
	}
	l = listPage{}
	h.get("/api/v1/resources/queues?limit=99999", &l)
	if l.Pagination.Limit != 10_000 || len(l.Queues) != 5 {
		t.Errorf("queues limit 99999: %+v", l.Pagination)
	}
	l = listPage{}
	h.get("/api/v1/resources/namespaces?limit=1&offset=1", &l)
	if len(l.Namespaces) != 1 || l.Namespaces[0]["namespace"] != "ns1" || l.Pagination.Total != 2 {
		t.Errorf("namespaces: %v %+v", l.Namespaces, l.Pagination)
	}

	// Consumer groups: bare arrays, the total in X-Total-Count.
	h.pushN("g", "a", 2)
	h.pushN("g", "b", 2)
	h.pushN("g", "c", 2)
	for _, g := range []string{"g1", "g2", "g3"} {
		h.pop("g/partition/a?consumerGroup=" + g)
	}
	var groups []obj
	if _, total := h.get("/api/v1/consumer-groups?limit=2&offset=1", &groups); total != "3" || len(groups) != 2 || groups[0]["name"] != "g2" {
		t.Errorf("groups: total %s, %v", total, groups)
	}
	var detail map[string]struct {
		Partitions []obj `json:"partitions"`
	}
	if _, total := h.get("/api/v1/consumer-groups/g1?limit=1&offset=1", &detail); total != "3" ||
		len(detail["g"].Partitions) != 1 || detail["g"].Partitions[0]["partition"] != "b" {
		t.Errorf("group detail: total %s, %v", total, detail)
	}
	var lagging []obj
	if _, total := h.get("/api/v1/consumer-groups/lagging?minLagSeconds=0&limit=2", &lagging); total != "9" || len(lagging) != 2 {
		t.Errorf("lagging: total %s, %d rows", total, len(lagging))
	}

	// The lists sorted by lag or time stop at 20,000.
	for _, path := range []string{
		"/api/v1/consumer-groups/lagging?offset=19999&limit=2",
		"/api/v1/messages?offset=19900&limit=200",
		"/api/v1/status/queues/g/messages?offset=20000&limit=1",
		"/api/v1/traces/by-name/x?offset=20000&limit=1",
		"/api/v1/dashboard/queues/g?partitionsOffset=19999&partitions=2",
	} {
		if code, _ := h.get(path, nil); code != 400 {
			t.Errorf("%s: status %d, want 400", path, code)
		}
	}
	var dq struct {
		Partitions []obj `json:"partitions"`
		Pagination struct{ Limit, Offset, Total int }
	}
	h.get("/api/v1/dashboard/queues/g?partitions=2&partitionsOffset=1", &dq)
	if len(dq.Partitions) != 2 || dq.Pagination.Total != 3 || dq.Pagination.Offset != 1 {
		t.Errorf("dashboard queue: %d partitions, %+v", len(dq.Partitions), dq.Pagination)
	}
	h.get("/api/v1/dashboard/queues/g?partitions=99999", &dq)
	if dq.Pagination.Limit != 10_000 || len(dq.Partitions) != 3 {
		t.Errorf("dashboard queue, partitions=99999: %+v", dq.Pagination)
	}
}

// TestHTTPMessagePagesAreTheList: pages of the message list (oldest first,
// across partitions) put together are the whole list.
func TestHTTPMessagePagesAreTheList(t *testing.T) {
	h := newHarness(t)
	for round := 0; round < 4; round++ {
		for _, p := range []string{"x", "y", "z"} {
			h.pushN("m", p, 3)
		}
	}
	ids := func(path string) []string {
		var a struct {
			Messages []obj `json:"messages"`
		}
		h.get(path, &a)
		var out []string
		for _, m := range a.Messages {
			out = append(out, m["partition"].(string)+"/"+m["transactionId"].(string)+"@"+m["createdAt"].(string))
		}
		return out
	}
	for _, base := range []string{"/api/v1/messages?queue=m&", "/api/v1/status/queues/m/messages?"} {
		all := ids(base + "limit=1000")
		if len(all) != 36 {
			t.Fatalf("%s: %d messages", base, len(all))
		}
		var paged []string
		for off := 0; off < 40; off += 5 {
			paged = append(paged, ids(fmt.Sprintf("%slimit=5&offset=%d", base, off))...)
		}
		if strings.Join(paged, " ") != strings.Join(all, " ") {
			t.Errorf("%s: pages of 5 are\n%v\nthe list is\n%v", base, paged, all)
		}
		for i := 1; i < len(all); i++ {
			if a, b := all[i-1][strings.Index(all[i-1], "@"):], all[i][strings.Index(all[i], "@"):]; a > b {
				t.Errorf("%s: not oldest first at %d: %s then %s", base, i, all[i-1], all[i])
			}
		}
	}
}

// TestHTTPDLQPagesAreBoundedBySize: dead letters of 1 MiB come at most
// about 16 MiB a page; pagination.next says where the next page starts, and
// following it lists every entry once.
func TestHTTPDLQPagesAreBoundedBySize(t *testing.T) {
	h := newHarness(t)
	big := strings.Repeat("d", 1<<20)
	for i := 0; i < 4; i++ {
		items := make([]obj, 5)
		for k := range items {
			items[k] = obj{"queue": "fat", "partition": "p", "payload": big}
		}
		h.push(items...)
	}
	var acks []obj
	for {
		msgs := msgsOf(h.pop("fat?batch=5&consumerGroup=g"))
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			acks = append(acks, ackOf(m, "dlq"))
		}
		h.ackBatch("g", acks[len(acks)-len(msgs):]...)
	}
	if len(acks) != 20 {
		t.Fatalf("%d dead-lettered", len(acks))
	}
	seen := map[string]bool{}
	offset, pages := 0, 0
	for {
		resp, err := h.c.Get(fmt.Sprintf("%s/api/v1/dlq?queue=fat&limit=100&offset=%d", h.url, offset))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var a struct {
			Messages   []obj `json:"messages"`
			Total      int   `json:"total"`
			Pagination struct {
				Limit, Offset int
				Next          *int
			} `json:"pagination"`
		}
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatal(err)
		}
		pages++
		if len(b) > httpapi.DLQPageBytes+1<<20 || len(a.Messages) == 0 || a.Total != 20 {
			t.Fatalf("page at %d: %d bytes, %d entries of %d", offset, len(b), len(a.Messages), a.Total)
		}
		for _, m := range a.Messages {
			if seen[m["entryId"].(string)] {
				t.Fatalf("entry %s listed twice", m["entryId"])
			}
			seen[m["entryId"].(string)] = true
		}
		if a.Pagination.Next == nil {
			break
		}
		if *a.Pagination.Next != offset+len(a.Messages) {
			t.Fatalf("next %d after %d entries from %d", *a.Pagination.Next, len(a.Messages), offset)
		}
		offset = *a.Pagination.Next
	}
	if len(seen) != 20 || pages < 2 {
		t.Errorf("%d entries in %d pages", len(seen), pages)
	}
	var a struct {
		Pagination struct{ Limit int }
	}
	h.get("/api/v1/dlq?queue=fat&limit=1000000&offset=19", &a)
	if a.Pagination.Limit != 10_000 {
		t.Errorf("limit 1000000: pagination.limit %d", a.Pagination.Limit)
	}
}

// TestHTTPTracePagesAreTheList: pages of a trace name's traces (newest
// first, read again for the page) put together are the whole list.
func TestHTTPTracePagesAreTheList(t *testing.T) {
	h := newHarness(t)
	for i := 0; i < 7; i++ {
		res := h.push(obj{"queue": "tq", "partition": fmt.Sprintf("p%d", i%3), "transactionId": fmt.Sprintf("t%d", i), "payload": obj{"i": i}})
		h.call("POST", "/api/v1/traces", obj{"transactionId": fmt.Sprintf("t%d", i), "partitionId": res[0]["partition_id"],
			"data": obj{"i": i}, "traceNames": "flow"}, 201, nil)
	}
	list := func(q string) (ids []string, total float64) {
		var a struct {
			Traces []obj   `json:"traces"`
			Total  float64 `json:"total"`
		}
		h.get("/api/v1/traces/by-name/flow?"+q, &a)
		for _, tr := range a.Traces {
			ids = append(ids, tr["transaction_id"].(string)+"="+fmt.Sprint(tr["data"].(obj)["i"]))
		}
		return ids, a.Total
	}
	all, total := list("limit=100")
	if len(all) != 7 || total != 7 || all[0] != "t6=6" {
		t.Fatalf("all traces: %v (total %v)", all, total)
	}
	var paged []string
	for off := 0; off < 7; off += 3 {
		ids, _ := list(fmt.Sprintf("limit=3&offset=%d", off))
		paged = append(paged, ids...)
	}
	if strings.Join(paged, " ") != strings.Join(all, " ") {
		t.Errorf("pages of 3: %v, the list: %v", paged, all)
	}
}
