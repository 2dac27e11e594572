package cluster

import (
	"encoding/binary"
	"fmt"
)

// DefaultShards is G for a cluster created without saying: 64, enough for
// eight brokers with eight shards each.
const DefaultShards = 64

// MaxShards bounds G: a shard map holds one owner per shard.
const MaxShards = 1 << 16

// FNV-1a, 64 bits (the constants of the FNV specification).
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// Hash64 is the 64-bit hash a partition is placed by: FNV-1a over the seed
// as 8 little-endian bytes, the queue's name, one 0x00 byte and the
// partition's name (names hold no 0x00, so ("ab", "c") and ("a", "bc")
// differ), followed by MurmurHash3's 64-bit finalizer (fmix64), which
// spreads FNV's weak low bits over the whole word so that Hash64 mod G is
// even for any G.
func Hash64(seed uint64, queue, partition string) uint64 {
	var s [8]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	h := uint64(fnvOffset64)
	for _, c := range s {
		h = (h ^ uint64(c)) * fnvPrime64
	}
	for i := 0; i < len(queue); i++ {
		h = (h ^ uint64(queue[i])) * fnvPrime64
	}
	h *= fnvPrime64 // the 0x00 separator: h ^ 0 == h
	for i := 0; i < len(partition); i++ {
		h = (h ^ uint64(partition[i])) * fnvPrime64
	}
	return fmix64(h)
}

// fmix64 is MurmurHash3's finalizer.
func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

// Shard is the shard of partition of queue in a cluster of g shards with
// the given seed: Hash64 mod g. g must be from 1 to MaxShards.
func Shard(seed uint64, queue, partition string, g int) int {
	return int(Hash64(seed, queue, partition) % uint64(g))
}

// CheckShards says whether g is a shard count a cluster can be created
// with.
func CheckShards(g int) error {
	if g < 1 || g > MaxShards {
		return fmt.Errorf("cluster: %d shards: want 1 to %d", g, MaxShards)
	}
	return nil
}
