package cluster

import (
	"errors"
	"slices"
	"testing"
)

func TestPlaceReplicas(t *testing.T) {
	members := []string{"a", "b", "c", "d"}
	sets, err := PlaceReplicas(8, 3, nil, members, members)
	if err != nil {
		t.Fatal(err)
	}
	load := map[string]int{}
	for s, set := range sets {
		if len(set) != 3 {
			t.Fatalf("shard %d: %v", s, set)
		}
		seen := map[string]bool{}
		for _, id := range set {
			if seen[id] {
				t.Fatalf("shard %d holds %s twice: %v", s, id, set)
			}
			seen[id] = true
			load[id]++
		}
	}
	for _, id := range members {
		if load[id] != 6 { // 8 shards × 3 replicas over 4 brokers
			t.Fatalf("replicas per broker %v, want 6 each", load)
		}
	}

	// A dead member keeps its replicas; a removed one's go to the live
	// member holding the fewest, at the end of the set.
	again, err := PlaceReplicas(8, 3, sets, members, []string{"a", "b", "c"})
	if err != nil || !equalSets(again, sets) {
		t.Fatalf("a dead member's replicas moved: %v, %v", again, err)
	}
	moved, err := PlaceReplicas(8, 3, sets, []string{"a", "b", "c", "e"}, []string{"a", "b", "c", "e"})
	if err != nil {
		t.Fatal(err)
	}
	for s := range sets {
		kept := slices.DeleteFunc(slices.Clone(sets[s]), func(id string) bool { return id == "d" })
		if !slices.Equal(moved[s][:len(kept)], kept) {
			t.Fatalf("shard %d: %v became %v: the kept replicas moved", s, sets[s], moved[s])
		}
		if len(kept) < 3 && moved[s][2] != "e" {
			t.Fatalf("shard %d: %v became %v, want d's place to go to e (the least loaded)", s, sets[s], moved[s])
		}
	}

	if _, err := PlaceReplicas(8, 3, nil, members, []string{"a", "b"}); !errors.Is(err, ErrTooFewMembers) {
		t.Fatalf("two live brokers for three replicas: %v", err)
	}
	for _, rf := range []int{0, 2, 4, 9} {
		if _, err := PlaceReplicas(8, rf, nil, members, members); err == nil {
			t.Fatalf("rf %d was taken", rf)
		}
	}
}

func equalSets(a, b [][]string) bool {
	return slices.EqualFunc(a, b, func(x, y []string) bool { return slices.Equal(x, y) })
}

// The Raft ids of node ids are part of the cluster's agreement: pinned,
// as TestShardVectors pins shards (a change would split a running cluster's
// groups).
func TestRaftIDVectors(t *testing.T) {
	for _, c := range []struct {
		node string
		id   uint64
	}{
		{"n1", 0xd19e50a0b3ce4315},
		{"n2", 0xccabdc50c226681b},
		{"broker-a", 0x83a5adabd31f2fc2},
	} {
		if got := RaftID(c.node); got != c.id {
			t.Errorf("RaftID(%q) = %#x, want %#x", c.node, got, c.id)
		}
	}
}
