package cluster

import (
	"errors"
	"fmt"
	"slices"
)

// Replicated shards (stage 2): each shard has RF replicas on distinct
// brokers, one Raft group. Which replica leads is Raft's business, not the
// map's: the map only says where the replicas are.

// MaxReplicas bounds a shard's replication factor (1, 3 or 5 in practice:
// Raft wants an odd group).
const MaxReplicas = 7

// CheckReplicas says whether rf is a replication factor a cluster can
// use: odd (an even group tolerates no more failures than the odd one
// below it, and ties elections), from 1 to MaxReplicas.
func CheckReplicas(rf int) error {
	if rf < 1 || rf > MaxReplicas || rf%2 == 0 {
		return fmt.Errorf("cluster: %d replicas per shard; want an odd number from 1 to %d", rf, MaxReplicas)
	}
	return nil
}

// ErrTooFewMembers is PlaceReplicas' answer when the live members cannot
// hold rf distinct replicas of a shard that needs one.
var ErrTooFewMembers = errors.New("cluster: fewer live brokers than replicas per shard")

// PlaceReplicas computes the replica sets of a new map: every shard keeps
// the replicas in prev that are still members (alive or not: a replica's
// data is on its broker's disk), and a shard short of rf replicas gets the
// live members holding the fewest replicas, the lowest id first among
// equals, never one it already has. The order of a set is kept (the first
// is the group's preferred leader) and new replicas go at its end; an
// empty set's first is the member first in the fewest sets, so that
// preferred leaders spread. members and live are as for Place; prev may be
// nil and must otherwise hold one set per shard.
func PlaceReplicas(shards, rf int, prev [][]string, members, live []string) ([][]string, error) {
	if err := CheckShards(shards); err != nil {
		return nil, err
	}
	if err := CheckReplicas(rf); err != nil {
		return nil, err
	}
	if prev != nil && len(prev) != shards {
		return nil, fmt.Errorf("cluster: %d previous replica sets for %d shards", len(prev), shards)
	}
	isMember, cands, load, err := candidates(members, live)
	if err != nil {
		return nil, err
	}
	sets := make([][]string, shards)
	for s := range sets {
		if prev == nil {
			continue
		}
		for _, id := range prev[s] {
			if isMember[id] && !slices.Contains(sets[s], id) && len(sets[s]) < rf {
				sets[s] = append(sets[s], id)
				if _, ok := load[id]; ok {
					load[id]++
				}
			}
		}
	}
	leads := make(map[string]int, len(cands)) // sets each broker is first in
	for s := range sets {
		if len(sets[s]) > 0 {
			leads[sets[s][0]]++
		}
	}
	for s := range sets {
		for len(sets[s]) < rf {
			first := len(sets[s]) == 0
			best := ""
			for _, id := range cands {
				if slices.Contains(sets[s], id) {
					continue
				}
				if best == "" || (first && leads[id] < leads[best]) ||
					((!first || leads[id] == leads[best]) && load[id] < load[best]) {
					best = id
				}
			}
			if first && best != "" {
				leads[best]++
			}
			if best == "" {
				return nil, fmt.Errorf("%w: shard %d has %d of %d replicas and %d live brokers", ErrTooFewMembers, s, len(sets[s]), rf, len(cands))
			}
			sets[s] = append(sets[s], best)
			load[best]++
		}
	}
	return sets, nil
}

// RaftID is the id a broker has in every Raft group: a 64-bit hash of its
// node id (never 0, which Raft reserves for "none"). Every broker computes
// the same id for a node without asking; TestRaftIDVectors pins it.
func RaftID(node string) uint64 {
	id := Hash64(0x72616674, node, "") // "raft"
	if id == 0 {
		id = 1
	}
	return id
}
