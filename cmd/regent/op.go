package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
	"github.com/spf13/cobra"
)

// opCmd is the frame of an operator command: it talks to a running broker
// over the binary protocol (--addr), prints for people by default and JSON
// with --json, and exits 0 (ok), 1 (failure) or 2 (usage).
type opCmd struct {
	name    string
	addr    *string
	json    *bool
	timeout *time.Duration
	token   *string
	tlsCA   *string
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
}

func defaultAddr() string {
	if v, ok := os.LookupEnv("REGENT_ADDR"); ok {
		return v
	}
	return "localhost:6633"
}

// newOp is an operator command's frame with the global flags' defaults.
func newOp(name string, stdout, stderr io.Writer) *opCmd {
	g := &globals{addr: defaultAddr(), timeout: 10 * time.Second, tlsCA: os.Getenv("REGENT_TLS_CA")}
	return &opCmd{name: name, addr: &g.addr, json: &g.json, timeout: &g.timeout, token: &g.token, tlsCA: &g.tlsCA,
		stdin: os.Stdin, stdout: stdout, stderr: stderr}
}

// opRun makes an operator command's Run: body runs with the global flags
// parsed and the positional arguments checked (the command's Args, posArgs),
// and its result is the exit code.
func (a *app) opRun(body func(o *opCmd, pos []string) int) func(*cobra.Command, []string) {
	return func(cmd *cobra.Command, pos []string) {
		o := &opCmd{name: cmd.Name(), addr: &a.g.addr, json: &a.g.json, timeout: &a.g.timeout, token: &a.g.token,
			tlsCA: &a.g.tlsCA, stdin: a.stdin, stdout: a.stdout, stderr: a.stderr}
		a.code = body(o, pos)
	}
}

// dial connects to the broker within the command's timeout.
func (o *opCmd) dial(ctx context.Context) (*client.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, *o.timeout)
	defer cancel()
	opts := []client.Option{client.WithConns(1), client.WithName("regent-cli")}
	tok := *o.token
	if tok == "" {
		tok = os.Getenv("REGENT_TOKEN")
	}
	if tok != "" {
		opts = append(opts, client.WithToken(tok))
	}
	if *o.tlsCA != "" {
		cfg, err := tlsConfigCA(*o.tlsCA)
		if err != nil {
			return nil, err
		}
		opts = append(opts, client.WithTLS(cfg))
	}
	return client.Dial(dctx, *o.addr, opts...)
}

// ctx bounds one request.
func (o *opCmd) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), *o.timeout)
}

// fail reports err on one line and returns the failure exit code.
func (o *opCmd) fail(err error) int {
	if protocol.CodeOf(err) == protocol.CodeUnauthenticated {
		err = fmt.Errorf("%w (give a token: --token or REGENT_TOKEN)", err)
	}
	fmt.Fprintf(o.stderr, "regent %s: %v\n", o.name, err)
	return exitFailure
}

// usageErr reports a usage mistake.
func (o *opCmd) usageErr(format string, a ...any) int {
	fmt.Fprintf(o.stderr, "regent %s: %s\n", o.name, fmt.Sprintf(format, a...))
	return exitUsage
}

// emit prints v as indented JSON.
func (o *opCmd) emit(v any) int {
	enc := json.NewEncoder(o.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return o.fail(err)
	}
	return exitOK
}

// isTerminal reports whether f (stdout, or stdin) is a terminal: live,
// redrawn output; a question that a person answers.
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	if !ok {
		return false
	}
	st, err := file.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func ts(t time.Time) string {
	if t.IsZero() || t.UnixNano() == 0 {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// emitLine prints v as one line of JSON (streams: one object per line).
func (o *opCmd) emitLine(v any) {
	b, err := json.Marshal(v)
	if err == nil {
		fmt.Fprintf(o.stdout, "%s\n", b)
	}
}

// confirm asks on the terminal before something is destroyed: prompt (on
// stderr), then a line on stdin that must be want, or y or yes when want is
// empty. force skips it. Without a terminal (and without force) it is a
// usage mistake: a script says --force. It returns exitOK to go on, or the
// exit code to end with (1: the answer was no).
func (o *opCmd) confirm(force bool, prompt, want string) int {
	if force {
		return exitOK
	}
	if !isTerminal(o.stdin) {
		return o.usageErr("stdin is not a terminal to confirm on: give --force to go ahead without asking")
	}
	fmt.Fprint(o.stderr, prompt)
	line, err := bufio.NewReader(o.stdin).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(o.stderr)
		return o.usageErr("no answer on stdin: give --force to go ahead without asking")
	}
	line = strings.TrimSpace(line)
	ok := line == want
	if want == "" {
		ok = strings.EqualFold(line, "y") || strings.EqualFold(line, "yes")
	}
	if !ok {
		fmt.Fprintf(o.stderr, "regent %s: not confirmed: nothing done\n", o.name)
		return exitFailure
	}
	return exitOK
}
