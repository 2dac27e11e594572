package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// TestGroupsOfOneQueue: groups QUEUE lists that queue's groups only; a queue
// that is not there is a failure.
func TestGroupsOfOneQueue(t *testing.T) {
	_, bin := buildRegent(t)
	addr := testBroker(t)
	for _, c := range [][]string{
		{"push", "orders", "x"}, {"push", "audit", "y"}, {"push", "quiet", "z"},
		{"pop", "orders", "--group", "billing"}, {"pop", "audit", "--group", "billing"}, {"pop", "audit", "--group", "reports", "--ack", "completed"},
	} {
		if code, _, errs := runBin(t, bin, "", append(c, "--addr", addr)...); code != exitOK {
			t.Fatalf("%v: %s", c, errs)
		}
	}
	code, out, _ := runBin(t, bin, "", "groups", "audit", "--json", "--addr", addr)
	var rows []struct{ Group, Queue string }
	if code != exitOK || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 2 || rows[0].Group != "billing" || rows[1].Group != "reports" ||
		rows[0].Queue != "audit" || rows[1].Queue != "audit" {
		t.Fatalf("groups audit --json: %d %s", code, out)
	}
	code, out, _ = runBin(t, bin, "", "groups", "orders", "--addr", addr)
	if code != exitOK || !regexp.MustCompile(`(?m)^billing +orders +1 +1 +1$`).MatchString(out) || strings.Contains(out, "audit") || strings.Contains(out, "reports") {
		t.Fatalf("groups orders: %d\n%s", code, out)
	}
	code, out, _ = runBin(t, bin, "", "groups", "--addr", addr)
	if code != exitOK || strings.Count(out, "billing") != 2 || !strings.Contains(out, "reports") {
		t.Fatalf("groups: %d\n%s", code, out)
	}
	if code, out, _ := runBin(t, bin, "", "groups", "quiet", "--addr", addr); code != exitOK || out != "no consumer group has read quiet\n" {
		t.Fatalf("groups of a queue nobody read: %d %q", code, out)
	}
	if code, out, errs := runBin(t, bin, "", "groups", "nosuchqueue", "--addr", addr); code != exitFailure || out != "" || !strings.Contains(errs, `no queue "nosuchqueue"`) {
		t.Fatalf("groups nosuchqueue: %d %q %q", code, out, errs)
	}
	for _, args := range [][]string{{"groups", ""}, {"groups", "a", "b"}} {
		if code, _, _ := runBin(t, bin, "", append(args, "--addr", addr)...); code != exitUsage {
			t.Errorf("%q: exit %d", args, code)
		}
	}
}
