package cluster

import (
	"errors"
	"slices"
	"testing"
)

func countOwned(owners []string) map[string]int {
	n := map[string]int{}
	for _, o := range owners {
		n[o]++
	}
	return n
}

// TestPlaceNewClusterIsBalanced: a new cluster's shards go round the live
// members, lowest id first.
func TestPlaceNewClusterIsBalanced(t *testing.T) {
	members := []string{"c", "a", "b"}
	owners, err := Place(64, nil, members, members)
	if err != nil {
		t.Fatal(err)
	}
	n := countOwned(owners)
	if n["a"] != 22 || n["b"] != 21 || n["c"] != 21 || owners[0] != "a" || owners[1] != "b" || owners[2] != "c" {
		t.Fatalf("owners %v (%v)", owners, n)
	}
}

// TestPlaceKeepsOwnersThatAreMembers: a dead member keeps its shards (its
// disk holds them); a new member gets only unowned shards; a member removed
// for good gives its shards to the live members with the fewest.
func TestPlaceKeepsOwnersThatAreMembers(t *testing.T) {
	members := []string{"a", "b", "c"}
	prev, _ := Place(12, nil, members, members)

	// c died: nothing moves.
	owners, err := Place(12, prev, members, []string{"a", "b"})
	if err != nil || !slices.Equal(owners, prev) {
		t.Fatalf("after c died: %v, %v; want %v", owners, err, prev)
	}
	// d joined: nothing moves either (no shard is unowned).
	members = append(members, "d")
	if owners, _ = Place(12, prev, members, members); !slices.Equal(owners, prev) {
		t.Fatalf("after d joined: %v; want %v", owners, prev)
	}
	// c was removed: its 4 shards go to the live member owning the fewest,
	// d (none), until it owns as many as the others.
	members = []string{"a", "b", "d"}
	owners, err = Place(12, prev, members, members)
	if err != nil {
		t.Fatal(err)
	}
	for s := range owners {
		if prev[s] != "c" && owners[s] != prev[s] {
			t.Fatalf("shard %d moved from %s to %s", s, prev[s], owners[s])
		}
	}
	if n := countOwned(owners); n["a"] != 4 || n["b"] != 4 || n["d"] != 4 || n["c"] != 0 {
		t.Fatalf("after c was removed: %v", n)
	}
}

// TestPlaceRefusals: no live member to own an orphan, a wrong shard count.
func TestPlaceRefusals(t *testing.T) {
	if _, err := Place(8, nil, []string{"a"}, nil); !errors.Is(err, ErrNoMembers) {
		t.Fatalf("no live member: %v", err)
	}
	if _, err := Place(8, nil, []string{"a"}, []string{"x"}); !errors.Is(err, ErrNoMembers) {
		t.Fatalf("live but not a member: %v", err)
	}
	if _, err := Place(8, make([]string, 4), []string{"a"}, []string{"a"}); err == nil {
		t.Fatal("4 previous owners for 8 shards taken")
	}
	if _, err := Place(0, nil, []string{"a"}, []string{"a"}); err == nil {
		t.Fatal("0 shards taken")
	}
	if _, err := Place(4, nil, []string{"a", ""}, []string{"a", ""}); err == nil {
		t.Fatal("a member with no id taken")
	}
	// Every shard owned by a member: no live member needed.
	if owners, err := Place(2, []string{"a", "a"}, []string{"a"}, nil); err != nil || !slices.Equal(owners, []string{"a", "a"}) {
		t.Fatalf("all owned, none live: %v %v", owners, err)
	}
}

// TestMapRoutes: a checked map sends a partition to its shard's owner.
func TestMapRoutes(t *testing.T) {
	brokers := []Broker{{ID: "a", TCP: "10.0.0.1:6633"}, {ID: "b", TCP: "10.0.0.2:6633"}}
	owners, _ := Place(DefaultShards, nil, []string{"a", "b"}, []string{"a", "b"})
	m := &Map{Epoch: 7, Seed: 99, Shards: DefaultShards, Owners: owners, Brokers: brokers}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"p0", "p1", "customer-42"} {
		s := m.ShardOf("orders", p)
		if s != Shard(99, "orders", p, DefaultShards) {
			t.Fatalf("ShardOf(orders, %s) = %d", p, s)
		}
		if b := m.Owner("orders", p); b == nil || b.ID != owners[s] {
			t.Fatalf("Owner(orders, %s) = %v, want %s", p, b, owners[s])
		}
	}
	if m.Broker("zz") != nil {
		t.Fatal("an unlisted broker found")
	}
	m.Owners[3] = ""
	if err := m.Check(); err != nil {
		t.Fatalf("an unowned shard: %v", err)
	}
	for _, bad := range []Map{
		{Shards: 2, Owners: []string{"a"}, Brokers: brokers},
		{Shards: 2, Owners: []string{"a", "z"}, Brokers: brokers},
		{Shards: 1, Owners: []string{"a"}, Brokers: []Broker{{ID: "b"}, {ID: "a"}}},
		{Shards: 1, Owners: []string{"a"}, Brokers: []Broker{{ID: "a"}, {ID: "a"}}},
		{Shards: 1, Owners: []string{""}, Brokers: []Broker{{ID: ""}}},
		{Shards: 0},
	} {
		if err := bad.Check(); err == nil {
			t.Errorf("map %+v passed", bad)
		}
	}
}
