// Command regent is the Regent message broker: `regent serve` runs it, and
// the other subcommands talk to a running broker.
//
// The model: one binary, one subcommand per file, each registering the
// constructor of its cobra.Command in an init function; main.go builds the
// tree (github.com/spf13/cobra) afresh for every run, so flags keep no state
// between runs. The global flags (--addr, --token, --json, --timeout,
// --tls-ca) are the root's persistent flags: they go before or after the
// command. Every command has a one-line description, --help and a usage line
// with its arguments; cobra adds help and completion (bash, zsh, fish). A
// mistake in the arguments or flags is one short message and exit 2.
//
//   - serve (serve.go) is a thin main over package broker: it reads flags and
//     environment variables with the flag package (cobra hands it every
//     argument: DisableFlagParsing, as for bench) so that each setting
//     keeps its flag, variable and precedence in one table
//     (serve_settings.go, flags win), keys and TLS
//     (serve_auth.go), raises the descriptor limit and sizes both doors'
//     connection caps below it (fds.go), then broker.New, Main, and Exit on
//     SIGINT or SIGTERM or when a door dies.
//   - the operator commands (queues, queue, configure, dlq, groups, seek,
//     stats, push, pop, ack, tail, delete: op*.go) are clients of a running broker
//     over the binary protocol (package client), like any user; --json
//     prints what scripts read. ack answers leases by the ids pop printed:
//     queue info names each partition's live lease and the group's cursor
//     (not the lease's end), so it answers from the cursor on and the
//     broker's "not in this lease" marks the end. What destroys (delete
//     queue, delete group, dlq --purge) asks on a terminal and needs
//     --force without one (confirm in op.go).
//   - bench (bench*.go) runs the load-test harness (package bench), with the
//     broker as a child process, in this process (broker.New), or at an
//     address.
//
// Exit codes: 0 success, 1 failure (the broker's or the request's), 2 usage.
package main
