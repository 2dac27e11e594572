package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// app is one run of the command line: its input and output, the global
// flags, and the exit code the command chose.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	g              globals
	code           int
}

// globals are the persistent flags of the operator commands: given before
// or after the command (`regent --addr H:P push q x`, `regent push q x
// --addr H:P`).
type globals struct {
	addr, token, tlsCA string
	json               bool
	timeout            time.Duration
}

// commands make the subcommands. Each file that defines one registers it in
// an init function, so commands live in files of their own; the tree is
// built afresh for every run (flags hold no state between runs).
var commands []func(*app) *cobra.Command

func register(f func(*app) *cobra.Command) { commands = append(commands, f) }

func run(args []string, stdout, stderr io.Writer) int {
	return runIO(args, os.Stdin, stdout, stderr)
}

// runIO runs the command line args and returns the exit code: 0 success, 1
// failure, 2 usage (an unknown command or flag, a missing, empty or extra
// argument: a short message, not the whole usage).
func runIO(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRoot(a)
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-v") {
		args = append([]string{"version"}, args[1:]...)
	}
	args, err := leadingArgs(root, longFlags(root, args))
	if err != nil {
		fmt.Fprintf(stderr, "regent: %v\nRun 'regent --help' for the commands.\n", err)
		return exitUsage
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err != nil {
		if cmd == nil || cmd == root {
			fmt.Fprintf(stderr, "regent: %v\nRun 'regent --help' for the commands.\n", err)
		} else {
			fmt.Fprintf(stderr, "%s: %v\nUsage: %s (%s --help for more)\n", cmd.CommandPath(), err, cmd.UseLine(), cmd.CommandPath())
		}
		return exitUsage
	}
	return a.code
}

func newRoot(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "regent",
		Short: "Regent: a durable message broker with Queen MQ's semantics",
		Long: `Regent: a durable message broker with Queen MQ's semantics.

"regent serve" runs the broker; the other commands talk to a running broker
over its binary protocol (--addr, default localhost:6633 or REGENT_ADDR).
Exit codes: 0 success, 1 failure, 2 a usage mistake.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Without a command: the help, on stderr, and the usage exit code.
		Run: func(cmd *cobra.Command, _ []string) {
			cmd.SetOut(a.stderr)
			cmd.Help()
			a.code = exitUsage
		},
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&a.g.addr, "addr", defaultAddr(), "the broker's binary protocol address (env REGENT_ADDR)")
	pf.StringVar(&a.g.token, "token", "", "the token (a JWT) of a broker with auth on (env REGENT_TOKEN)")
	pf.BoolVar(&a.g.json, "json", false, "print JSON for scripts")
	pf.DurationVar(&a.g.timeout, "timeout", 10*time.Second, "how long to wait for the broker")
	pf.StringVar(&a.g.tlsCA, "tls-ca", os.Getenv("REGENT_TLS_CA"), "speak TLS to --addr (a TLS terminator in front of the broker), trusting the CA certificates of this PEM `FILE`; \"system\": the system's (env REGENT_TLS_CA)")
	for _, f := range commands {
		root.AddCommand(f(a))
	}
	return root
}

// longFlags lets a long flag keep Go's single-dash spelling (-json,
// -addr=H:P), which the flag package accepted before the command line
// moved to cobra: a single-dash argument naming a flag of some command gets
// its second dash. Arguments after "--" are left alone.
func longFlags(root *cobra.Command, args []string) []string {
	names := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	out := make([]string, len(args))
	copy(out, args)
	for i, s := range out {
		if s == "--" {
			break
		}
		if len(s) > 2 && s[0] == '-' && s[1] != '-' {
			name, _, _ := strings.Cut(s[1:], "=")
			if len(name) > 1 && names[name] {
				out[i] = "-" + s
			}
		}
	}
	return out
}

// leadingArgs reads the arguments before the command: flags, global ones
// or a command's own, which may come first ("regent --json queues"). Cobra
// would take a flag it does not know there to hold the next argument as
// its value, so that "regent --bogus bench push" ran push and blamed it
// for --bogus; here the command is the first argument that names one (an
// unknown flag's value is an argument that names none: "--sync always
// serve"). A command that parses its own flags (serve, bench) gets the
// flags before it moved after its leading arguments (bench's SCENARIO),
// where its flag set reads them: "regent --json bench push" is "regent
// bench push --json". For any other command, a flag that no command has is
// a usage mistake, named.
func leadingArgs(root *cobra.Command, args []string) ([]string, error) {
	long, short := map[string]*pflag.Flag{}, map[string]*pflag.Flag{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				long[f.Name] = f
				if f.Shorthand != "" {
					short[f.Shorthand] = f
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	command := func(arg string) *cobra.Command {
		for _, c := range root.Commands() {
			if c.Name() == arg || c.HasAlias(arg) {
				return c
			}
		}
		return nil
	}
	var unknown []string
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" || a == "-" || !strings.HasPrefix(a, "-") {
			break // the command (or the end of the flags)
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		var f *pflag.Flag
		switch {
		case strings.HasPrefix(a, "--"):
			f = long[name]
		case len(name) == 1:
			f = short[name]
		}
		switch {
		case f == nil && (name == "help" || name == "h"):
			return args, nil
		case f == nil:
			unknown = append(unknown, strings.SplitN(a, "=", 2)[0])
			if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") && command(args[i+1]) == nil {
				i++ // its value, as far as can be told
			}
		case !hasValue && f.NoOptDefVal == "":
			i++ // its value is the next argument
		}
	}
	if i >= len(args) || args[i] == "--" || command(args[i]) == nil {
		if len(unknown) > 0 {
			return nil, fmt.Errorf("unknown flag %s", unknown[0])
		}
		return args, nil // no command named: cobra says what is wrong
	}
	cmd := command(args[i])
	if !cmd.DisableFlagParsing {
		if len(unknown) > 0 {
			return nil, fmt.Errorf("unknown flag %s", unknown[0])
		}
		return args, nil
	}
	if i == 0 {
		return args, nil
	}
	rest := args[i+1:]
	k := 0
	if lead := leadArgs[cmd.Name()]; lead != nil {
		k = min(lead(rest), len(rest))
	}
	out := append([]string{args[i]}, rest[:k]...)
	out = append(out, args[:i]...)
	return append(out, rest[k:]...), nil
}

// leadArgs says, for a command that parses its own flags, how many of its
// arguments come before them (bench: SCENARIO, or compare SCENARIO).
var leadArgs = map[string]func(args []string) int{}

// posArgs wants between min and max positional arguments (max < 0: any
// number); the first len(names) of them, when given, must not be empty
// (names says what they are: QUEUE, GROUP).
func posArgs(min, max int, names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min || (max >= 0 && len(args) > max) {
			want := strings.TrimSpace(strings.TrimPrefix(cmd.Use, cmd.Name()))
			if want == "" {
				want = "none"
			}
			return fmt.Errorf("wrong number of arguments (%d; want %s)", len(args), want)
		}
		for i, n := range names {
			if i < len(args) && strings.TrimSpace(args[i]) == "" {
				return fmt.Errorf("%s is empty", n)
			}
		}
		return nil
	}
}

// passThrough makes a command that parses its own flags (serve, bench: the
// flag package, with their environment variables), so cobra hands it every
// argument and its --help is the command's own.
func (a *app) passThrough(use, short string, body func(args []string, stdout, stderr io.Writer) int) *cobra.Command {
	c := &cobra.Command{
		Use:                use,
		Short:              short,
		DisableFlagParsing: true,
		Run:                func(_ *cobra.Command, args []string) { a.code = body(args, a.stdout, a.stderr) },
	}
	c.SetHelpFunc(func(*cobra.Command, []string) { body([]string{"--help"}, a.stdout, a.stdout) })
	return c
}

func init() {
	register(func(a *app) *cobra.Command {
		return a.passThrough("serve [flags]", "run the broker (its flags and environment: regent serve --help)", cmdServe)
	})
	register(versionCmd)
}
