package cluster

import (
	"encoding/binary"
	"hash/fnv"
	"strconv"
	"testing"
)

// TestShardVectors pins the placement function: these shards are part of
// the protocol (clients compute them), so a change that moves any of them
// breaks every cluster in place.
func TestShardVectors(t *testing.T) {
	for _, v := range []struct {
		seed             uint64
		queue, partition string
		hash             uint64
		shard64          int
	}{
		{0, "", "", 0xf51ec3dabc2c4015, 21},
		{0, "orders", "Default", 0x3446dbb35f8af28a, 10},
		{0, "orders", "customer-42", 0x1c6302148f87811c, 28},
		{1, "orders", "customer-42", 0xcef49a89e57ba033, 51},
		{0xdeadbeef, "emails", "p0", 0x4770bcf3fc9b639e, 30},
		// The separator keeps these two apart.
		{0, "ab", "c", 0xe777e84c5796dd8c, 12},
		{0, "a", "bc", 0x08b959e87e01ed63, 35},
	} {
		if h := Hash64(v.seed, v.queue, v.partition); h != v.hash {
			t.Errorf("Hash64(%#x, %q, %q) = %#x, want %#x", v.seed, v.queue, v.partition, h, v.hash)
		}
		if s := Shard(v.seed, v.queue, v.partition, 64); s != v.shard64 {
			t.Errorf("Shard(%#x, %q, %q, 64) = %d, want %d", v.seed, v.queue, v.partition, s, v.shard64)
		}
	}
}

// TestHashIsWhatItsDocSays computes Hash64 the way its comment defines it,
// with the standard library's FNV-1a over the concatenated bytes.
func TestHashIsWhatItsDocSays(t *testing.T) {
	for _, c := range [][2]string{{"", ""}, {"q", "p"}, {"orders", "customer-42"}, {"ünïcode", "Ωmega"}} {
		for _, seed := range []uint64{0, 1, 0xdeadbeefcafe} {
			f := fnv.New64a()
			var s [8]byte
			binary.LittleEndian.PutUint64(s[:], seed)
			f.Write(s[:])
			f.Write([]byte(c[0]))
			f.Write([]byte{0})
			f.Write([]byte(c[1]))
			if want, got := fmix64(f.Sum64()), Hash64(seed, c[0], c[1]); got != want {
				t.Errorf("Hash64(%#x, %q, %q) = %#x, want %#x", seed, c[0], c[1], got, want)
			}
		}
	}
}

// TestShardsAreEven: 100,000 partitions of one queue spread over G shards
// within 10% of the mean, for G a power of two and not.
func TestShardsAreEven(t *testing.T) {
	for _, g := range []int{8, 64, 100} {
		count := make([]int, g)
		const n = 100_000
		for i := 0; i < n; i++ {
			count[Shard(7, "q", "customer-"+strconv.Itoa(i), g)]++
		}
		mean := n / g
		for s, c := range count {
			if c < mean*9/10 || c > mean*11/10 {
				t.Errorf("G=%d: shard %d holds %d partitions, mean %d", g, s, c, mean)
			}
		}
	}
}
