package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/engine"
)

// testBroker is a real broker on 127.0.0.1:0 (temp data dir) for the
// operator commands; it returns its TCP door's address.
func testBroker(t *testing.T) string {
	t.Helper()
	b := brokertest.Start(t, broker.Options{Engine: engine.Config{SnapshotEveryBytes: -1}})
	return b.TCPAddr().String()
}

// cli runs one command and returns its exit code and output.
func cli(t *testing.T, addr string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if addr != "" {
		args = append(args, "--addr", addr)
	}
	code := runIO(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestOperatorCommands(t *testing.T) {
	addr := testBroker(t)
	// configure
	code, out, errs := cli(t, addr, "", "configure", "orders", "--lease-time", "30s", "--retry-limit", "1", "--retry-delay", "0s", "--json")
	var cfg struct {
		Created bool           `json:"created"`
		Options map[string]any `json:"options"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &cfg) != nil || !cfg.Created || cfg.Options["leaseTime"] != 30.0 || cfg.Options["retryLimit"] != 1.0 {
		t.Fatalf("configure: %d %s %s", code, out, errs)
	}
	// push: one payload, then lines of stdin
	if code, out, _ := cli(t, addr, "", "push", "orders", `{"id":1}`, "--partition", "eu", "--txn", "o-1"); code != exitOK || !strings.HasPrefix(out, "queued") {
		t.Fatalf("push: %d %q", code, out)
	}
	if code, out, _ := cli(t, addr, "", "push", "orders", `{"id":1}`, "--partition", "eu", "--txn", "o-1", "--json"); code != exitOK || !strings.Contains(out, `"status": "duplicate"`) {
		t.Fatalf("duplicate push: %d %q", code, out)
	}
	code, out, _ = cli(t, addr, "a\nb\n\nc\n", "push", "orders", "-", "--partition", "us", "--json")
	var pushed []pushResultJSON
	if code != exitOK || json.Unmarshal([]byte(out), &pushed) != nil || len(pushed) != 3 || pushed[2].Offset != 2 {
		t.Fatalf("push from stdin: %d %s", code, out)
	}
	// pop and ack, per partition
	code, out, _ = cli(t, addr, "", "pop", "orders", "--partition", "us", "--batch", "2", "--ack", "completed", "--json")
	var popped []messageJSON
	if code != exitOK || json.Unmarshal([]byte(out), &popped) != nil || len(popped) != 2 || popped[0].Payload != "a" || popped[1].Acked != "completed" {
		t.Fatalf("pop --ack: %d %s", code, out)
	}
	if code, out, _ := cli(t, addr, "", "pop", "orders", "--partition", "us", "--ack", "dlq", "--error", "bad data"); code != exitOK || !strings.Contains(out, "acked dlq") {
		t.Fatalf("pop --ack dlq: %d %s", code, out)
	}
	// queues, queue
	if code, out, _ := cli(t, addr, "", "queues"); code != exitOK || !strings.Contains(out, "orders") || !strings.Contains(out, "(queue mode)") || strings.Contains(out, "__QUEUE_MODE__") {
		t.Fatalf("queues: %d %s", code, out)
	}
	code, out, _ = cli(t, addr, "", "queue", "orders", "--json")
	var qi struct {
		Messages    float64          `json:"messages"`
		DeadLetters float64          `json:"deadLetters"`
		Partitions  []map[string]any `json:"partitions"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &qi) != nil || qi.Messages != 4 || qi.DeadLetters != 1 || len(qi.Partitions) != 3 {
		t.Fatalf("queue: %d %s", code, out)
	}
	if code, out, _ := cli(t, addr, "", "queue", "orders"); code != exitOK || !strings.Contains(out, "PARTITION") || !strings.Contains(out, "lease-time=30s") {
		t.Fatalf("queue (text): %d %s", code, out)
	}
	// dlq list, redrive
	code, out, _ = cli(t, addr, "", "dlq", "orders", "--json")
	var dl struct {
		Total   int              `json:"total"`
		Entries []map[string]any `json:"entries"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &dl) != nil || dl.Total != 1 || dl.Entries[0]["error"] != "bad data" {
		t.Fatalf("dlq: %d %s", code, out)
	}
	if code, out, _ := cli(t, addr, "", "dlq", "orders", "--redrive"); code != exitOK || !strings.Contains(out, "redriven 1") {
		t.Fatalf("dlq --redrive: %d %s", code, out)
	}
	// groups, seek
	cli(t, addr, "", "pop", "orders", "--partition", "eu", "--group", "audit")
	code, out, _ = cli(t, addr, "", "groups", "--json")
	if code != exitOK || !strings.Contains(out, `"group": "audit"`) {
		t.Fatalf("groups: %d %s", code, out)
	}
	if code, out, _ := cli(t, addr, "", "seek", "orders", "audit", "--to-end"); code != exitOK || !strings.Contains(out, "moved audit") {
		t.Fatalf("seek: %d %s", code, out)
	}
	if code, out, _ := cli(t, addr, "", "pop", "orders", "--group", "audit", "--json"); code != exitOK || strings.TrimSpace(out) != "[]" {
		t.Fatalf("after seek to end: %d %s", code, out)
	}
	// pop by namespace and task
	cli(t, addr, "", "configure", "media.resize", "--namespace", "media", "--task", "resize")
	cli(t, addr, "", "push", "media.resize", "photo-1")
	if code, out, _ := cli(t, addr, "", "pop", "--namespace", "media", "--task", "resize", "--ack", "completed", "--json"); code != exitOK || !strings.Contains(out, `"payload": "photo-1"`) {
		t.Fatalf("pop by labels: %d %s", code, out)
	}
	if code, _, _ := cli(t, addr, "", "pop", "orders", "--task", "x"); code != exitUsage {
		t.Fatalf("pop with a queue and a task: %d", code)
	}
	// stats (not a terminal: printed once)
	if code, out, _ := cli(t, addr, "", "stats", "--json"); code != exitOK || !strings.Contains(out, `"pushed": 6`) {
		t.Fatalf("stats: %d %s", code, out)
	}
	if code, out, _ := cli(t, addr, "", "stats"); code != exitOK || !strings.Contains(out, "pushed 6") {
		t.Fatalf("stats (text): %d %s", code, out)
	}
}

func TestOperatorExitCodes(t *testing.T) {
	addr := testBroker(t)
	cases := []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"push"}, exitUsage, "wrong number of arguments"},
		{[]string{"pop", "q", "--batch", "0"}, exitUsage, "--batch"},
		{[]string{"pop", "q", "--ack", "maybe"}, exitUsage, "want completed"},
		{[]string{"seek", "g", "q"}, exitUsage, "exactly one"},
		{[]string{"seek", "g", "q", "--to", "yesterday"}, exitUsage, "RFC 3339"},
		{[]string{"queue", "nope"}, exitFailure, "queue_not_found"},
		{[]string{"configure", "q", "--lease-time", "0s"}, exitFailure, "leaseTime"},
		{[]string{"nosuchcommand"}, exitUsage, "unknown command"},
	}
	for _, c := range cases {
		code, _, errs := cli(t, addr, "", c.args...)
		if code != c.code || !strings.Contains(errs, c.err) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errs, c.code, c.err)
		}
	}
	// An empty queue name is a usage mistake (it was a refused item, exit 1).
	if code, out, errs := cli(t, addr, "", "push", "", "x"); code != exitUsage || out != "" || !strings.Contains(errs, "QUEUE is empty") {
		t.Errorf("push to no queue: %d %q %q", code, out, errs)
	}
	// A broker that is not there: a clear failure.
	code, _, errs := cli(t, "127.0.0.1:1", "", "queues", "--timeout", "300ms")
	if code != exitFailure || !strings.Contains(errs, "dial") {
		t.Errorf("no broker: %d %q", code, errs)
	}
}

func TestTailFollowsNewMessages(t *testing.T) {
	addr := testBroker(t)
	cli(t, addr, "", "push", "events", "old")
	var out, errb lockedBuffer // tail writes them while the test reads
	o := newOp("tail", &out, &errb)
	*o.addr, *o.json = addr, true
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- tail(ctx, o, "events", tailFrom{}) }()
	brokertest.CheckFor(t, 5*time.Second, func() error { // pushes keep coming until tail shows one
		cli(t, addr, "", "push", "events", "new")
		if !bytes.Contains(out.Bytes(), []byte(`"payload":"new"`)) {
			return errors.New("tail shows no new message")
		}
		return nil
	})
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("tail exit %d: %s", code, errb.String())
	}
	if bytes.Contains(out.Bytes(), []byte(`"payload":"old"`)) || !bytes.Contains(out.Bytes(), []byte(`"payload":"new"`)) {
		t.Fatalf("tail printed %s", out.String())
	}
	// Its throwaway group is gone.
	if code, q, _ := cli(t, addr, "", "queues", "--json"); code != exitOK || strings.Contains(q, "tail-") {
		t.Fatalf("the tail group was left behind: %s", q)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

func (l *lockedBuffer) String() string { return string(l.Bytes()) }

func TestSettingsFromEnvAndFlags(t *testing.T) {
	t.Setenv("REGENT_DATA", "/from/env")
	t.Setenv("REGENT_SYNC", "none")
	var errb bytes.Buffer
	s := newSettings("regent serve", &errb, serveSettings)
	if err := s.fs.Parse([]string{"--sync", "interval:5ms"}); err != nil {
		t.Fatal(err)
	}
	if s.get("data") != "/from/env" || s.get("sync") != "interval:5ms" || s.get("http") != ":6632" {
		t.Fatalf("data %q sync %q http %q", s.get("data"), s.get("sync"), s.get("http"))
	}
	// A boolean setting is a switch: bare means true, =false turns it off,
	// anything else is refused.
	for _, c := range []struct {
		args []string
		want string
		ok   bool
	}{{[]string{"--salvage"}, "true", true}, {[]string{"--salvage=false"}, "false", true}, {nil, "false", true}, {[]string{"--salvage=maybe"}, "", false}} {
		s := newSettings("regent serve", &errb, serveSettings)
		err := s.fs.Parse(c.args)
		if (err == nil) != c.ok || (c.ok && s.get("salvage") != c.want) {
			t.Fatalf("%v: salvage %q, err %v", c.args, s.get("salvage"), err)
		}
	}
	t.Setenv("REGENT_ADDR", "broker:7000")
	if defaultAddr() != "broker:7000" {
		t.Fatal("REGENT_ADDR ignored")
	}
}

// TestREADMEConfigurationTable: the README's table of serve's settings is
// the one the code has.
func TestREADMEConfigurationTable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range serveSettings {
		row := "| `--" + s.flag + "` | `" + s.env + "` |"
		if s.env == "" {
			row = "| `--" + s.flag + "` | |" // a flag only
		}
		if !bytes.Contains(readme, []byte(row)) {
			t.Errorf("README lacks the row of --%s (%s)", s.flag, s.env)
		}
	}
}

// TestConfigureChangesOnlyWhatItIsGiven: configure keeps the options it is
// not given; --reset sets them back to their defaults.
func TestConfigureChangesOnlyWhatItIsGiven(t *testing.T) {
	addr := testBroker(t)
	options := func(args ...string) map[string]any {
		t.Helper()
		code, out, errs := cli(t, addr, "", append([]string{"configure", "orders", "--json"}, args...)...)
		var res struct {
			Options map[string]any `json:"options"`
		}
		if code != exitOK || json.Unmarshal([]byte(out), &res) != nil {
			t.Fatalf("configure %v: %d %s %s", args, code, out, errs)
		}
		return res.Options
	}
	if o := options("--retry-delay", "2s", "--lease-time", "30s", "--namespace", "shop"); o["retryDelay"] != 2000.0 || o["leaseTime"] != 30.0 {
		t.Fatalf("created with %v", o)
	}
	o := options("--retry-limit", "5")
	if o["retryLimit"] != 5.0 || o["retryDelay"] != 2000.0 || o["leaseTime"] != 30.0 || o["namespace"] != "shop" {
		t.Fatalf("--retry-limit 5 changed the others: %v", o)
	}
	// What the broker holds, not only what configure answered.
	if code, out, _ := cli(t, addr, "", "queue", "orders", "--json"); code != exitOK || !strings.Contains(out, `"retryDelay": 2000`) || !strings.Contains(out, `"retryLimit": 5`) {
		t.Fatalf("queue after configure: %d %s", code, out)
	}
	d := client.DefaultQueueOptions()
	o = options("--retry-limit", "4", "--reset")
	if o["retryLimit"] != 4.0 || o["retryDelay"] != float64(d.RetryDelay.Milliseconds()) || o["leaseTime"] != d.LeaseTime.Seconds() || o["namespace"] != "" {
		t.Fatalf("--reset kept what it was not given: %v", o)
	}
	if code, out, _ := cli(t, addr, "", "configure", "orders", "--retry-limit", "1"); code != exitOK || !strings.Contains(out, "configured orders: lease 5m0s, 1 retry 1s apart") {
		t.Fatalf("configure (text): %d %q", code, out)
	}
}

// TestOutputIsConsistent: plurals agree with their numbers, dlq says when
// --limit shows part of it, push names the partition with the offset, and
// seek takes QUEUE first (and says so to one who gives it second).
func TestOutputIsConsistent(t *testing.T) {
	addr := testBroker(t)
	want := func(out, s string, args ...string) {
		t.Helper()
		if !strings.Contains(out, s) {
			t.Errorf("%v printed %q; want %q", args, out, s)
		}
	}
	do := func(args ...string) string {
		t.Helper()
		code, out, errs := cli(t, addr, "", args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		return out
	}
	do("configure", "orders", "--retry-limit", "0", "--retry-delay", "0s")
	want(do("queue", "orders"), "queue orders: 0 messages in 1 partition, 0 dead letters", "queue")
	want(do("push", "orders", "one"), "partition Default, offset 0", "push")
	want(do("push", "orders", "two", "--partition", "eu"), "partition eu, offset 0", "push --partition eu")
	want(do("push", "orders", "three", "--partition", "eu"), "partition eu, offset 1", "push --partition eu")
	want(do("queue", "orders"), "queue orders: 3 messages in 2 partitions, 0 dead letters", "queue")
	code, out, _ := cli(t, addr, "", "push", "orders", "four", "--partition", "us", "--json")
	if code != exitOK || !strings.Contains(out, `"partition": "us"`) {
		t.Errorf("push --json: %d %s", code, out)
	}
	do("pop", "orders", "--partition", "Default", "--ack", "dlq")
	want(do("dlq", "orders"), "1 dead letter in orders\n", "dlq")
	want(do("queue", "orders"), "1 dead letter\n", "queue")
	do("pop", "orders", "--partition", "eu", "--batch", "2", "--ack", "dlq")
	want(do("dlq", "orders", "--limit", "1"), "3 dead letters in orders, showing 1 of 3", "dlq --limit 1")
	if out := do("dlq", "orders", "--limit", "3"); strings.Contains(out, "showing") {
		t.Errorf("dlq with every entry shown says %q", out)
	}
	want(do("dlq", "orders", "--redrive", "--partition", "Default"), "redriven 1 entry\n", "dlq --redrive")
	want(do("dlq", "orders", "--purge", "--force"), "purged 2 entries\n", "dlq --purge --force")

	// seek QUEUE GROUP, --to-start.
	do("pop", "orders", "--group", "audit", "--partition", "us", "--ack", "completed")
	want(do("seek", "orders", "audit", "--to-end", "--partition", "us"), "moved audit on orders: 1 partition\n", "seek --to-end")
	if out := do("pop", "orders", "--group", "audit", "--partition", "us", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("pop after --to-end: %s", out)
	}
	want(do("seek", "orders", "audit", "--to-start"), "moved audit on orders: 3 partitions\n", "seek --to-start")
	if out := do("pop", "orders", "--group", "audit", "--partition", "us", "--json"); !strings.Contains(out, `"payload": "four"`) {
		t.Fatalf("pop after --to-start: %s", out)
	}
	code, out, errs := cli(t, addr, "", "seek", "audit", "orders", "--to-start")
	if code != exitUsage || out != "" || !strings.Contains(errs, "QUEUE comes first") {
		t.Errorf("seek GROUP QUEUE: %d %q %q", code, out, errs)
	}
	if code, _, errs := cli(t, addr, "", "seek", "nosuchqueue", "audit", "--to-start"); code != exitFailure || !strings.Contains(errs, "queue_not_found") {
		t.Errorf("seek on no queue: %d %q", code, errs)
	}
	if code, _, errs := cli(t, addr, "", "seek", "orders", "audit", "--to-start", "--to-end"); code != exitUsage || !strings.Contains(errs, "exactly one") {
		t.Errorf("seek --to-start --to-end: %d %q", code, errs)
	}
	if code, out, _ := cli(t, addr, "", "queues"); code != exitOK || strings.Contains(out, "nosuchqueue") {
		t.Errorf("a seek on no queue left one: %s", out)
	}
}

// TestConfigureDurations: retention and the wait time are durations on the
// command line (kept in whole seconds, as Queen does), and `queue` prints
// every option with its unit, under configure's flag names.
func TestConfigureDurations(t *testing.T) {
	addr := testBroker(t)
	if code, out, errs := cli(t, addr, "", "configure", "keep", "--retention", "24h", "--max-wait-time", "90s", "--retry-delay", "2s"); code != exitOK {
		t.Fatalf("configure: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ := cli(t, addr, "", "queue", "keep")
	for _, want := range []string{"lease-time=5m0s", "retry-delay=2s", "retention=24h0m0s", "max-wait-time=1m30s"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Fatalf("queue keep: exit %d, no %q in\n%s", code, want, out)
		}
	}
	code, out, _ = cli(t, addr, "", "queue", "keep", "--json")
	var q struct {
		Options map[string]any `json:"options"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &q) != nil || q.Options["retentionSeconds"] != 86400.0 ||
		q.Options["retentionEnabled"] != true || q.Options["maxWaitTimeSeconds"] != 90.0 || q.Options["retryDelay"] != 2000.0 {
		t.Fatalf("queue keep --json: exit %d\n%s", code, out)
	}
	// --retention 0 turns age retention off; the wait time stays. Queen's
	// switch stays on (--completed-retention may use it) until both are 0.
	if code, out, errs := cli(t, addr, "", "configure", "keep", "--retention", "0"); code != exitOK {
		t.Fatalf("configure --retention 0: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = cli(t, addr, "", "queue", "keep", "--json")
	if code != exitOK || json.Unmarshal([]byte(out), &q) != nil || q.Options["retentionSeconds"] != 0.0 || q.Options["maxWaitTimeSeconds"] != 90.0 {
		t.Fatalf("after --retention 0: exit %d\n%s", code, out)
	}
	if code, out, _ = cli(t, addr, "", "queue", "keep"); code != exitOK || strings.Contains(out, "retention=") || !strings.Contains(out, "max-wait-time=1m30s") {
		t.Fatalf("queue keep after --retention 0: exit %d\n%s", code, out)
	}
	if code, out, errs := cli(t, addr, "", "configure", "keep", "--completed-retention", "1h"); code != exitOK {
		t.Fatalf("configure --completed-retention 1h: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = cli(t, addr, "", "queue", "keep", "--json")
	if code != exitOK || json.Unmarshal([]byte(out), &q) != nil || q.Options["retentionEnabled"] != true || q.Options["completedRetentionSeconds"] != 3600.0 ||
		q.Options["retentionSeconds"] != 0.0 {
		t.Fatalf("after --completed-retention 1h: exit %d\n%s", code, out)
	}
	if code, out, errs := cli(t, addr, "", "configure", "keep", "--retention", "0", "--completed-retention", "0"); code != exitOK {
		t.Fatalf("configure --retention 0 --completed-retention 0: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = cli(t, addr, "", "queue", "keep", "--json")
	if code != exitOK || json.Unmarshal([]byte(out), &q) != nil || q.Options["retentionEnabled"] != false || q.Options["maxWaitTimeSeconds"] != 90.0 {
		t.Fatalf("after both retentions at 0: exit %d\n%s", code, out)
	}
	for _, bad := range [][]string{{"--retention", "1500ms"}, {"--max-wait-time", "-1s"}, {"--completed-retention", "1x"}, {"--retention-seconds", "60"}} {
		if code, out, errs := cli(t, addr, "", append([]string{"configure", "keep"}, bad...)...); code != exitUsage {
			t.Errorf("configure keep %v: exit %d, want 2\n%s%s", bad, code, out, errs)
		}
	}
}
