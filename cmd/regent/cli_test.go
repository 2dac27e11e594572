package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// runBin runs the built regent binary with args and returns its exit code,
// stdout and stderr.
func runBin(t *testing.T, bin, stdin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("regent %v: %v", args, err)
	}
	return code, out.String(), errb.String()
}

// TestCommandLine drives the built binary: global flags before or after
// the command, --help and a one-line description for every command,
// completion, version --json, and exit code 2 with a short message for
// each kind of usage mistake.
func TestCommandLine(t *testing.T) {
	_, bin := buildRegent(t)
	addr := testBroker(t)

	// Global flags before and after the command, in both spellings.
	for _, args := range [][]string{
		{"--addr", addr, "push", "q", "before"},
		{"push", "q", "after", "--addr", addr},
		{"--addr=" + addr, "--json", "push", "q", "mixed"},
		{"push", "--timeout", "5s", "q", "-addr", addr, "single-dash"},
	} {
		if code, out, errs := runBin(t, bin, "", args...); code != exitOK || !(strings.HasPrefix(out, "queued") || strings.Contains(out, `"status": "queued"`)) {
			t.Errorf("%v: exit %d, %q %q", args, code, out, errs)
		}
	}
	if code, out, _ := runBin(t, bin, "", "--json", "queue", "q", "--addr", addr); code != exitOK || !strings.Contains(out, `"messages": 4`) {
		t.Errorf("queue after the pushes: %d %s", code, out)
	}

	// Every command is listed with a description, and takes --help (exit 0,
	// on stdout) with a usage line naming its arguments.
	code, out, _ := runBin(t, bin, "", "--help")
	if code != exitOK {
		t.Fatalf("--help: %d", code)
	}
	uses := map[string]string{"serve": "", "bench": "", "version": "", "queues": "", "queue": "QUEUE", "configure": "QUEUE",
		"dlq": "QUEUE", "groups": "", "seek": "QUEUE GROUP", "stats": "", "push": "QUEUE [PAYLOAD | -]", "pop": "[QUEUE", "tail": "QUEUE", "completion": "",
		"ack": "QUEUE LEASE|TXN...", "delete": "queue|group NAME"}
	for name, use := range uses {
		if !strings.Contains(out, "\n  "+name+" ") {
			t.Errorf("regent --help does not list %s:\n%s", name, out)
		}
		code, h, errs := runBin(t, bin, "", name, "--help")
		if name == "serve" || name == "bench" {
			h += errs // their own flag sets print usage on stderr
		}
		if code != exitOK || !strings.Contains(h, "regent "+name) || !strings.Contains(h, "regent "+name+" "+use) {
			t.Errorf("%s --help: exit %d\n%s", name, code, h)
		}
	}

	// Completion for the three shells.
	for _, sh := range []string{"bash", "zsh", "fish"} {
		if code, out, _ := runBin(t, bin, "", "completion", sh); code != exitOK || !strings.Contains(out, "regent") || len(out) < 1000 {
			t.Errorf("completion %s: exit %d, %d bytes", sh, code, len(out))
		}
	}

	// version, --json and --help.
	if code, out, _ := runBin(t, bin, "", "version"); code != exitOK || !strings.HasPrefix(out, "regent ") {
		t.Errorf("version: %d %q", code, out)
	}
	var v struct{ Version, Go string }
	if code, out, _ := runBin(t, bin, "", "version", "--json"); code != exitOK || json.Unmarshal([]byte(out), &v) != nil || v.Version == "" || v.Go == "" {
		t.Errorf("version --json: %d %q", code, out)
	}
	if code, out, _ := runBin(t, bin, "", "version", "--help"); code != exitOK || !strings.Contains(out, "Usage:") {
		t.Errorf("version --help: %d %q", code, out)
	}

	// Usage mistakes: exit 2, a short message on stderr (not the whole usage).
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "Usage:"},
		{[]string{"nosuchcommand"}, `unknown command "nosuchcommand"`},
		{[]string{"push", "q", "x", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"push"}, "wrong number of arguments"},
		{[]string{"push", "", "x"}, "QUEUE is empty"},
		{[]string{"push", "q", "x", "y"}, "wrong number of arguments"},
		{[]string{"queue", "q", "extra"}, "wrong number of arguments"},
		{[]string{"queues", "extra"}, "wrong number of arguments"},
		{[]string{"version", "extra"}, "wrong number of arguments"},
		{[]string{"tail", " "}, "QUEUE is empty"},
		{[]string{"queues", "--timeout", "soon"}, "invalid argument"},
		{[]string{"serve", "extra-arg"}, `unexpected argument "extra-arg"`},
		{[]string{"serve", "--bogus"}, "flag provided but not defined"},
		{[]string{"bench", "push", "--bogus"}, "flag provided but not defined"},
		// Before the command: the mistake is named, not blamed on a word
		// taken for its value (cobra made "--bogus bench push" a push).
		{[]string{"--bogus", "bench", "push"}, "regent bench"},
		{[]string{"--bogus", "push", "q", "x"}, "regent: unknown flag --bogus"},
		{[]string{"--bogus=1", "queues"}, "regent: unknown flag --bogus"},
		{[]string{"-x", "queues"}, "regent: unknown flag -x"},
	} {
		code, out, errs := runBin(t, bin, "", append(c.args, "--addr", addr)...)
		if c.args == nil {
			code, out, errs = runBin(t, bin, "")
		}
		if code != exitUsage || !strings.Contains(errs, c.want) || out != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.args, code, out, errs, c.want)
		}
		if c.args != nil && strings.Count(errs, "\n") > 2 {
			t.Errorf("%q: the whole usage for a mistake:\n%s", c.args, errs)
		}
	}
	// serve's and bench's own flags may come before the command too.
	if code, _, errs := runBin(t, bin, "", "--sync=sometimes", "serve"); code != exitUsage || !strings.Contains(errs, "--sync") {
		t.Errorf("--sync=sometimes serve: %d %q", code, errs)
	}
	if code, _, errs := runBin(t, bin, "", "--batch", "x", "bench", "push"); code != exitUsage || !strings.Contains(errs, "--batch") {
		t.Errorf("--batch x bench push: %d %q", code, errs)
	}
	// A command's own flag before it is that command's.
	if code, out, errs := runBin(t, bin, "", "--partition", "eu", "--addr", addr, "push", "early", "x"); code != exitOK || !strings.Contains(out, "partition eu, offset 0") {
		t.Errorf("--partition eu push early x: %d %q %q", code, out, errs)
	}
	// A failure: exit 1.
	if code, _, errs := runBin(t, bin, "", "queue", "nosuchqueue", "--addr", addr); code != exitFailure || !strings.Contains(errs, "queue_not_found") {
		t.Errorf("queue nosuchqueue: %d %q", code, errs)
	}
}
