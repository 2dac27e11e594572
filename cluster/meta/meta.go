package meta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/regentmq/regent/cluster"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/embed"
)

// DefaultSessionTTL is the registration lease's time to live, in seconds,
// when Config.SessionTTL is 0: how long a broker killed without a word
// still counts as alive.
const DefaultSessionTTL = 5

// healthTimeout bounds Health's read when its context does not.
const healthTimeout = 2 * time.Second

// Config is one broker's part in a cluster.
type Config struct {
	// Cluster names the cluster: this package's keys live under
	// "/regent/<Cluster>/meta/", and it is the embedded etcd's initial
	// cluster token.
	Cluster string
	// Node is this broker's id: not empty, without '/', ',' or '='.
	Node string
	// TCP and HTTP are this broker's advertised addresses (TCP required).
	TCP, HTTP string

	// Shards and Members are read only by the start that creates the
	// cluster; afterwards the settings in etcd win. Shards is G (0:
	// cluster.DefaultShards); Members are the brokers the first map spreads
	// the shards over, started or not (empty: just Node).
	Shards  int
	Members []string
	// Replicas, above 0, replicates every shard on that many brokers
	// (stage 2: one Raft group per shard, cluster.PlaceReplicas); 0 gives
	// each shard one owner. Read, like Shards, only at the cluster's
	// creation; a replicated cluster needs at least Replicas Members.
	Replicas int

	// Voter runs an embedded etcd member in this process, with its data in
	// DataDir, listening on and advertising PeerURL and ClientURL (such as
	// http://127.0.0.1:2380 and http://127.0.0.1:2379). InitialCluster
	// names the voters, "id1=peerURL1,id2=peerURL2,..." ("": this one
	// alone).
	Voter          bool
	DataDir        string
	PeerURL        string
	ClientURL      string
	InitialCluster string
	// Endpoints are the etcd client URLs to use; a voter with none uses
	// its own ClientURL.
	Endpoints []string
	// SessionTTL is the registration lease's time to live in seconds (0:
	// DefaultSessionTTL). etcd raises one below its own minimum (1.5 times
	// its election timeout, 2 s by default).
	SessionTTL int
	// Logger receives the logs; nil means slog.Default(). The embedded
	// etcd and its client log errors only, to the standard error.
	Logger *slog.Logger
}

// View is one consistent picture of the cluster as etcd last told it. A
// View is shared: nobody modifies it once published.
type View struct {
	// Map is the last shard map the controller wrote, its Epoch the map
	// key's ModRevision; its Brokers are every broker registered when it
	// was written, sorted by id. Zero while no map exists.
	Map cluster.Map
	// Live holds the brokers whose registration lease is alive now.
	Live map[string]bool
	// Controller is the node id of the elected controller ("" if none).
	Controller string
	// Revision is the etcd revision this view was read at.
	Revision int64

	st *state // what the view was built from, for the controller
}

// Alive says whether broker id is registered with a live lease.
func (v *View) Alive(id string) bool { return v.Live[id] }

// Node is one broker's membership in the cluster: its registration, its
// campaign for the controller (and the controller's work while elected),
// and the View it keeps. Start makes one; Close or Crash ends it.
type Node struct {
	cfg    Config
	log    *slog.Logger
	prefix string
	etcd   *embed.Etcd // nil unless cfg.Voter
	cli    *clientv3.Client

	view atomic.Pointer[View]

	mu      sync.Mutex
	changes chan struct{}        // closed at the next publish (mu)
	sess    *concurrency.Session // the current session, replaced when lost (mu)

	ctx     context.Context // cancelled by Close and Crash: stops the goroutines
	cancel  context.CancelFunc
	wg      sync.WaitGroup // the watch and the session loop
	etcdWG  sync.WaitGroup // the embedded etcd's error reporter
	crashed atomic.Bool    // Crash: the goroutines leave without a word to etcd
	halting atomic.Bool    // Close or Crash began: etcd's complaints are expected (zaplog.go)

	stopOnce sync.Once
	stopErr  error
}

// Start joins the cluster: it starts the embedded etcd member (a voter),
// creates the cluster's settings if nobody has, writes this broker's
// record, opens its session and registers it as live, and starts
// campaigning for the controller. It returns once the View shows this
// broker live and a shard map, written by whichever broker is the
// controller; ctx bounds the wait (a 3-voter cluster needs two voters up).
// On an error Start undoes what it did.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	n := &Node{
		cfg:     cfg,
		log:     cfg.Logger.With("node", cfg.Node),
		prefix:  "/regent/" + cfg.Cluster + "/meta/",
		changes: make(chan struct{}),
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	ok := false
	defer func() {
		if !ok {
			n.Close()
		}
	}()

	if cfg.Voter {
		e, err := startEtcd(ctx, &cfg, newZapLogger(n.log, &n.halting))
		if err != nil {
			return nil, err
		}
		n.etcd = e
		n.etcdWG.Add(1)
		go n.reportEtcd()
	}
	cc, err := clientConfig(cfg.Endpoints, newZapLogger(n.log, &n.halting))
	if err != nil {
		return nil, err
	}
	n.cli, err = clientv3.New(cc)
	if err != nil {
		return nil, fmt.Errorf("meta: etcd client: %w", err)
	}
	if err := n.createSettings(ctx); err != nil {
		return nil, err
	}
	if err := n.putBroker(ctx); err != nil {
		return nil, err
	}
	s, err := n.register(ctx)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.sess = s
	n.mu.Unlock()

	n.wg.Add(2)
	go n.watch()
	go n.run(s)

	for {
		ch := n.Changes()
		if v := n.View(); v != nil && v.Map.Shards > 0 && v.Live[cfg.Node] {
			break
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("meta: waiting for the cluster's first map: %w", context.Cause(ctx))
		}
	}
	ok = true
	return n, nil
}

// check validates c and fills in its defaults.
func (c *Config) check() error {
	if c.Cluster == "" || strings.ContainsAny(c.Cluster, "/") {
		return fmt.Errorf("meta: cluster name %q: want a name without '/'", c.Cluster)
	}
	if err := checkID(c.Node); err != nil {
		return err
	}
	if c.TCP == "" {
		return errors.New("meta: no TCP address to advertise")
	}
	if c.Shards == 0 {
		c.Shards = cluster.DefaultShards
	}
	if err := cluster.CheckShards(c.Shards); err != nil {
		return fmt.Errorf("meta: %w", err)
	}
	members := slices.Clone(c.Members)
	if len(members) == 0 {
		members = []string{c.Node}
	}
	for _, id := range members {
		if err := checkID(id); err != nil {
			return err
		}
	}
	slices.Sort(members)
	c.Members = slices.Compact(members)
	if c.Replicas != 0 {
		if err := cluster.CheckReplicas(c.Replicas); err != nil {
			return fmt.Errorf("meta: %w", err)
		}
		if len(c.Members) < c.Replicas {
			return fmt.Errorf("meta: %d replicas per shard need as many members; %d given", c.Replicas, len(c.Members))
		}
	}
	if c.Voter {
		if c.DataDir == "" {
			return errors.New("meta: a voter needs a data directory")
		}
		for _, u := range []string{c.PeerURL, c.ClientURL} {
			if _, err := parseURL(u); err != nil {
				return err
			}
		}
		if len(c.Endpoints) == 0 {
			c.Endpoints = []string{c.ClientURL}
		}
	}
	if len(c.Endpoints) == 0 {
		return errors.New("meta: no etcd endpoints (and not a voter)")
	}
	if c.SessionTTL < 0 {
		return fmt.Errorf("meta: session TTL %d s", c.SessionTTL)
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// checkID says whether id can name a broker: it is a key's last element
// and an entry of etcd's initial cluster.
func checkID(id string) error {
	if id == "" || strings.ContainsAny(id, "/,=") {
		return fmt.Errorf("meta: node id %q: want a name without '/', ',' or '='", id)
	}
	return nil
}

func parseURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("meta: URL %q: want scheme://host:port", s)
	}
	return u, nil
}

// View is the current view: never nil once Start has returned. It is
// shared and must not be modified.
func (n *Node) View() *View { return n.view.Load() }

// Changes is closed when the view next changes; take a new one after each
// close. After Close or Crash no change comes.
func (n *Node) Changes() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.changes
}

// publish makes v the current view and wakes whoever waits for a change.
func (n *Node) publish(v *View) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.view.Store(v)
	close(n.changes)
	n.changes = make(chan struct{})
}

// Client is the node's etcd client, for the other records a broker keeps
// in the cluster. It closes with the node.
func (n *Node) Client() *clientv3.Client { return n.cli }

// Prefix is the prefix of this package's keys, "/regent/<Cluster>/meta/".
func (n *Node) Prefix() string { return n.prefix }

// Health says whether etcd answers a linearizable read (within 2 s, or
// ctx's deadline if sooner); after Close or Crash it fails at once.
func (n *Node) Health(ctx context.Context) error {
	if n.stopping() {
		return errors.New("meta: the node is closed")
	}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	if _, err := n.cli.Get(ctx, n.prefix+keySettings, clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("meta: etcd unreachable: %w", err)
	}
	return nil
}

// EtcdMetricsURL is where the embedded etcd member serves its Prometheus
// metrics (its client URL's /metrics), or "" when this node is no voter.
func (n *Node) EtcdMetricsURL() string {
	if !n.cfg.Voter {
		return ""
	}
	return strings.TrimSuffix(n.cfg.ClientURL, "/") + "/metrics"
}

// Close leaves the cluster cleanly: it resigns the controller's election
// if held, revokes the session lease (the others see this broker gone at
// once rather than after SessionTTL), closes the client and stops the
// embedded etcd. It waits for the node's goroutines and may be called
// more than once.
func (n *Node) Close() error {
	n.stopOnce.Do(func() { n.stopErr = n.stop(true) })
	return n.stopErr
}

// Crash stops the node as kill -9 would, for tests: the client closes
// first, so the lease is neither revoked nor the election resigned, and
// the embedded etcd stops without handing over its leadership. The others
// see this broker gone when its lease expires.
func (n *Node) Crash() {
	n.stopOnce.Do(func() { n.stopErr = n.stop(false) })
}

func (n *Node) stop(clean bool) error {
	n.halting.Store(true)
	var errs []error
	if !clean {
		n.crashed.Store(true)
		if n.cli != nil {
			n.cli.Close()
		}
	}
	n.cancel()
	cliClosed := false
	waited := make(chan struct{})
	go func() { n.wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(stopGrace):
		// A campaign that is cancelled resigns with the etcd client's own
		// context (etcd's concurrency.Election.Campaign), which has no
		// deadline: while etcd has no quorum, or the client reconnects
		// after an outage (backoffs of up to two minutes), the broker's
		// stop waited on it. Closing the client ends it; the session's
		// lease then ends by itself.
		n.log.Warn("cluster: etcd does not answer the stop; closing its client (the session lease expires by itself)", "waited", stopGrace)
		cliClosed = n.cli != nil
		if cliClosed {
			n.cli.Close()
		}
		<-waited
	}
	if clean && n.cli != nil && !cliClosed {
		n.mu.Lock()
		s := n.sess
		n.mu.Unlock()
		if s != nil {
			// Revoked within revokeTimeout, not the session's TTL: etcd
			// without a quorum (the last brokers of a cluster stopping)
			// cannot revoke, and the lease ends by itself after
			// SessionTTL.
			s.Orphan()
			rctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
			if _, err := n.cli.Revoke(rctx, s.Lease()); err != nil {
				n.log.Warn("cluster: the session lease could not be revoked; it expires by itself", "err", err)
			}
			cancel()
		}
		if err := n.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, fmt.Errorf("meta: closing the etcd client: %w", err))
		}
	}
	if n.etcd != nil {
		if !clean {
			n.etcd.Server.HardStop()
		}
		n.etcd.Close()
		n.etcdWG.Wait()
	}
	return errors.Join(errs...)
}
