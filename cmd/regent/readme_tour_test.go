package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/broker/brokertest"
	"github.com/regentmq/regent/engine"
)

// tourLines returns the commands of the README's "A five-minute tour"
// block, as written: one shell line each, comment lines left out.
func tourLines(t *testing.T) []string { return readmeBlock(t, "## A five-minute tour") }

// readmeBlock returns the commands of the first sh block after heading.
func readmeBlock(t *testing.T, heading string) []string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, tour, ok := strings.Cut(string(readme), heading)
	if !ok {
		t.Fatalf("README has no %q", heading)
	}
	_, block, ok := strings.Cut(tour, "```sh\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("the tour has no sh block")
	}
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestREADMETourRuns runs the README's tour top to bottom as a reader
// pastes it into a shell beside a running broker, then the Streams
// section's example (the broker's addresses
// are the only change: REGENT_ADDR, and the HTTP port in the curl line).
// Every line must exit 0 with nothing to fill in by hand; tail, which
// follows until Ctrl-C, gets a SIGINT once it has printed the messages it
// shows first.
func TestREADMETourRuns(t *testing.T) {
	_, bin := buildRegent(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the tour uses curl, which is not installed (.ci/run installs it)")
	}
	b := brokertest.Start(t, broker.Options{Engine: engine.Config{SnapshotEveryBytes: -1}})
	dir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(dir, "regent")); err != nil {
		t.Fatal(err)
	}
	lines := tourLines(t)
	if len(lines) < 10 {
		t.Fatalf("the tour has %d commands", len(lines))
	}
	outputs := map[string]string{} // each line's first word after ./regent, to its output
	for _, line := range lines {
		if strings.HasPrefix(line, "go build") {
			continue // the binary is built already (buildRegent)
		}
		if strings.Contains(line, "<") && strings.Contains(line, ">") {
			t.Fatalf("a placeholder to fill in by hand: %s", line)
		}
		line = strings.ReplaceAll(line, "localhost:6632", b.HTTPAddr().String())
		tail := strings.HasPrefix(line, "./regent tail")
		script := line
		if tail {
			script = "exec " + line // the shell becomes tail, which gets the Ctrl-C
		}
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "REGENT_ADDR="+b.TCPAddr().String(), "REGENT_TOKEN=")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		if tail {
			// tail follows: it is stopped as a reader would, once it has
			// shown what it shows first.
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(out.String(), "orders/") && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("%s: still running after 30 s", line)
		}
		if err != nil {
			t.Fatalf("%s: %v\nstdout: %s\nstderr: %s", line, err, out.String(), errb.String())
		}
		t.Logf("$ %s\n%s%s", line, out.String(), errb.String())
		if f := strings.Fields(line); len(f) > 1 && f[0] == "./regent" {
			outputs[f[1]] += out.String()
		}
		if strings.HasPrefix(line, "curl") {
			outputs["curl"] += out.String()
		}
	}
	// The Streams section's example, from the repository's root, against
	// the same broker.
	for _, line := range readmeBlock(t, "## Streams") {
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "REGENT_ADDR="+b.TCPAddr().String())
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "sensor-a  window  0s-10s  sum   6  (3 readings)") {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		t.Logf("$ %s\n%s", line, out)
	}
	// What the tour's comments promise.
	for cmd, want := range map[string]string{
		"push":  "duplicate",
		"ack":   "completed",
		"dlq":   "bad order",
		"curl":  `"messages"`,
		"tail":  "orders/",
		"peek":  `{"order":1,"total":99.5}`,
		"queue": "billing",
	} {
		if !strings.Contains(outputs[cmd], want) {
			t.Errorf("the tour's %s printed no %q:\n%s", cmd, want, outputs[cmd])
		}
	}
}
