package engine

import "hash/maphash"

// nameIndex maps partition names to partitions with open addressing and
// linear probing over a slice of pointers: 8 bytes a slot, at most 3/4 full,
// so 11 to 21 bytes a partition where a Go map costs several times that.
type nameIndex struct {
	seed  maphash.Seed
	slots []*partition
	n     int
}

func (x *nameIndex) hash(name string) uint64 { return maphash.String(x.seed, name) }

func (x *nameIndex) get(name string) *partition {
	if x.n == 0 {
		return nil
	}
	mask := uint64(len(x.slots) - 1)
	for i := x.hash(name) & mask; ; i = (i + 1) & mask {
		p := x.slots[i]
		if p == nil {
			return nil
		}
		if p.name == name {
			return p
		}
	}
}

// put adds p, whose name is not in the index yet.
func (x *nameIndex) put(p *partition) {
	if x.slots == nil {
		x.seed = maphash.MakeSeed()
		x.slots = make([]*partition, 8)
	}
	if (x.n+1)*4 > len(x.slots)*3 {
		old := x.slots
		x.slots = make([]*partition, 2*len(old))
		for _, q := range old {
			if q != nil {
				x.insert(q)
			}
		}
	}
	x.insert(p)
	x.n++
}

func (x *nameIndex) insert(p *partition) {
	mask := uint64(len(x.slots) - 1)
	i := x.hash(p.name) & mask
	for x.slots[i] != nil {
		i = (i + 1) & mask
	}
	x.slots[i] = p
}

func (x *nameIndex) len() int { return x.n }

// del removes the partition named name (backward-shift deletion keeps every
// probe sequence unbroken).
func (x *nameIndex) del(name string) {
	if x.n == 0 {
		return
	}
	mask := uint64(len(x.slots) - 1)
	i := x.hash(name) & mask
	for {
		p := x.slots[i]
		if p == nil {
			return
		}
		if p.name == name {
			break
		}
		i = (i + 1) & mask
	}
	x.slots[i] = nil
	x.n--
	for j := (i + 1) & mask; x.slots[j] != nil; j = (j + 1) & mask {
		home := x.hash(x.slots[j].name) & mask
		// Move slots[j] back to the hole at i if its home does not lie in
		// the cyclic range (i, j].
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			x.slots[i], x.slots[j] = x.slots[j], nil
			i = j
		}
	}
}
