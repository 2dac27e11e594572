package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/regentmq/regent/cluster"
	"github.com/regentmq/regent/cluster/meta"
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/protocol"
)

// ClusterOptions make a broker one of a cluster's (Options.Cluster; nil:
// it runs alone). The cluster's membership, shard map and queue
// configurations live in etcd (cluster/meta); nothing per message does.
type ClusterOptions struct {
	// Name is the cluster's; Node this broker's id in it (required).
	Name, Node string
	// AdvertiseTCP and AdvertiseHTTP are the addresses clients and other
	// brokers reach this one at; default the listen addresses, with this
	// machine's host name when they name no host.
	AdvertiseTCP, AdvertiseHTTP string
	// Shards (G) and Members (the brokers the first map spreads them
	// over) count only when the cluster is created; so does Replicas,
	// which, above 0, replicates every shard on that many of the members
	// (stage 2: one Raft group per shard; 1, 3 or 5) instead of giving
	// it one owner.
	Shards   int
	Members  []string
	Replicas int
	// Voter runs an embedded etcd member in this broker, in EtcdDir, at
	// PeerURL and ClientURL, among the voters of InitialCluster
	// ("id=peerURL,..."). Endpoints are the etcd client endpoints of a
	// broker that is not a voter (or of an external etcd).
	Voter                       bool
	EtcdDir, PeerURL, ClientURL string
	InitialCluster              string
	Endpoints                   []string
	// LinkToken is the token this broker presents to the others' doors
	// (its Raft link, its forwarding clients) when authentication is on:
	// an admin token they accept. Without it a broker mints its own from
	// Auth's HS256 secret; with keys that only verify, it is required.
	LinkToken    string
	SessionTTL   time.Duration // registration lease; default 5 s
	ApplyTimeout time.Duration // how long a configure waits for every broker; default 10 s
	StartTimeout time.Duration // how long New waits for etcd and the first map; default 60 s
}

// clusterPart is a cluster's broker's share of the cluster: its etcd node,
// the shard map it routes by, the Metadata answer it keeps ready, and the
// queue configurations it applies.
type clusterPart struct {
	o      ClusterOptions
	node   *meta.Node
	prefix string // of the broker's own keys: /regent/<cluster>/
	// token gives the token this broker presents to the others' doors
	// (nil: authentication is off).
	token func(context.Context) (string, error)
	log   *slog.Logger
	e     atomic.Pointer[engine.Engine]

	view atomic.Pointer[meta.View]
	md   atomic.Pointer[protocol.MetadataReply]

	links *links     // to the other brokers (link.go)
	fw    *forwarder // the HTTP bridge's data plane (forward.go); nil until dataPlane
	// rp holds this broker's replicas of a replicated cluster's shards
	// (replicated.go); nil in stage 1, where e is the broker's one engine.
	rp *replicaPart

	// applyMu orders the application of queue records (apply, applyTo):
	// an engine that starts serving gets the records as they are then,
	// and one applied after reaches it too; never an older one last.
	applyMu sync.Mutex
	qmu     sync.Mutex
	queues  map[string]engine.QueueOptions // the live queue records applied, for engines built later

	stop chan struct{}
	wg   sync.WaitGroup
}

// Keys the broker keeps under /regent/<cluster>/ (cluster/meta keeps
// membership and the map under its meta/): a queue's options (or a
// tombstone), and for each broker the last etcd revision of those it
// applied.
const (
	queuesKey  = "queues/"
	appliedKey = "applied/"
)

// queueRecord is a queue's configuration as etcd holds it.
type queueRecord struct {
	Options engine.QueueOptions `json:"options"`
	Deleted bool                `json:"deleted,omitempty"`
}

// startCluster joins (or creates) the cluster: etcd, registration, the
// first map. The engine is not built yet: it needs the map's shards.
// token, when set, is where the broker gets the token it presents to the
// others' doors (linkToken).
func startCluster(o ClusterOptions, tcpAddr, httpAddr string, token func(context.Context) (string, error), logger *slog.Logger) (*clusterPart, error) {
	if o.Name == "" || o.Node == "" {
		return nil, errors.New("broker: a cluster needs a name and a node id")
	}
	if logger == nil {
		logger = slog.Default()
	}
	var err error
	if o.AdvertiseTCP == "" {
		if o.AdvertiseTCP, err = advertise(tcpAddr); err != nil {
			return nil, err
		}
	}
	if o.AdvertiseHTTP == "" {
		if o.AdvertiseHTTP, err = advertise(httpAddr); err != nil {
			return nil, err
		}
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 5 * time.Second
	}
	if o.ApplyTimeout <= 0 {
		o.ApplyTimeout = 10 * time.Second
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.StartTimeout)
	defer cancel()
	n, err := meta.Start(ctx, meta.Config{
		Cluster: o.Name, Node: o.Node, TCP: o.AdvertiseTCP, HTTP: o.AdvertiseHTTP,
		Shards: o.Shards, Members: o.Members, Replicas: o.Replicas,
		Voter: o.Voter, DataDir: o.EtcdDir, PeerURL: o.PeerURL, ClientURL: o.ClientURL,
		InitialCluster: o.InitialCluster, Endpoints: o.Endpoints,
		SessionTTL: int((o.SessionTTL + time.Second - 1) / time.Second), Logger: logger,
	})
	if err != nil {
		return nil, fmt.Errorf("broker: cluster %s: %w", o.Name, err)
	}
	c := &clusterPart{o: o, node: n, prefix: "/regent/" + o.Name + "/", log: logger, stop: make(chan struct{}), links: newLinks(o.Node, token), token: token}
	c.setView(n.View())
	c.wg.Add(1)
	go c.follow()
	return c, nil
}

// advertise is a listen address as others reach it: with this machine's
// name when it names no host.
func advertise(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("broker: address %q: %w", addr, err)
	}
	if port == "0" {
		return "", fmt.Errorf("broker: a cluster's broker needs a fixed port to advertise, not %q", addr)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		if host, err = os.Hostname(); err != nil {
			return "", err
		}
	}
	return net.JoinHostPort(host, port), nil
}

// replicated says whether the cluster replicates its shards (its map
// holds replica sets: the settings etcd holds decide, not this start's).
func (c *clusterPart) replicated() bool { return c.view.Load().Map.Replicas != nil }

// engineConfig places the engine in the cluster: the map's shards, and
// Route answering from the map this broker follows.
func (c *clusterPart) engineConfig(cfg *engine.Config) {
	m := &c.view.Load().Map
	seed, g := m.Seed, m.Shards
	cfg.Shards = g
	cfg.ShardOf = func(queue, partition string) int { return cluster.Shard(seed, queue, partition, g) }
	cfg.Route = c.route
}

// route says whether this broker serves shard s: it owns it. Another
// broker's shard answers not_owner while that broker is up, unavailable
// while it is down (its data waits on its disk).
func (c *clusterPart) route(s int) error {
	v := c.view.Load()
	if s < 0 || s >= len(v.Map.Owners) {
		return protocol.NewError(protocol.CodeInternal, "shard "+strconv.Itoa(s)+" is outside the map")
	}
	switch o := v.Map.Owners[s]; {
	case o == c.o.Node:
		return nil
	case o == "":
		return protocol.NewError(protocol.CodeUnavailable, fmt.Sprintf("shard %d has no owner yet (map epoch %d)", s, v.Map.Epoch))
	case !v.Alive(o):
		return protocol.NewError(protocol.CodeUnavailable, fmt.Sprintf("shard %d is owned by %s, which is down (map epoch %d): its partitions wait for it", s, o, v.Map.Epoch))
	default:
		addr := ""
		if b := v.Map.Broker(o); b != nil {
			addr = b.TCP
		}
		return protocol.NewError(protocol.CodeNotOwner, fmt.Sprintf("shard %d is owned by %s at %s (map epoch %d)", s, o, addr, v.Map.Epoch))
	}
}

// setView publishes a view and the Metadata answer made from it.
func (c *clusterPart) setView(v *meta.View) {
	md := &protocol.MetadataReply{Cluster: c.o.Name, Node: c.o.Node, Epoch: v.Map.Epoch, Seed: v.Map.Seed,
		Shards: uint32(v.Map.Shards), Controller: v.Controller}
	index := make(map[string]int32, len(v.Map.Brokers))
	for i, b := range v.Map.Brokers {
		index[b.ID] = int32(i)
		md.Brokers = append(md.Brokers, protocol.MetadataBroker{ID: b.ID, TCP: b.TCP, HTTP: b.HTTP, Live: v.Alive(b.ID)})
	}
	md.Owners = make([]int32, len(v.Map.Owners))
	for s, o := range v.Map.Owners {
		md.Owners[s] = -1
		if i, ok := index[o]; ok {
			md.Owners[s] = i
		}
	}
	c.view.Store(v)
	c.md.Store(md)
}

// follow keeps the view current.
func (c *clusterPart) follow() {
	defer c.wg.Done()
	for {
		ch := c.node.Changes()
		v := c.node.View()
		c.setView(v)
		c.links.prune(v)
		select {
		case <-ch:
		case <-c.stop:
			return
		}
	}
}

// Metadata is netserver.Cluster's. A replicated cluster's names each
// shard's leader as this broker knows it, asked anew each time (leaders
// change without a new map).
func (c *clusterPart) Metadata() *protocol.MetadataReply {
	md := c.md.Load()
	if c.rp == nil {
		return md
	}
	out := *md
	out.Owners = slices.Clone(md.Owners)
	c.rp.leaders(&out)
	return &out
}

// engines are the engines this broker serves now: its one engine, or the
// engines of the replicated shards it leads.
func (c *clusterPart) engines() []*engine.Engine {
	if c.rp != nil {
		return c.rp.engines()
	}
	if e := c.e.Load(); e != nil {
		return []*engine.Engine{e}
	}
	return nil
}

// applyTo applies every live queue configuration applied so far to an
// engine that started serving after them (a replicated shard's, at its
// takeover: replica.Config.Served).
func (c *clusterPart) applyTo(e *engine.Engine) {
	c.applyMu.Lock()
	defer c.applyMu.Unlock()
	c.qmu.Lock()
	qs := maps.Clone(c.queues)
	c.qmu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), c.o.ApplyTimeout)
	defer cancel()
	for name, o := range qs {
		if _, err := e.Configure(ctx, name, o); err != nil {
			c.log.Warn("cluster: a queue configuration does not apply to a shard's new engine", "queue", name, "err", err)
		}
	}
}

// bind gives the engine to the cluster part (nil for a replicated
// cluster's broker, whose engines come and go with the lead): it applies
// every queue configuration etcd holds, then follows them.
func (c *clusterPart) bind(e *engine.Engine) error {
	if e != nil {
		c.e.Store(e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.o.StartTimeout)
	defer cancel()
	rev, err := c.applyAll(ctx)
	if err != nil {
		return err
	}
	if err := c.applied(ctx, rev); err != nil {
		return err
	}
	c.wg.Add(1)
	go c.watchQueues(rev + 1)
	return nil
}

// applyAll applies every queue configuration etcd holds and returns the
// revision it read at. Tombstones are passed over: a queue is deleted only
// while every broker is up, so each applied its deletion as it came (the
// watch); a tombstone read later would delete the queue that pushes made
// again since (a restart would lose its messages).
func (c *clusterPart) applyAll(ctx context.Context) (int64, error) {
	resp, err := c.node.Client().Get(ctx, c.prefix+queuesKey, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("broker: queue configurations: %w", err)
	}
	for _, kv := range resp.Kvs {
		c.apply(ctx, string(kv.Key), kv.Value, false)
	}
	return resp.Header.Revision, nil
}

// apply applies one queue record to the engine; a tombstone only when
// deletes is set (as it comes, not when read again: see applyAll). A
// record that does not parse or apply is logged and passed over: it came
// from a broker of the same cluster, which applied it itself first.
func (c *clusterPart) apply(ctx context.Context, key string, value []byte, deletes bool) {
	name := key[len(c.prefix+queuesKey):]
	var rec queueRecord
	if err := json.Unmarshal(value, &rec); err != nil {
		c.log.Error("cluster: a queue record does not parse", "queue", name, "err", err)
		return
	}
	c.applyMu.Lock()
	defer c.applyMu.Unlock()
	c.qmu.Lock()
	if c.queues == nil {
		c.queues = map[string]engine.QueueOptions{}
	}
	if rec.Deleted {
		delete(c.queues, name)
	} else {
		c.queues[name] = rec.Options
	}
	c.qmu.Unlock()
	for _, e := range c.engines() {
		var err error
		switch {
		case rec.Deleted && !deletes:
		case rec.Deleted:
			_, err = e.DeleteQueue(ctx, name)
		default:
			_, err = e.Configure(ctx, name, rec.Options)
		}
		if err != nil {
			c.log.Error("cluster: a queue record does not apply", "queue", name, "deleted", rec.Deleted, "err", err)
		}
	}
}

// applied records that this broker applied every queue record up to rev.
func (c *clusterPart) applied(ctx context.Context, rev int64) error {
	_, err := c.node.Client().Put(ctx, c.prefix+appliedKey+c.o.Node, strconv.FormatInt(rev, 10))
	if err != nil {
		return fmt.Errorf("broker: record applied queue configurations: %w", err)
	}
	return nil
}

// watchQueues applies queue records as they change, from revision rev.
func (c *clusterPart) watchQueues(rev int64) {
	defer c.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-c.stop
		cancel()
	}()
	for ctx.Err() == nil {
		wch := c.node.Client().Watch(clientv3.WithRequireLeader(ctx), c.prefix+queuesKey, clientv3.WithPrefix(), clientv3.WithRev(rev))
		for resp := range wch {
			if err := resp.Err(); err != nil {
				c.log.Warn("cluster: watch of queue configurations", "err", err)
				if resp.CompactRevision > 0 {
					// Behind etcd's history (cut an hour back): read the
					// configurations again, and follow from there. A
					// deletion in the gap is missed: this broker was out
					// of etcd's reach, the delete went on without it.
					if r, err := c.applyAll(ctx); err == nil {
						rev = r + 1
					}
				}
				break
			}
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypePut {
					c.apply(ctx, string(ev.Kv.Key), ev.Kv.Value, true)
				}
			}
			rev = resp.Header.Revision + 1
			if err := c.applied(ctx, resp.Header.Revision); err != nil && ctx.Err() == nil {
				c.log.Warn("cluster: record applied queue configurations", "err", err)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Configured is netserver.Cluster's: the options go to etcd, and every
// broker that is up applies them before the answer.
func (c *clusterPart) Configured(ctx context.Context, queue string, o engine.QueueOptions) error {
	b, err := json.Marshal(queueRecord{Options: o})
	if err != nil {
		return err
	}
	return c.record(ctx, queue, b)
}

// DeleteQueue is netserver.Cluster's. Every broker must be up: one that is
// down would keep its partitions of the queue.
func (c *clusterPart) DeleteQueue(ctx context.Context, queue string) (bool, error) {
	v := c.view.Load()
	for _, b := range v.Map.Brokers {
		if !v.Alive(b.ID) {
			return false, protocol.NewError(protocol.CodeUnavailable, "broker "+b.ID+" is down: a queue is deleted only while every broker of the cluster is up")
		}
	}
	existed := false
	for _, e := range c.engines() {
		ok, err := e.DeleteQueue(ctx, queue)
		if err != nil {
			return false, err
		}
		existed = existed || ok
	}
	key := c.prefix + queuesKey + queue
	resp, err := c.node.Client().Get(ctx, key)
	if err != nil {
		return false, unavailable(err)
	}
	if len(resp.Kvs) > 0 {
		var rec queueRecord
		existed = existed || json.Unmarshal(resp.Kvs[0].Value, &rec) != nil || !rec.Deleted
	}
	b, _ := json.Marshal(queueRecord{Deleted: true})
	if err := c.record(ctx, queue, b); err != nil {
		return false, err
	}
	return existed, nil
}

// record writes a queue record and waits until every broker that is up
// applied it.
func (c *clusterPart) record(ctx context.Context, queue string, value []byte) error {
	ctx, cancel := context.WithTimeout(ctx, c.o.ApplyTimeout)
	defer cancel()
	cli := c.node.Client()
	put, err := cli.Put(ctx, c.prefix+queuesKey+queue, string(value))
	if err != nil {
		return unavailable(err)
	}
	rev := put.Header.Revision
	for {
		resp, err := cli.Get(ctx, c.prefix+appliedKey, clientv3.WithPrefix())
		if err != nil {
			return unavailable(err)
		}
		done := map[string]bool{}
		for _, kv := range resp.Kvs {
			if n, err := strconv.ParseInt(string(kv.Value), 10, 64); err == nil && n >= rev {
				done[string(kv.Key[len(c.prefix+appliedKey):])] = true
			}
		}
		v := c.view.Load()
		var late string
		for _, b := range v.Map.Brokers {
			if v.Alive(b.ID) && !done[b.ID] {
				late = b.ID
				break
			}
		}
		if late == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return protocol.NewError(protocol.CodeUnavailable, "broker "+late+" did not apply queue "+queue+"'s configuration in time; it applies it when it can")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Health is netserver.Cluster's: whether etcd answers, within a second.
func (c *clusterPart) Health(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return c.node.Health(ctx)
}

// unavailable is an etcd failure as a client sees it.
func unavailable(err error) error {
	return protocol.NewError(protocol.CodeUnavailable, "the cluster's etcd: "+err.Error())
}

// dataPlane is the HTTP bridge's data plane: every partition of the
// cluster, forwarding what another broker owns (stage 1) or leads (stage
// 2) to it (forward.go). This broker's part goes to e, or without one to
// the engines of the replicated shards it leads. popBytes is the engines'
// MaxPopBytes: what a pop gathered from several of them answers at most.
func (c *clusterPart) dataPlane(e *engine.Engine, popBytes int) *forwarder {
	if c.rp != nil {
		c.fw = newForwarder(failoverPlane{c.rp.plane}, c)
	} else {
		c.fw = newForwarder(netserver.EnginePlane{E: e}, c)
	}
	c.fw.popBytes = popBytes
	if popBytes <= 0 {
		c.fw.popBytes = engine.DefaultMaxPopBytes
	}
	return c.fw
}

// close stops forwarding (the links close, then what the forwarder runs
// ends), stops following etcd and leaves the cluster (others see this
// broker down at once). The doors stopped before.
func (c *clusterPart) close() error {
	c.links.close()
	if c.fw != nil {
		c.fw.close()
	}
	var errs []error
	if c.rp != nil {
		if err := c.rp.close(); err != nil {
			errs = append(errs, fmt.Errorf("replicas: %w", err))
		}
	}
	close(c.stop)
	c.wg.Wait()
	return errors.Join(append(errs, c.node.Close())...)
}
