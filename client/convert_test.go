package client

import (
	"reflect"
	"testing"
	"time"

	"github.com/regentmq/regent/protocol"
)

// TestPartitionFromWire: every field of the wire's partition description
// arrives in client terms; zero times stay zero Times, not 1970.
func TestPartitionFromWire(t *testing.T) {
	w := protocol.PartitionInfo{
		Name: "p", ID: protocol.UUID{1}, Low: 3, Next: 10, Oldest: 1e18, Newest: 2e18,
		Groups: []protocol.GroupCursor{
			{Group: "a", Cursor: 4, Lag: 6, Leased: true, LeaseID: protocol.UUID{2}, LeaseExpires: 3e18, Retrying: 2},
			{Group: "b", Cursor: 10, BlockedUntil: 4e18},
		},
		Lost: []protocol.OffsetRange{{First: 5, Last: 5}, {First: 7, Last: 8}},
	}
	want := PartitionInfo{
		Name: "p", ID: ID{1}, Low: 3, Next: 10, Oldest: time.Unix(0, 1e18), Newest: time.Unix(0, 2e18),
		Groups: []GroupCursor{
			{Group: "a", Cursor: 4, Lag: 6, Leased: true, LeaseID: ID{2}, LeaseExpires: time.Unix(0, 3e18), Retrying: 2},
			{Group: "b", Cursor: 10, BlockedUntil: time.Unix(0, 4e18)},
		},
		Lost: []OffsetRange{{First: 5, Last: 5}, {First: 7, Last: 8}},
	}
	if got := partitionFromWire(&w); !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	got := partitionFromWire(&protocol.PartitionInfo{Name: "empty"})
	if !got.Oldest.IsZero() || !got.Newest.IsZero() || got.Groups != nil || got.Lost != nil {
		t.Fatalf("an empty partition: %+v", got)
	}
}

// TestStatsFromWire: the counters arrive with fsync time as a Duration and
// the named extras by name.
func TestStatsFromWire(t *testing.T) {
	w := protocol.StatsReply{Queues: 1, Pushed: 2, Popped: 3, Acked: 4, DeadLettered: 5, CacheBytes: 6, Connections: 7,
		Fsyncs: 8, FsyncNanos: 9_000, BytesWritten: 10, Entries: 11, Extra: []protocol.Counter{{Name: "x", Value: -12}}}
	want := Stats{Queues: 1, Pushed: 2, Popped: 3, Acked: 4, DeadLettered: 5, CacheBytes: 6, Connections: 7,
		Fsyncs: 8, FsyncTime: 9 * time.Microsecond, BytesWritten: 10, Entries: 11, Extra: map[string]int64{"x": -12}}
	if got := statsFromWire(&w); !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if got := statsFromWire(&protocol.StatsReply{}); got.Extra != nil {
		t.Fatalf("no extras: %+v", got.Extra)
	}
}
