package meta

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/regentmq/regent/cluster"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// resignTimeout and revokeTimeout bound Close's resignation of the
// controller's election and revocation of the session lease: without a
// quorum neither can happen, and a stop must not wait for them.
const (
	resignTimeout = time.Second
	revokeTimeout = time.Second
	// stopGrace bounds how long Close waits for the node's goroutines
	// before it closes the etcd client under them (Node.stop).
	stopGrace = 5 * time.Second
)

// retryDelay spaces the controller's attempts after a failed write.
const retryDelay = time.Second

// errDeposed is writeMap's answer when the election key it was won with
// is gone: this node is no longer the controller.
var errDeposed = errors.New("meta: no longer the controller")

// createSettings creates the cluster's settings unless they exist: one
// transaction, so that of brokers starting together exactly one decides.
func (n *Node) createSettings(ctx context.Context) error {
	var seed [8]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return fmt.Errorf("meta: a hash seed: %w", err)
	}
	s := settings{Shards: n.cfg.Shards, Seed: binary.LittleEndian.Uint64(seed[:]), Members: n.cfg.Members, Replicas: n.cfg.Replicas}
	data, err := json.Marshal(&s)
	if err != nil {
		return fmt.Errorf("meta: settings: %w", err)
	}
	key := n.prefix + keySettings
	resp, err := n.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(data))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return fmt.Errorf("meta: creating the cluster's settings: %w", err)
	}
	if resp.Succeeded {
		n.log.Info("cluster created", "cluster", n.cfg.Cluster, "shards", s.Shards, "members", s.Members)
		return nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return errors.New("meta: the cluster's settings vanished while read")
	}
	var cur settings
	if err := json.Unmarshal(kvs[0].Value, &cur); err != nil {
		return fmt.Errorf("meta: the cluster's settings: %w", err)
	}
	if err := cur.check(); err != nil {
		return fmt.Errorf("meta: the cluster's settings: %w", err)
	}
	if cur.Shards != s.Shards || !slices.Equal(cur.Members, s.Members) || cur.Replicas != s.Replicas {
		n.log.Info("the cluster's settings were fixed at its creation; this start's are ignored",
			"shards", cur.Shards, "members", cur.Members, "replicas", cur.Replicas,
			"asked_shards", s.Shards, "asked_members", s.Members, "asked_replicas", s.Replicas)
	}
	return nil
}

// putBroker writes this broker's record (its addresses may have changed
// since its last start).
func (n *Node) putBroker(ctx context.Context) error {
	data, err := json.Marshal(cluster.Broker{ID: n.cfg.Node, TCP: n.cfg.TCP, HTTP: n.cfg.HTTP})
	if err != nil {
		return fmt.Errorf("meta: broker record: %w", err)
	}
	if _, err := n.cli.Put(ctx, n.prefix+keyBrokers+n.cfg.Node, string(data)); err != nil {
		return fmt.Errorf("meta: writing the broker record: %w", err)
	}
	return nil
}

// register opens a session (a lease of SessionTTL kept alive by the
// client) and marks this broker live under it. ctx bounds the two calls,
// not the session, which lasts until its lease is lost or revoked.
func (n *Node) register(ctx context.Context) (*concurrency.Session, error) {
	lease, err := n.cli.Grant(ctx, int64(n.cfg.SessionTTL))
	if err != nil {
		return nil, fmt.Errorf("meta: granting the session lease: %w", err)
	}
	s, err := concurrency.NewSession(n.cli, concurrency.WithLease(lease.ID), concurrency.WithTTL(n.cfg.SessionTTL))
	if err != nil {
		n.revoke(lease.ID)
		return nil, fmt.Errorf("meta: session: %w", err)
	}
	if _, err := n.cli.Put(ctx, n.prefix+keyLive+n.cfg.Node, n.cfg.Node, clientv3.WithLease(lease.ID)); err != nil {
		s.Orphan()
		n.revoke(lease.ID)
		return nil, fmt.Errorf("meta: registering as live: %w", err)
	}
	return s, nil
}

// revoke drops a lease this node no longer uses, best effort: one that is
// not revoked expires.
func (n *Node) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n.cli.Revoke(ctx, id)
}

// stopping says whether Close or Crash has begun.
func (n *Node) stopping() bool { return n.ctx.Err() != nil || n.crashed.Load() }

// run campaigns under session s, and under a new one each time a session
// is lost (its lease expired while etcd was out of reach), until the node
// stops.
func (n *Node) run(s *concurrency.Session) {
	defer n.wg.Done()
	for {
		n.serve(s)
		if n.stopping() {
			return
		}
		n.log.Warn("session lease lost; registering again", "lease", fmt.Sprintf("%x", int64(s.Lease())))
		n.revoke(s.Lease()) // in case only the client lost it: its keys go at once
		var b backoff
		for {
			ns, err := n.register(n.ctx)
			if err == nil {
				s = ns
				break
			}
			if n.stopping() {
				return
			}
			n.log.Warn("registering again failed", "err", err)
			if !b.wait(n.ctx) {
				return
			}
		}
		n.mu.Lock()
		n.sess = s
		n.mu.Unlock()
		n.log.Info("registered again", "lease", fmt.Sprintf("%x", int64(s.Lease())))
	}
}

// serve campaigns for the controller under s and does the controller's
// work while elected, again after being deposed, until s is lost or the
// node stops. At Close it resigns.
func (n *Node) serve(s *concurrency.Session) {
	var b backoff
	for !n.stopping() {
		select {
		case <-s.Done():
			return
		default:
		}
		ctx, cancel := context.WithCancel(n.ctx)
		unlink := context.AfterFunc(s.Ctx(), cancel)
		el := concurrency.NewElection(s, n.prefix+keyController)
		err := el.Campaign(ctx, n.cfg.Node)
		if err == nil {
			b.reset()
			n.control(ctx, guard{key: el.Key(), rev: el.Rev()})
			if n.ctx.Err() != nil && !n.crashed.Load() {
				rctx, rcancel := context.WithTimeout(context.Background(), resignTimeout)
				if err := el.Resign(rctx); err != nil {
					n.log.Warn("resigning the controller's election failed", "err", err)
				}
				rcancel()
			}
		}
		unlink()
		cancel()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			// The lease is gone before its keep-alive noticed (revoked,
			// or expired while etcd was out of reach): end the session
			// now, and run registers again.
			s.Orphan()
			return
		}
		if err != nil && !n.stopping() && s.Ctx().Err() == nil {
			n.log.Warn("campaign for the controller failed", "err", err)
			b.wait(n.ctx)
		}
	}
}

// guard is the election key a controller won with, at its create
// revision: a write of the controller's holds only while that key exists.
type guard struct {
	key string
	rev int64
}

// control is the controller's work: after every change of the view it
// computes the map and writes it if it differs. It returns when ctx ends
// or the node is no longer the controller.
func (n *Node) control(ctx context.Context, g guard) {
	n.log.Info("elected controller", "revision", g.rev)
	var retry <-chan time.Time
	for {
		ch := n.Changes()
		if v := n.View(); v != nil {
			// The view shows every key as of its revision: from the
			// election's on, it holds the key while it exists.
			if v.Revision >= g.rev && v.st.candidates[g.key].rev != g.rev {
				n.log.Warn("no longer the controller: the election key is gone", "revision", v.Revision)
				return
			}
			retry = nil
			err := n.reconcile(ctx, g, v.st)
			switch {
			case errors.Is(err, errDeposed):
				n.log.Warn("no longer the controller: a map write was refused")
				return
			case errors.Is(err, cluster.ErrNoMembers):
				n.log.Warn("no live member to place shards on; waiting for one", "err", err)
			case err != nil && ctx.Err() == nil:
				n.log.Warn("controller: the shard map was not written; trying again", "err", err)
				retry = time.After(retryDelay)
			}
		}
		select {
		case <-ch:
		case <-retry:
		case <-ctx.Done():
			return
		}
	}
}

// reconcile writes the map that st calls for, if it differs from st's.
// A write refused because the map changed since st is not an error: the
// watch brings the change, and with it the next try.
func (n *Node) reconcile(ctx context.Context, g guard, st *state) error {
	m, err := plan(st)
	if err != nil || m == nil {
		return err
	}
	_, err = n.writeMap(ctx, g, st.mapRev, m)
	return err
}

// plan computes the shard map st calls for: nil if st's map is it already
// (or the cluster has no settings yet). The members are the declared ones
// and every broker ever registered; every shard keeps an owner that is a
// member, and the others go to the live members (to all members, for the
// first map: see doc.go). With Replicas in the settings, each shard gets
// a replica set instead (cluster.PlaceReplicas), its first as the owner.
// The map lists every member with a record, and every owner and replica
// (one without a record yet with no address).
func plan(st *state) (*cluster.Map, error) {
	s := st.settings
	if s == nil {
		return nil, nil
	}
	members := slices.Concat(s.Members, slices.Collect(maps.Keys(st.brokers)))
	slices.Sort(members)
	members = slices.Compact(members)
	var prev []string
	var prevSets [][]string
	if st.cmap != nil && st.cmap.Shards == s.Shards {
		prev, prevSets = st.cmap.Owners, st.cmap.Replicas
	}
	live := members
	if st.mapRev != 0 {
		live = slices.Collect(maps.Keys(st.live))
	}
	var owners []string
	var sets [][]string
	var err error
	if s.Replicas > 0 {
		// A replicated shard's sets are kept while their brokers are
		// members; its owner in the map is the set's first (the preferred
		// leader), as Raft's leader is not the map's business.
		if len(prevSets) != s.Shards {
			prevSets = nil
		}
		if sets, err = cluster.PlaceReplicas(s.Shards, s.Replicas, prevSets, members, live); err == nil {
			owners = make([]string, s.Shards)
			for i := range sets {
				owners[i] = sets[i][0]
			}
		}
	} else {
		owners, err = cluster.Place(s.Shards, prev, members, live)
	}
	if err != nil {
		return nil, fmt.Errorf("meta: placing the shards: %w", err)
	}
	owns := make(map[string]bool, len(members))
	for _, o := range owners {
		owns[o] = true
	}
	for _, set := range sets {
		for _, id := range set {
			owns[id] = true
		}
	}
	var brokers []cluster.Broker
	for _, id := range members {
		if b, ok := st.brokers[id]; ok {
			brokers = append(brokers, b)
		} else if owns[id] {
			brokers = append(brokers, cluster.Broker{ID: id})
		}
	}
	m := &cluster.Map{Seed: s.Seed, Shards: s.Shards, Owners: owners, Replicas: sets, Brokers: brokers}
	if err := m.Check(); err != nil {
		return nil, fmt.Errorf("meta: the computed map: %w", err)
	}
	if c := st.cmap; c != nil && c.Seed == m.Seed && c.Shards == m.Shards &&
		slices.Equal(c.Owners, m.Owners) && slices.Equal(c.Brokers, m.Brokers) &&
		slices.EqualFunc(c.Replicas, m.Replicas, slices.Equal) {
		return nil, nil
	}
	return m, nil
}

// writeMap writes m as the cluster's map if the map key is still at
// mapRev (0: absent) and the election key of g still exists with the
// revision it was won at. It says whether it wrote; errDeposed when the
// election key is gone, so that a deposed controller, one that has not
// noticed yet included, never writes.
func (n *Node) writeMap(ctx context.Context, g guard, mapRev int64, m *cluster.Map) (bool, error) {
	w := *m
	w.Epoch = 0 // the key's ModRevision is the epoch
	data, err := json.Marshal(&w)
	if err != nil {
		return false, fmt.Errorf("meta: the shard map: %w", err)
	}
	key := n.prefix + keyMap
	resp, err := n.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", mapRev),
			clientv3.Compare(clientv3.CreateRevision(g.key), "=", g.rev)).
		Then(clientv3.OpPut(key, string(data))).
		Else(clientv3.OpGet(g.key)).
		Commit()
	if err != nil {
		return false, fmt.Errorf("meta: writing the shard map: %w", err)
	}
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 || kvs[0].CreateRevision != g.rev {
			return false, errDeposed
		}
		return false, nil
	}
	n.log.Info("shard map written", "epoch", resp.Header.Revision, "shards", m.Shards, "brokers", len(m.Brokers))
	return true, nil
}
