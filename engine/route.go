package engine

// What a cluster asks of the engine (Config.Shards, ShardOf, Route). A
// cluster's broker holds the partitions of the shards it owns in one
// engine, as a lone broker holds all of them. Two things change:
//
//   - a new partition's number is the first free one whose remainder by
//     Shards is the partition's shard, so that its id (partitionID: the
//     queue's id and that number) names its shard to any broker, which
//     routes an ack that carries only a partition id (Queen's HTTP ack)
//     without asking anyone (PartitionShard). Numbers still grow, so a
//     queue's partitions stay in number order, as addPartition wants;
//   - a push, a pop of a named partition, an ack and a transaction ask
//     Route for each shard they touch before anything is taken, and are
//     refused whole with its answer, so a client that routed with an old
//     map learns it once, refreshes and resends the whole request.
//
// A pop that names no partition serves the partitions this engine holds:
// they are its owner's, as partitions are only created by pushes that
// Route let in.

// newSeq is the number of the next partition of q named name; q.mu held.
func (e *Engine) newSeq(q *queue, name string) uint64 {
	seq := q.next
	if g := uint64(e.cfg.Shards); g > 0 {
		want := uint64(e.cfg.ShardOf(q.name, name))
		seq += (want + g - seq%g) % g
	}
	return seq
}

// PartitionShard is the shard a partition id names in a cluster of shards
// shards (Config.Shards); ok is false for an id that is not a partition's.
func PartitionShard(id UUID, shards int) (shard int, ok bool) {
	_, seq, ok := splitPartitionID(id)
	if !ok || shards <= 0 {
		return 0, false
	}
	return int(seq % uint64(shards)), true
}

// routeName is Route's answer for partition of queue ("" stands for
// DefaultPartition).
func (e *Engine) routeName(queue, partition string) error {
	if partition == "" {
		partition = DefaultPartition
	}
	return e.cfg.Route(e.cfg.ShardOf(queue, partition))
}

// routePushes is Route's first refusal among the partitions items push to
// (one question per run of items of one partition, as pushes come).
func (e *Engine) routePushes(items []PushItem) error {
	for i := range items {
		if i > 0 && items[i].Queue == items[i-1].Queue && items[i].Partition == items[i-1].Partition {
			continue
		}
		if err := e.routeName(items[i].Queue, items[i].Partition); err != nil {
			return err
		}
	}
	return nil
}

// routeAcks is Route's first refusal among the partitions items ack in, by
// the shards their ids name. An id that names none is left to the ack,
// which refuses it.
func (e *Engine) routeAcks(items []AckItem) error {
	for i := range items {
		if i > 0 && items[i].PartitionID == items[i-1].PartitionID {
			continue
		}
		if err := e.routeID(items[i].PartitionID); err != nil {
			return err
		}
	}
	return nil
}

// routeID is Route's answer for the partition of that id.
func (e *Engine) routeID(id UUID) error {
	if s, ok := PartitionShard(id, e.cfg.Shards); ok {
		return e.cfg.Route(s)
	}
	return nil
}
