// Package netserver holds Regent's transports: the binary protocol served on
// gnet event loops and the HTTP bridge that speaks Queen MQ's HTTP API v1.
// Both call the same engine operations and map the engine's errors to wire
// codes and HTTP statuses through one table (errors.go).
//
// Every list either door answers is a page with a default and a maximum
// size, and says whether more follow (http_pages.go; over the binary
// protocol QueueInfo and QueueList since 1.2, and DLQList by its total):
// an answer costs memory for its page, never for a whole queue, and over
// TCP it fits the frame its client reads.
package netserver
