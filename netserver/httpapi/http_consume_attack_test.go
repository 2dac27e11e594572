package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The consume path under attack: 50 clients popping at once, over leases
// and autoAck, with messages of 1 MiB among small ones, long polls their
// clients abandon, and clients that send malformed batch acks. Pops answer
// from pooled message buffers (PopRequest.Buf) and write the transactionId
// of a message pushed without one from its id (PopRequest.BareTxn): every
// message must come out whole, with its own payload and transactionId,
// exactly once per group, and every malformed ack must be a 400 that
// changes nothing.
func TestHTTPConsumeUnderAttack(t *testing.T) {
	h := newHarness(t)
	const n, parts = 2000, 8
	big := strings.Repeat("b", 1<<20-64)
	// want[id] is the transactionId and the payload's n of each message.
	type wantMsg struct {
		txn string
		n   int
	}
	want := map[string]wantMsg{}
	for start := 0; start < n; start += 100 {
		var items []obj
		for i := start; i < start+100; i++ {
			it := obj{"queue": "cc", "partition": "p" + strconv.Itoa(i%parts), "payload": obj{"n": i, "pad": strings.Repeat("é\"\\\n", i%7)}}
			if i%2 == 0 {
				it["transactionId"] = "tx-" + strconv.Itoa(i)
			}
			if i%500 == 7 {
				it["payload"] = obj{"n": i, "pad": big} // 1 MiB, the largest a push takes with room for its names
			}
			items = append(items, it)
		}
		for k, r := range h.push(items...) {
			i := start + k
			if r["status"] != "queued" {
				t.Fatalf("push %d: %v", i, r)
			}
			txn := "tx-" + strconv.Itoa(i)
			if i%2 == 1 {
				txn = r["message_id"].(string) // pushed without one: its id
			}
			want[r["message_id"].(string)] = wantMsg{txn, i}
		}
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	var mu sync.Mutex
	seen := map[string]map[string]int{"g": {}, "auto": {}} // group → id → deliveries
	var errs []string
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(errs) < 10 {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	// done reports whether group has every message, or the test failed.
	done := func(group string) bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen[group]) >= n || len(errs) > 0
	}
	type popMsg struct {
		ID, TransactionID, PartitionID, LeaseID string
		Data                                    struct {
			N   int    `json:"n"`
			Pad string `json:"pad"`
		}
	}
	// consume pops group until it has every message; with lease it acks
	// each batch with one batch ack.
	consume := func(group, query string, lease bool) {
		deadline := time.Now().Add(60 * time.Second)
		for !done(group) && time.Now().Before(deadline) {
			resp, err := client.Get(h.url + "/api/v1/pop/queue/cc?batch=100&consumerGroup=" + group + query)
			if err != nil {
				fail("pop: %v", err)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 204 {
				continue
			}
			var ans struct{ Messages []popMsg }
			if resp.StatusCode != 200 || json.Unmarshal(body, &ans) != nil || len(ans.Messages) == 0 {
				fail("pop %s: %d %.200s", group, resp.StatusCode, body)
				return
			}
			var acks []obj
			for _, m := range ans.Messages {
				w, ok := want[m.ID]
				if !ok || m.TransactionID != w.txn || m.Data.N != w.n || (w.n%500 == 7) != (len(m.Data.Pad) == len(big)) ||
					(w.n%500 != 7 && m.Data.Pad != strings.Repeat("é\"\\\n", w.n%7)) {
					fail("group %s: message %s (want %+v) came as txn %q n %d pad %d bytes", group, m.ID, w, m.TransactionID, m.Data.N, len(m.Data.Pad))
					return
				}
				mu.Lock()
				seen[group][m.ID]++
				mu.Unlock()
				acks = append(acks, obj{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": "completed"})
			}
			if !lease {
				continue
			}
			ab, _ := json.Marshal(obj{"consumerGroup": group, "acknowledgments": acks})
			resp, err = client.Post(h.url+"/api/v1/ack/batch", "application/json", bytes.NewReader(ab))
			if err != nil {
				fail("ack: %v", err)
				return
			}
			res, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || bytes.Contains(res, []byte(`"success":false`)) {
				fail("ack: %d %.300s", resp.StatusCode, res)
				return
			}
		}
	}
	malformed := []string{
		`{"consumerGroup":"g","acknowledgments":[{"transactionId":"x","partitionId":`,
		`{"consumerGroup":"g","acknowledgments":[{"transactionId":1,"partitionId":"p"}]}`,
		`{"consumerGroup":"g","acknowledgments":{}}`,
		`{"consumerGroup":"g","acknowledgments":[{"transactionId":"x","partitionId":"` + strings.Repeat("\\u00", 1000) + `"}]}`,
		`{"consumerGroup":"g","acknowledgments":[{"transactionId":"x","partitionId":null}]}`,
		`[` + strings.Repeat(`"`+strings.Repeat("x", 1<<16), 16),
		"\x00\xff{}",
	}
	stop := make(chan struct{})
	var wg, side sync.WaitGroup
	for w := 0; w < 50; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w%2 == 0 {
				consume("g", "", true)
			} else {
				consume("auto", "&autoAck=true", false)
			}
		}()
	}
	for w := 0; w < 4; w++ {
		side.Add(1)
		go func() { // malformed batch acks, all the while
			defer side.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := client.Post(h.url+"/api/v1/ack/batch", "application/json", strings.NewReader(malformed[(k+w)%len(malformed)]))
				if err != nil {
					fail("malformed ack: %v", err)
					return
				}
				res, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 400 || !json.Valid(res) {
					fail("malformed ack %d: %d %.200s", (k+w)%len(malformed), resp.StatusCode, res)
					return
				}
			}
		}()
	}
	// The abandoned polls have a client of their own, without keep-alive.
	// Sharing the consumers' Transport, a consumer's pop once failed in CI
	// (a loaded machine) with "context deadline exceeded" 0.94 s into the
	// test: no request of the consumers has a deadline (their client's 30 s
	// timeout says so by name), so the error came from an abandoned poll's
	// 3 ms deadline through a connection of the shared pool. 55 runs here,
	// 40 of them on a loaded machine, did not reproduce it.
	abandoner := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	t.Cleanup(abandoner.CloseIdleConnections)
	side.Add(1)
	go func() { // long polls of another group, abandoned by their clients
		defer side.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Millisecond)
			req, _ := http.NewRequestWithContext(ctx, "GET", h.url+"/api/v1/pop/queue/cc?batch=100&consumerGroup=lp&wait=true&timeout=5000", nil)
			if resp, err := abandoner.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			cancel()
		}
	}()
	for w := 0; w < 4; w++ {
		side.Add(1)
		go func() { // long polls that park and time out on the server: 204
			defer side.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := client.Get(h.url + "/api/v1/pop/queue/cc/partition/none?batch=100&wait=true&timeout=2")
				if err != nil {
					fail("long poll: %v", err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 204 {
					fail("long poll of an empty partition: %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	side.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d errors, first ones:\n%s", len(errs), strings.Join(errs, "\n"))
	}
	for group, ids := range seen {
		if len(ids) != n {
			t.Errorf("group %s got %d messages of %d", group, len(ids), n)
		}
		for id, k := range ids {
			if k != 1 {
				t.Errorf("group %s got %s %d times", group, id, k)
			}
		}
	}
}
