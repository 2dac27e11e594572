// Package regent is the root of Regent's module: a message broker with
// Queen MQ's semantics (partitioned queues, consumer groups, leases,
// four-way acks, retries, a dead-letter queue) on a segmented write-ahead
// log, with a binary protocol, Queen's HTTP API, a Go client and a
// cluster mode on etcd. The packages are in the README's table; this one
// holds no code, only deps_test.go, which keeps the import rules of that
// table (DESIGN.md's "The house") true.
package regent
