// Package cluster holds what the brokers of one Regent cluster agree on to
// find each other's data: the shard of a (queue, partition), and the shard
// map that says which broker owns each shard (stage 1 of the cluster
// design: one owner per shard; stage 2 replicates each shard with Raft and
// keeps this routing as it is).
//
// # The model
//
// A cluster has G shards, fixed when it is created (DefaultShards). A
// partition belongs to the shard Shard(seed, queue, partition, G), a pure
// function of its names: every broker and every client computes the same
// shard without asking anyone, and the seed, also fixed at creation, keeps
// clusters from sharing a hot spot. The function is part of the protocol:
// it never changes (TestShardVectors pins it).
//
// A Map is one version of the placement: for each shard its owner (a
// broker's node id), and for each broker its addresses. The controller
// writes it to etcd; every broker and client reads it; its Epoch (etcd's
// revision of that write) orders versions, so a broker that answers
// not_owner and a client holding an older map agree on which is newer.
// Place computes a new placement from the last one and the live members
// without moving a shard whose owner is still a member: in stage 1 a
// shard's data lives on its owner's disk, so a shard moves only when its
// owner has left the cluster for good (Remove), never because it died.
//
// Nothing here does I/O: it is the arithmetic the rest agrees on.
package cluster
