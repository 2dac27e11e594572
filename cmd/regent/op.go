package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/regentmq/regent/client"
	"github.com/regentmq/regent/protocol"
)

// opCmd is the frame of an operator command: it talks to a running broker
// over the binary protocol (--addr), prints for people by default and JSON
// with --json, and exits 0 (ok), 1 (failure) or 2 (usage).
type opCmd struct {
	name    string
	usage   string
	fs      *flag.FlagSet
	addr    *string
	json    *bool
	timeout *time.Duration
	token   *string
	tlsCA   *string
	stdout  io.Writer
	stderr  io.Writer
}

func defaultAddr() string {
	if v, ok := os.LookupEnv("REGENT_ADDR"); ok {
		return v
	}
	return "localhost:6633"
}

func newOp(name, usage string, stdout, stderr io.Writer) *opCmd {
	o := &opCmd{name: name, usage: usage, fs: flag.NewFlagSet("regent "+name, flag.ContinueOnError), stdout: stdout, stderr: stderr}
	o.fs.SetOutput(stderr)
	o.addr = o.fs.String("addr", defaultAddr(), "the broker's binary protocol address (env REGENT_ADDR)")
	o.json = o.fs.Bool("json", false, "print JSON for scripts")
	o.timeout = o.fs.Duration("timeout", 10*time.Second, "how long to wait for the broker")
	o.token = o.fs.String("token", "", "the token (a JWT) of a broker with auth on (env REGENT_TOKEN)")
	o.tlsCA = o.fs.String("tls-ca", os.Getenv("REGENT_TLS_CA"), "speak TLS to --addr (a TLS terminator in front of the broker), trusting the CA certificates of this PEM `FILE`; \"system\": the system's (env REGENT_TLS_CA)")
	o.fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: regent %s %s\n\n", name, usage)
		o.fs.PrintDefaults()
	}
	return o
}

// parse reads flags and positional arguments in any order; it wants between
// min and max positional arguments (max < 0: any number). ok false means
// exit with code.
func (o *opCmd) parse(args []string, min, max int) (pos []string, code int, ok bool) {
	for {
		if err := o.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, exitOK, false
			}
			return nil, exitUsage, false
		}
		args = o.fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) < min || (max >= 0 && len(pos) > max) {
		fmt.Fprintf(o.stderr, "regent %s: wrong number of arguments\n", o.name)
		o.fs.Usage()
		return nil, exitUsage, false
	}
	return pos, exitOK, true
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

// isTerminal reports whether w is a terminal (live, redrawn output).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
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
