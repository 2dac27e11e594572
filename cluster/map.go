package cluster

import (
	"errors"
	"fmt"
	"slices"
)

// Broker is one member of the cluster as clients and other brokers reach
// it.
type Broker struct {
	ID   string `json:"id"`   // the node id given at its start (--node)
	TCP  string `json:"tcp"`  // its binary protocol address
	HTTP string `json:"http"` // its HTTP address
}

// Map is one version of the placement of shards on brokers.
type Map struct {
	// Epoch orders versions: the etcd revision the map was written at (0:
	// never written).
	Epoch int64 `json:"epoch"`
	// Seed and Shards are the cluster's, fixed at its creation.
	Seed   uint64 `json:"seed"`
	Shards int    `json:"shards"`
	// Owners holds, for each shard, its owner's node id ("" while no broker
	// has been given it).
	Owners []string `json:"owners"`
	// Replicas holds, in a replicated cluster (stage 2), each shard's
	// replica set: the brokers that hold it, its Raft group's voters. The
	// owner is then the set's first, its preferred leader; which replica
	// leads is Raft's (the brokers' Metadata answers say). nil: the
	// shards are not replicated.
	Replicas [][]string `json:"replicas,omitempty"`
	// Brokers are the members the owners name, sorted by id.
	Brokers []Broker `json:"brokers"`
}

// Check says whether m is a map a broker may act on: Shards owners, each
// one a listed broker or none, and no broker listed twice.
func (m *Map) Check() error {
	if err := CheckShards(m.Shards); err != nil {
		return err
	}
	if len(m.Owners) != m.Shards {
		return fmt.Errorf("cluster: map of epoch %d: %d owners for %d shards", m.Epoch, len(m.Owners), m.Shards)
	}
	for i := range m.Brokers {
		if m.Brokers[i].ID == "" {
			return fmt.Errorf("cluster: map of epoch %d: a broker with no id", m.Epoch)
		}
		if i > 0 && m.Brokers[i-1].ID >= m.Brokers[i].ID {
			return fmt.Errorf("cluster: map of epoch %d: brokers not sorted by id, or %q listed twice", m.Epoch, m.Brokers[i].ID)
		}
	}
	for s, o := range m.Owners {
		if o != "" && m.Broker(o) == nil {
			return fmt.Errorf("cluster: map of epoch %d: shard %d is owned by %q, which is not listed", m.Epoch, s, o)
		}
	}
	if m.Replicas == nil {
		return nil
	}
	if len(m.Replicas) != m.Shards {
		return fmt.Errorf("cluster: map of epoch %d: %d replica sets for %d shards", m.Epoch, len(m.Replicas), m.Shards)
	}
	for s, set := range m.Replicas {
		if len(set) == 0 || set[0] != m.Owners[s] {
			return fmt.Errorf("cluster: map of epoch %d: shard %d's replicas %v do not start with its owner %q", m.Epoch, s, set, m.Owners[s])
		}
		for i, id := range set {
			if m.Broker(id) == nil || slices.Contains(set[:i], id) {
				return fmt.Errorf("cluster: map of epoch %d: shard %d's replica %q is not listed, or listed twice", m.Epoch, s, id)
			}
		}
	}
	return nil
}

// ShardOf is the shard of partition of queue under m.
func (m *Map) ShardOf(queue, partition string) int {
	return Shard(m.Seed, queue, partition, m.Shards)
}

// Owner is the broker that owns the shard of partition of queue, or nil
// while the shard has no owner.
func (m *Map) Owner(queue, partition string) *Broker {
	return m.Broker(m.Owners[m.ShardOf(queue, partition)])
}

// Broker is the listed broker of that id, or nil.
func (m *Map) Broker(id string) *Broker {
	i, ok := slices.BinarySearchFunc(m.Brokers, id, func(b Broker, id string) int {
		switch {
		case b.ID < id:
			return -1
		case b.ID > id:
			return 1
		}
		return 0
	})
	if !ok {
		return nil
	}
	return &m.Brokers[i]
}

// candidates returns which ids are members, the live members sorted (each
// once): the brokers new placements may go to, and a load count of 0 for
// each of them.
func candidates(members, live []string) (map[string]bool, []string, map[string]int, error) {
	isMember := make(map[string]bool, len(members))
	for _, id := range members {
		if id == "" {
			return nil, nil, nil, errors.New("cluster: a member with no id")
		}
		isMember[id] = true
	}
	var cands []string
	for _, id := range live {
		if isMember[id] && !slices.Contains(cands, id) {
			cands = append(cands, id)
		}
	}
	slices.Sort(cands)
	load := make(map[string]int, len(cands))
	for _, id := range cands {
		load[id] = 0
	}
	return isMember, cands, load, nil
}

// ErrNoMembers is Place's answer when no broker is alive to own anything.
var ErrNoMembers = errors.New("cluster: no live broker to place shards on")

// Place computes the owners of a new map: every shard keeps its owner in
// prev while that owner is a member (alive or not: in stage 1 a shard's
// data is on its owner's disk, and a broker that died comes back to it),
// and every shard without one goes to the live member owning the fewest,
// the lowest id first among equals. members are every broker of the
// cluster (none with an empty id: "" means no owner), live the ones
// registered now (those that are not members are passed over). prev may be nil (a new cluster)
// and must otherwise hold one entry per shard.
func Place(shards int, prev []string, members, live []string) ([]string, error) {
	if err := CheckShards(shards); err != nil {
		return nil, err
	}
	if prev != nil && len(prev) != shards {
		return nil, fmt.Errorf("cluster: %d previous owners for %d shards", len(prev), shards)
	}
	isMember, cands, load, err := candidates(members, live)
	if err != nil {
		return nil, err
	}
	owners := make([]string, shards)
	var orphans []int
	for s := range owners {
		if prev != nil && prev[s] != "" && isMember[prev[s]] {
			owners[s] = prev[s]
			if _, ok := load[prev[s]]; ok {
				load[prev[s]]++
			}
			continue
		}
		orphans = append(orphans, s)
	}
	if len(orphans) == 0 {
		return owners, nil
	}
	if len(cands) == 0 {
		return nil, ErrNoMembers
	}
	for _, s := range orphans {
		best := cands[0]
		for _, id := range cands[1:] {
			if load[id] < load[best] {
				best = id
			}
		}
		owners[s] = best
		load[best]++
	}
	return owners, nil
}
