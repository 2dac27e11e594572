package engine

import "sync"

// leaseSet is the leases one pop handed out (one per partition), sharing one
// id; ExtendLease finds them through the registry.
type leaseSet struct {
	id     UUID
	leases []*lease
	live   int // guarded by the registry shard's lock
}

// leaseRegistry maps live lease ids to their sets, sharded to keep pops on
// different cores from contending.
type leaseRegistry struct {
	shards [32]leaseShard
}

type leaseShard struct {
	mu sync.Mutex
	m  map[UUID]*leaseSet
	_  [40]byte
}

func (r *leaseRegistry) shard(id UUID) *leaseShard {
	return &r.shards[id[15]&31]
}

func (r *leaseRegistry) add(s *leaseSet) {
	sh := r.shard(s.id)
	sh.mu.Lock()
	if sh.m == nil {
		sh.m = make(map[UUID]*leaseSet)
	}
	s.live = len(s.leases)
	sh.m[s.id] = s
	sh.mu.Unlock()
}

// ended notes that one lease of its set ended; the set leaves the registry
// with its last lease.
func (r *leaseRegistry) ended(l *lease) {
	s := l.set
	if s == nil {
		return
	}
	sh := r.shard(s.id)
	sh.mu.Lock()
	s.live--
	if s.live <= 0 {
		delete(sh.m, s.id)
	}
	sh.mu.Unlock()
}

func (r *leaseRegistry) get(id UUID) []*lease {
	sh := r.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := sh.m[id]
	if s == nil {
		return nil
	}
	return append([]*lease(nil), s.leases...)
}
