// Package crash is Regent's crash harness: it runs `regent serve` as a child
// process, drives it with producers, consumers and transactions through the
// Go client while recording every answer, kills it with SIGKILL at random
// moments, restarts it on the same data directory, and at the end checks the
// promises of SEMANTICS.md "After a crash" against what it recorded.
//
// Run is the library entry point (the test in this package calls it, and a
// `regent bench crash` scenario can call it with its own binary); Build
// compiles a regent binary for tests.
//
// # Workload
//
//	| actor        | does                                                                        |
//	|--------------|-----------------------------------------------------------------------------|
//	| producer ×P  | pushes batches of 1–4 items (PushRate in all), each to a random partition of |
//	|              | queue "crash",                                                              |
//	|              | transactionId = payload key "P<producer>-<n>"; an unanswered push is sent   |
//	|              | again with the same items (the broker deduplicates) until it is answered    |
//	| consumer ×C  | group "g1": pops 1–10 messages, acks them in order in one request, each     |
//	|              | completed (80%), failed (8%), retry (6%) or dlq (6%); sometimes not at all  |
//	| txn worker ×T| group "g2": per message one transaction: ack completed + push a result to   |
//	|              | queue "crash-out" (transactionId "T-<key>")                                 |
//
// Queue "crash" has retryLimit 2, retryDelay 20ms and leaseTime 1s, so
// failed messages come back, run out of retries and are dead-lettered
// within a cycle.
//
// # Checks
//
//	| check        | violated when                                                                |
//	|--------------|------------------------------------------------------------------------------|
//	| lost         | a push answered queued (or duplicate) is not stored, or stored under         |
//	|              | another id or offset than the answer named                                   |
//	| duplicate    | a key is stored twice in a queue                                             |
//	| order        | a producer's items in one partition are stored out of its order, or the      |
//	|              | offsets of a partition are not 0, 1, 2, ...                                  |
//	| phantom      | a stored or delivered message (or DLQ entry) is not one that was pushed,     |
//	|              | or its payload differs; a push answered failed every time is stored          |
//	| redelivered  | a message is delivered to a group after an ack completing it (completed,     |
//	|              | or dlq/dead-lettering failed) was answered success in that group             |
//	| retries      | a delivery's retry count is below the failed acks answered success before    |
//	|              | it, or above the failed acks sent                                            |
//	| dlq          | a message dead-lettered by an ack answered success has no DLQ entry in that  |
//	|              | group, or has several; a DLQ entry no ack asked for                          |
//	| txn          | a transaction answered success whose push is not stored, or a push stored    |
//	|              | although every transaction carrying it was refused                           |
//	| start        | the broker does not come back after a kill                                   |
//
// Acks of one pop are sent in offset order in one request, so by the cursor
// rule an ack answered success always completes a run from the cursor: the
// message cannot legitimately come back. Requests and answers are ordered
// by a global sequence number taken when each request goes out and when
// each answer arrives: an ack answered before a pop answer arrived took
// effect before that pop; an ack sent after a pop answer arrived did not. (A
// pop answer can overtake the answer of an ack applied before it: the pop
// does not wait for the ack's fsync. A failed message may so come back, with
// its new retry count, before the failed ack is answered.)
//
// After the last kill the broker is restarted once more, every group's
// deliverable messages are popped again (to catch redeliveries caused by the
// last crash), every partition is read from offset 0 by a fresh group, and
// the dead-letter queue is listed.
package crash
