package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/regentmq/regent/cluster"
	"github.com/regentmq/regent/cluster/replica"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/log"
	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/protocol"
)

// A broker of a replicated cluster (ClusterOptions.Replicas, stage 2) holds
// a replica of every shard the map places on it: one Raft group per shard
// (cluster/replica), all of them driven by one replica.Node over the
// broker's journal (replica.Disk: the journal is the Raft log), talking to
// the other brokers over replica.Link through their TCP doors (the Raft
// opcode). It serves the shards it leads, each through an engine of its
// own that the Node builds when it takes the lead (shardPlane); the
// Metadata it answers names, for each shard, the leader it knows of.
//
// A queue's configuration goes through etcd as in stage 1: every broker
// applies it to the engines it has, and to each engine it builds later.
// Of the operator's requests on the binary door, configuring a queue and
// listing dead letters are served (over the engines of the shards led
// here); the others (summaries, browsing, seeks, streams) answer
// unavailable. The HTTP bridge serves the data plane through the
// forwarder (forward.go: to each shard's leader), health, configure and
// delete-queue; its routes that read one engine's state answer 503.

// raftTick is the replicas' Raft tick: an election after
// replica.Config.ElectionTicks (10) of them without the leader's word.
const raftTick = 100 * time.Millisecond

// replicaPart is this broker's share of a replicated cluster's shards.
type replicaPart struct {
	c      *clusterPart
	tmpl   engine.Config // each shard's engine's, before its shard's settings
	node   *replica.Node
	disk   *replica.Disk
	link   *replica.Link
	plane  *shardPlane
	shards []uint32 // those this broker holds a replica of, ascending
	cancel context.CancelFunc
	ran    chan error // Run's end
	died   chan error // Run's failure (not its cancellation): Broker.Died
	log    *slog.Logger
}

// startReplicas opens the Raft logs in j (which nothing else writes), joins
// the groups of the shards the map places here, and runs them.
func startReplicas(c *clusterPart, j *log.Log, tmpl engine.Config, logger *slog.Logger) (*replicaPart, error) {
	m := &c.view.Load().Map
	if m.Replicas == nil {
		return nil, errors.New("broker: the cluster's map holds no replica sets")
	}
	rp := &replicaPart{c: c, tmpl: tmpl, log: logger, ran: make(chan error, 1), died: make(chan error, 1)}
	var err error
	if rp.disk, err = replica.OpenDisk(j, 0); err != nil {
		return nil, err
	}
	self := cluster.RaftID(c.o.Node)
	rp.link = replica.NewLink(self, rp.peerAddr, logger)
	if c.token != nil {
		rp.link.WithToken(c.token)
	}
	rp.node, err = replica.NewNode(replica.Config{ID: self, Transport: rp.link, NewEngine: rp.newEngine,
		Served: func(_ uint32, e *engine.Engine) { go c.applyTo(e) }, Sync: rp.disk.Sync, Maintain: rp.disk.Maintain,
		Preferred: rp.preferred, Logger: logger})
	if err != nil {
		rp.link.Close()
		return nil, err
	}
	// A peer's broken connection is news of its death: the groups it led
	// elect without waiting out the election timeout (Node.PeerDown).
	rp.link.OnPeerDown(rp.node.PeerDown)
	var lead []*replica.Shard
	for s, set := range m.Replicas {
		if !slices.Contains(set, c.o.Node) {
			continue
		}
		voters := make([]uint64, len(set))
		for i, id := range set {
			voters[i] = cluster.RaftID(id)
		}
		l := rp.disk.Log(uint32(s))
		if err == nil {
			err = l.Bootstrap(voters)
		}
		var sh *replica.Shard
		if err == nil {
			sh, err = rp.node.AddShard(uint32(s), l)
		}
		if err != nil {
			rp.node.Close()
			rp.link.Close()
			return nil, fmt.Errorf("broker: shard %d's replica: %w", s, err)
		}
		rp.shards = append(rp.shards, uint32(s))
		if set[0] == c.o.Node {
			lead = append(lead, sh)
		}
	}
	rp.plane = &shardPlane{shards: m.Shards, shardOf: func(q, p string) int { return cluster.Shard(m.Seed, q, p, m.Shards) },
		engine: rp.engine, served: rp.served, log: logger}
	ctx, cancel := context.WithCancel(context.Background())
	rp.cancel = cancel
	go func() {
		err := rp.node.Run(ctx, raftTick)
		if ctx.Err() == nil {
			// A Process that failed (the journal): every group stops
			// here. What waits is answered, and the broker is told to
			// stop (Died): the others lead the shards meanwhile.
			logger.Error("replica: the Raft loop stopped", "err", err)
			rp.node.Close()
			rp.died <- fmt.Errorf("broker: the replicas' Raft loop stopped: %w", err)
		}
		rp.ran <- err
	}()
	// The preferred leaders stand at once, so that leadership starts
	// spread as the map spread the sets' firsts (an election would come
	// anyway, a second or two later, won by whoever stood first).
	for _, sh := range lead {
		if err := sh.Campaign(); err != nil {
			logger.Warn("replica: campaign", "shard", sh.ID(), "err", err)
		}
	}
	return rp, nil
}

// preferred is the Raft id of shard's preferred leader: the first of its
// replica set in the map (PlaceReplicas spreads them over the brokers).
func (rp *replicaPart) preferred(shard uint32) uint64 {
	m := &rp.c.view.Load().Map
	if int(shard) >= len(m.Replicas) || len(m.Replicas[shard]) == 0 {
		return 0
	}
	return cluster.RaftID(m.Replicas[shard][0])
}

// peerAddr is the TCP address of the broker of Raft id peer ("" while the
// map lists none).
func (rp *replicaPart) peerAddr(peer uint64) string {
	for _, b := range rp.c.view.Load().Map.Brokers {
		if cluster.RaftID(b.ID) == peer {
			return b.TCP
		}
	}
	return ""
}

// brokerOf is the map's broker of Raft id id, or nil.
func (rp *replicaPart) brokerOf(id uint64) *cluster.Broker {
	m := &rp.c.view.Load().Map
	for i := range m.Brokers {
		if cluster.RaftID(m.Brokers[i].ID) == id {
			return &m.Brokers[i]
		}
	}
	return nil
}

// newEngine builds the engine of a shard this broker has taken the lead
// of (replica.Config.NewEngine). Once it serves (replica.Config.Served),
// the queue configurations etcd holds are applied to it, off the Node's
// loop (each is a record of the shard's log, committed by the loop).
func (rp *replicaPart) newEngine(shard uint32, j engine.Journal) (*engine.Engine, error) {
	m := &rp.c.view.Load().Map
	cfg := rp.tmpl
	cfg.Shards = m.Shards
	seed, shards := m.Seed, m.Shards
	cfg.ShardOf = func(q, p string) int { return cluster.Shard(seed, q, p, shards) }
	cfg.Route = func(s int) error {
		if s != int(shard) {
			return protocol.NewError(protocol.CodeNotLeader, fmt.Sprintf("shard %d is not served by shard %d's engine", s, shard))
		}
		return nil
	}
	cfg.JournalLeases = true
	cfg.SnapshotEveryBytes = replica.SnapshotEveryBytes
	// Every engine of the broker shares its budget: a broker may come to
	// lead every shard it holds.
	if n := int64(len(rp.shards)); n > 1 && cfg.CacheBytes > 0 {
		cfg.CacheBytes = max(cfg.CacheBytes/n, 1<<20)
	}
	return engine.New(cfg, j)
}

// engine is shard s's engine while this broker leads it; otherwise
// not_leader, naming the leader this broker knows of.
func (rp *replicaPart) engine(s int) (*engine.Engine, error) {
	sh := rp.node.Shard(uint32(s))
	if sh == nil {
		return nil, protocol.NewError(protocol.CodeNotLeader, fmt.Sprintf("shard %d has no replica on broker %s: ask Metadata", s, rp.c.o.Node))
	}
	e, lead, term := sh.Engine()
	if e != nil {
		return e, nil
	}
	if b := rp.brokerOf(lead); b != nil && b.ID != rp.c.o.Node {
		return nil, protocol.NewError(protocol.CodeNotLeader, fmt.Sprintf("shard %d is led by %s at %s (term %d)", s, b.ID, b.TCP, term))
	}
	return nil, protocol.NewError(protocol.CodeNotLeader, fmt.Sprintf("shard %d has no leader that serves it yet (term %d): ask again", s, term))
}

// leaderOf says who serves shard s for the HTTP bridge's forwarder: this
// broker (local) while its engine serves it, else the leader it knows of;
// unavailable while there is none, or this broker's engine is being built.
// A shard this broker holds no replica of goes to its preferred leader,
// which answers not_leader if the lead is elsewhere.
func (rp *replicaPart) leaderOf(s int) (id string, local bool, err error) {
	sh := rp.node.Shard(uint32(s))
	if sh == nil {
		if b := rp.brokerOf(rp.preferred(uint32(s))); b != nil {
			return b.ID, false, nil
		}
		return "", false, protocol.NewError(protocol.CodeUnavailable, fmt.Sprintf("shard %d has no replica set in the map", s))
	}
	e, lead, term := sh.Engine()
	if e != nil {
		return rp.c.o.Node, true, nil
	}
	if b := rp.brokerOf(lead); b != nil && b.ID != rp.c.o.Node {
		return b.ID, false, nil
	}
	return "", false, &electionError{protocol.NewError(protocol.CodeUnavailable, fmt.Sprintf("shard %d has no leader that serves it yet (term %d): try again", s, term))}
}

// electionError says that a shard has no leader that serves it yet: an
// election, or a new leader building its engine. The forwarder waits for
// one (afterElection). It unwraps to a *protocol.Error, unavailable.
type electionError struct{ err *protocol.Error }

func (e *electionError) Error() string { return e.err.Error() }
func (e *electionError) Unwrap() error { return e.err }

// electing reports whether err is an electionError.
func electing(err error) bool {
	var ee *electionError
	return errors.As(err, &ee)
}

// failoverPlane is the HTTP bridge's view of this broker's shardPlane:
// a part refused or failed not_leader (its shard's lead moved meanwhile)
// is answered as the bridge answers a part lost on the way (failover).
type failoverPlane struct{ p *shardPlane }

func (f failoverPlane) PushAsync(ctx context.Context, items []engine.PushItem, res []engine.PushResult, done func(error)) {
	f.p.PushAsync(ctx, items, res, func(err error) { done(failover(err)) })
}

func (f failoverPlane) PopAsync(req engine.PopRequest, done func([]engine.Message, bool, error)) netserver.PopWaiter {
	return f.p.PopAsync(req, func(m []engine.Message, cut bool, err error) { done(m, cut, failover(err)) })
}

func (f failoverPlane) AckAsync(ctx context.Context, items []engine.AckItem, res []engine.AckResult, done func(error)) {
	f.p.AckAsync(ctx, items, res, func(err error) { done(failover(err)) })
}

func (f failoverPlane) TransactionAsync(ctx context.Context, acks []engine.AckItem, pushes []engine.PushItem, done func(engine.TxnResult, error)) {
	f.p.TransactionAsync(ctx, acks, pushes, func(r engine.TxnResult, err error) { done(r, failover(err)) })
}

func (f failoverPlane) ExtendLeaseAsync(ctx context.Context, id engine.UUID, d time.Duration, done func(time.Time, error)) {
	f.p.ExtendLeaseAsync(ctx, id, d, func(exp time.Time, err error) { done(exp, failover(err)) })
}

func (f failoverPlane) LiveLease(partitionID engine.UUID, group string) (engine.UUID, bool) {
	return f.p.LiveLease(partitionID, group)
}

// served appends the engines of the shards this broker leads now.
func (rp *replicaPart) served(dst []*engine.Engine) []*engine.Engine {
	for _, s := range rp.shards {
		if e, _, _ := rp.node.Shard(s).Engine(); e != nil {
			dst = append(dst, e)
		}
	}
	return dst
}

// engines are the engines of the shards this broker leads now.
func (rp *replicaPart) engines() []*engine.Engine { return rp.served(nil) }

// leaders fills md's owners with each shard's leader as this broker knows
// it (-1: none known; the shards it holds no replica of keep the map's
// owner, their sets' first).
func (rp *replicaPart) leaders(md *protocol.MetadataReply) {
	index := make(map[uint64]int32, len(md.Brokers))
	for i := range md.Brokers {
		index[cluster.RaftID(md.Brokers[i].ID)] = int32(i)
	}
	for _, s := range rp.shards {
		if int(s) >= len(md.Owners) {
			continue
		}
		e, lead, _ := rp.node.Shard(s).Engine()
		switch i, ok := index[lead]; {
		case e != nil:
			md.Owners[s] = index[cluster.RaftID(rp.c.o.Node)]
		case ok && lead != cluster.RaftID(rp.c.o.Node):
			md.Owners[s] = i
		default:
			md.Owners[s] = -1 // an election, or this broker's engine is being built
		}
	}
}

// close stops the Raft groups: the Node's loop, the engines it built, the
// link. The doors stopped before; the journal closes after.
func (rp *replicaPart) close() error {
	rp.cancel()
	err := <-rp.ran
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	rp.node.Close()
	rp.link.Close()
	rp.plane.held.close()
	return err
}
