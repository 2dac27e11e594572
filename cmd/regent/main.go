package main

import (
	"fmt"
	"io"
	"os"
	"strings"
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

// command is a subcommand. Each file that defines one registers it in an
// init function, so commands live in files of their own.
type command struct {
	name, args, help string
	run              func(args []string, stdout, stderr io.Writer) int
}

var commands []command

func register(c command) { commands = append(commands, c) }

func init() {
	register(command{"serve", "[flags]", "run the broker", cmdServe})
	register(command{"version", "", "print the version and commit", func(_ []string, stdout, _ io.Writer) int {
		fmt.Fprintln(stdout, versionString())
		return exitOK
	}})
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "--help":
		usage(stdout)
		return exitOK
	case "--version", "-v":
		args[0] = "version"
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "regent: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, "Regent: a durable message broker with Queen MQ's semantics.\n\nUsage:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  regent %-28s %s\n", strings.TrimSpace(c.name+" "+c.args), c.help)
	}
	fmt.Fprint(w, "\nEach command takes --help.\n")
}
