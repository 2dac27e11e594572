package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serveBanner starts `regent serve` with env and args on free loopback
// ports and returns its HTTP address and what it printed at start: the
// lines up to its acks line, or with --json its one line.
func serveBanner(t *testing.T, bin string, env []string, args ...string) (httpAddr, banner string) {
	t.Helper()
	httpAddr = freePort(t)
	cmd := exec.Command(bin, append([]string{"serve", "--data", t.TempDir(), "--tcp", freePort(t), "--http", httpAddr, "--log-level", "warn"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
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
	got := make(chan string, 1)
	go func() {
		var b strings.Builder
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "{") || strings.HasPrefix(sc.Text(), "  acks") {
				break
			}
		}
		got <- b.String()
		for sc.Scan() {
		}
	}()
	select {
	case banner = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("regent serve printed no banner in 20 s")
	}
	return httpAddr, banner
}

// leaselessAck pushes a message over HTTP, pops it as group g and acks it
// naming no lease, as Queen's clients may; it returns the ack's result.
func leaselessAck(t *testing.T, httpAddr string) map[string]any {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	base := "http://" + httpAddr
	if code, body := httpDo(t, hc, "POST", base+"/api/v1/push", "", `{"items":[{"queue":"mig","payload":{"n":1}}]}`); code != 201 {
		t.Fatalf("push: %d %s", code, body)
	}
	code, body := httpDo(t, hc, "GET", base+"/api/v1/pop/queue/mig?consumerGroup=g", "", "")
	var pop struct {
		Messages []struct{ TransactionID, PartitionID, LeaseID string }
	}
	if code != 200 || json.Unmarshal([]byte(body), &pop) != nil || len(pop.Messages) != 1 || pop.Messages[0].LeaseID == "" {
		t.Fatalf("pop: %d %s", code, body)
	}
	m := pop.Messages[0]
	ack, _ := json.Marshal(map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "consumerGroup": "g", "status": "completed"})
	code, body = httpDo(t, hc, "POST", base+"/api/v1/ack", "", string(ack))
	var res []map[string]any
	if code != 200 || json.Unmarshal([]byte(body), &res) != nil || len(res) != 1 {
		t.Fatalf("ack: %d %s", code, body)
	}
	return res[0]
}

// TestServeUncheckedAcks: serve checks every ack's lease by default, and
// --unchecked-acks (or REGENT_UNCHECKED_ACKS=true) takes an ack that names
// no lease, as Queen does; the banner says which, in text and in --json.
func TestServeUncheckedAcks(t *testing.T) {
	_, bin := buildRegent(t)

	web, banner := serveBanner(t, bin, nil)
	if !strings.Contains(banner, "  acks    checked") {
		t.Errorf("default banner has no checked acks line:\n%s", banner)
	}
	if r := leaselessAck(t, web); r["success"] != false || !strings.Contains(r["error"].(string), "Lease required") ||
		!strings.Contains(r["error"].(string), "--unchecked-acks") {
		t.Errorf("a lease-less ack by default: %v, want refused naming --unchecked-acks", r)
	}

	web, banner = serveBanner(t, bin, []string{"REGENT_UNCHECKED_ACKS=true"})
	if !strings.Contains(banner, "  acks    UNCHECKED") {
		t.Errorf("REGENT_UNCHECKED_ACKS=true: banner has no unchecked acks line:\n%s", banner)
	}
	if r := leaselessAck(t, web); r["success"] != true || r["queueName"] != "mig" {
		t.Errorf("REGENT_UNCHECKED_ACKS=true: a lease-less ack: %v", r)
	}

	web, banner = serveBanner(t, bin, nil, "--json", "--unchecked-acks")
	var b struct {
		UncheckedAcks *bool `json:"uncheckedAcks"`
	}
	if err := json.Unmarshal([]byte(banner), &b); err != nil || b.UncheckedAcks == nil || !*b.UncheckedAcks {
		t.Errorf("--json --unchecked-acks: banner %s (%v), want uncheckedAcks true", banner, err)
	}
	if r := leaselessAck(t, web); r["success"] != true {
		t.Errorf("--unchecked-acks: a lease-less ack: %v", r)
	}
	// The flag wins over the environment.
	web, _ = serveBanner(t, bin, []string{"REGENT_UNCHECKED_ACKS=true"}, "--unchecked-acks=false")
	if r := leaselessAck(t, web); r["success"] != false {
		t.Errorf("--unchecked-acks=false over REGENT_UNCHECKED_ACKS=true: a lease-less ack: %v", r)
	}

	cmd := exec.Command(bin, "serve", "--data", t.TempDir(), "--tcp", "127.0.0.1:0", "--http", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "REGENT_UNCHECKED_ACKS=sometimes")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitUsage || !strings.Contains(string(out), "--unchecked-acks") {
		t.Errorf("REGENT_UNCHECKED_ACKS=sometimes: %v %s, want exit %d naming --unchecked-acks", err, out, exitUsage)
	}
}
