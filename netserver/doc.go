// Package netserver holds Regent's transports: the binary protocol served on
// gnet event loops and the HTTP bridge that speaks Queen MQ's HTTP API v1.
// Both call the same engine operations and map the engine's errors to wire
// codes and HTTP statuses through one table (errors.go).
package netserver
