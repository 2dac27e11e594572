// Command tumbling is a stream processor on Regent: per-sensor sums over
// tumbling windows of 10 seconds of event time, with its state kept by the
// broker and each step committed all or nothing (Queen's streams, over the
// binary protocol).
//
// It pushes a few readings to the queue sensor-readings (one partition per
// sensor), registers the query tumbling-sum, and processes: for each batch
// of a partition it reads the partition's state shard (the open windows),
// adds the readings, and commits one cycle with the windows' new sums, the
// sums of the windows the event time has passed (to the queue
// sensor-sums), and the ack of the readings. A processor that dies between
// its read and its commit loses nothing and counts nothing twice: its
// cycle is refused once its lease ends, and the readings come back.
//
//	go run ./examples/tumbling            # against localhost:6633, or REGENT_ADDR
package main
