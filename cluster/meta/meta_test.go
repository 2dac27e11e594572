package meta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regentmq/regent/cluster"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// startTimeout bounds a Start in these tests: generous, for a loaded
// machine under the race detector.
const startTimeout = 60 * time.Second

// freeURL is http://127.0.0.1:<a port free a moment ago>.
func freeURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprintf("http://%s", l.Addr())
}

// testLogger writes to the standard error under -v, nowhere otherwise.
func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// voter is the configuration of a voter alone in its cluster.
func voter(t *testing.T, cluster, id string) Config {
	return Config{
		Cluster:   cluster,
		Node:      id,
		TCP:       "127.0.0.1:7" + id,
		HTTP:      "127.0.0.1:8" + id,
		Voter:     true,
		DataDir:   t.TempDir(),
		PeerURL:   freeURL(t),
		ClientURL: freeURL(t),
		Logger:    testLogger(),
	}
}

func start(t *testing.T, cfg Config) *Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	n, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start %s: %v", cfg.Node, err)
	}
	return n
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func countOwned(owners []string) map[string]int {
	n := map[string]int{}
	for _, o := range owners {
		n[o]++
	}
	return n
}

// trio is a cluster of three voters started together.
type trio struct {
	cfgs  []Config
	nodes []*Node
}

// startTrio starts voters a, b and c at once (the first two to start wait
// for each other) with all three declared as members. Whatever is running
// at the end of the test is crashed: quicker than closing one by one a
// cluster that loses its quorum on the way.
func startTrio(t *testing.T, ttl int) *trio {
	t.Helper()
	ids := []string{"a", "b", "c"}
	tr := &trio{cfgs: make([]Config, 3), nodes: make([]*Node, 3)}
	var initial []string
	for i, id := range ids {
		tr.cfgs[i] = voter(t, "trio", id)
		tr.cfgs[i].Members = ids
		tr.cfgs[i].SessionTTL = ttl
		initial = append(initial, id+"="+tr.cfgs[i].PeerURL)
	}
	for i := range tr.cfgs {
		tr.cfgs[i].InitialCluster = strings.Join(initial, ",")
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, n := range tr.nodes {
			if n != nil {
				wg.Go(n.Crash)
			}
		}
		wg.Wait()
	})
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range tr.cfgs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
			defer cancel()
			tr.nodes[i], errs[i] = Start(ctx, tr.cfgs[i])
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("start %s: %v", ids[i], err)
		}
	}
	tr.converge(t, tr.nodes)
	return tr
}

// converge waits until the views of nodes show one map naming every
// node's addresses, and one controller, and returns that map.
func (tr *trio) converge(t *testing.T, nodes []*Node) *View {
	t.Helper()
	var v0 *View
	waitFor(t, 20*time.Second, "views converge", func() bool {
		v0 = nodes[0].View()
		for _, n := range nodes {
			v := n.View()
			if v.Map.Epoch != v0.Map.Epoch || v.Controller != v0.Controller || v.Controller == "" {
				return false
			}
			for _, cfg := range tr.cfgs {
				if b := v.Map.Broker(cfg.Node); b == nil || b.TCP != cfg.TCP {
					return false
				}
			}
		}
		return true
	})
	return v0
}

// index is the position of node id in the trio.
func (tr *trio) index(t *testing.T, id string) int {
	t.Helper()
	for i, cfg := range tr.cfgs {
		if cfg.Node == id {
			return i
		}
	}
	t.Fatalf("no node %q", id)
	return -1
}

// TestOneVoter: a voter alone creates the cluster, is its controller and
// owns every shard; its metrics and health answer, and Close is final.
func TestOneVoter(t *testing.T) {
	cfg := voter(t, "one", "a")
	n := start(t, cfg)
	defer n.Close()

	v := n.View()
	if err := v.Map.Check(); err != nil {
		t.Fatal(err)
	}
	if v.Map.Shards != cluster.DefaultShards || v.Map.Epoch <= 0 || v.Revision < v.Map.Epoch {
		t.Fatalf("map of %d shards, epoch %d, view at %d", v.Map.Shards, v.Map.Epoch, v.Revision)
	}
	if c := countOwned(v.Map.Owners); c["a"] != cluster.DefaultShards {
		t.Fatalf("owners %v", c)
	}
	if !v.Alive("a") || v.Controller != "a" {
		t.Fatalf("live %v, controller %q", v.Live, v.Controller)
	}
	if b := v.Map.Broker("a"); b == nil || *b != (cluster.Broker{ID: "a", TCP: cfg.TCP, HTTP: cfg.HTTP}) {
		t.Fatalf("broker a listed as %+v", b)
	}
	if n.Prefix() != "/regent/one/meta/" {
		t.Fatalf("prefix %q", n.Prefix())
	}
	if err := n.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(n.EtcdMetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "etcd_server_has_leader") {
		t.Fatalf("metrics: %s, %.200s", resp.Status, body)
	}

	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if err := n.Health(context.Background()); err == nil {
		t.Fatal("healthy after Close")
	}
	if g := nodeGoroutines(); g != "" {
		t.Fatalf("goroutines left after Close:\n%s", g)
	}
}

// nodeGoroutines are the stacks of the goroutines running this package's
// code.
func nodeGoroutines() string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var left []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "regent/cluster/meta.(*Node)") {
			left = append(left, g)
		}
	}
	return strings.Join(left, "\n\n")
}

// TestSessionLostRegistersAgain: a node whose lease is gone (revoked here;
// expired while etcd was out of reach, in life) opens a new session,
// registers again and is controller again, and the map does not change.
func TestSessionLostRegistersAgain(t *testing.T) {
	cfg := voter(t, "lost", "a")
	cfg.SessionTTL = 2
	n := start(t, cfg)
	defer n.Close()
	lease := func() clientv3.LeaseID {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.sess.Lease()
	}
	old, epoch := lease(), n.View().Map.Epoch
	if _, err := n.Client().Revoke(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "registered again", func() bool {
		v := n.View()
		return lease() != old && v.Alive("a") && v.Controller == "a"
	})
	if got := n.View().Map.Epoch; got != epoch {
		t.Fatalf("map rewritten at %d (was %d)", got, epoch)
	}
}

// TestThreeVoters: three voters started together agree on one map that
// spreads the shards over the three, and on one controller.
func TestThreeVoters(t *testing.T) {
	tr := startTrio(t, 0)
	v := tr.converge(t, tr.nodes)
	if err := v.Map.Check(); err != nil {
		t.Fatal(err)
	}
	c := countOwned(v.Map.Owners)
	if len(c) != 3 || c["a"] < 21 || c["b"] < 21 || c["c"] < 21 {
		t.Fatalf("owners %v", c)
	}
	if !slices.Contains([]string{"a", "b", "c"}, v.Controller) {
		t.Fatalf("controller %q", v.Controller)
	}
	for _, n := range tr.nodes {
		if w := n.View(); !w.Alive("a") || !w.Alive("b") || !w.Alive("c") || !slices.Equal(w.Map.Owners, v.Map.Owners) {
			t.Fatalf("%s sees live %v, owners %v", n.cfg.Node, w.Live, countOwned(w.Map.Owners))
		}
	}
	// All three campaign; the others queue behind the controller.
	waitFor(t, 10*time.Second, "three candidates in the election", func() bool {
		w := tr.nodes[0].View()
		return len(w.st.candidates) == 3 && w.Controller == v.Controller
	})
}

// TestCrashKeepsShards: a broker killed (neither the controller nor the
// etcd leader, so that the lease expires on time) is seen gone once its
// lease expires and keeps its shards; started again from its data
// directory, it is live again with the same shards.
func TestCrashKeepsShards(t *testing.T) {
	const ttl = 3
	tr := startTrio(t, ttl)
	v := tr.converge(t, tr.nodes)
	victim := -1
	for i, n := range tr.nodes {
		if n.cfg.Node != v.Controller && n.etcd.Server.Leader() != n.etcd.Server.MemberID() {
			victim = i
			break
		}
	}
	if victim < 0 {
		t.Fatal("every node is the controller or the etcd leader")
	}
	id := tr.cfgs[victim].Node
	var others []*Node
	for i, n := range tr.nodes {
		if i != victim {
			others = append(others, n)
		}
	}

	crashed := time.Now()
	tr.nodes[victim].Crash()
	tr.nodes[victim] = nil
	waitFor(t, (ttl+2)*time.Second, id+" seen dead", func() bool {
		for _, n := range others {
			if n.View().Alive(id) {
				return false
			}
		}
		return true
	})
	t.Logf("%s seen dead %v after its crash", id, time.Since(crashed).Round(time.Millisecond))
	for _, n := range others {
		w := n.View()
		if !slices.Equal(w.Map.Owners, v.Map.Owners) || w.Map.Epoch != v.Map.Epoch {
			t.Fatalf("%s: epoch %d (was %d), owners %v (were %v)", n.cfg.Node, w.Map.Epoch, v.Map.Epoch,
				countOwned(w.Map.Owners), countOwned(v.Map.Owners))
		}
	}

	tr.nodes[victim] = start(t, tr.cfgs[victim])
	waitFor(t, 10*time.Second, id+" live again everywhere", func() bool {
		for _, n := range tr.nodes {
			if !n.View().Alive(id) {
				return false
			}
		}
		return true
	})
	w := tr.converge(t, tr.nodes)
	if !slices.Equal(w.Map.Owners, v.Map.Owners) {
		t.Fatalf("owners after the restart %v, were %v", countOwned(w.Map.Owners), countOwned(v.Map.Owners))
	}
}

// TestCloseControllerHandsOver: when the controller closes, another
// broker is controller within seconds, and no shard moves.
func TestCloseControllerHandsOver(t *testing.T) {
	tr := startTrio(t, 3)
	v := tr.converge(t, tr.nodes)
	i := tr.index(t, v.Controller)
	closed := time.Now()
	if err := tr.nodes[i].Close(); err != nil {
		t.Fatal(err)
	}
	tr.nodes[i] = nil
	var rest []*Node
	for _, n := range tr.nodes {
		if n != nil {
			rest = append(rest, n)
		}
	}
	waitFor(t, 10*time.Second, "a new controller", func() bool {
		for _, n := range rest {
			w := n.View()
			if w.Controller == "" || w.Controller == v.Controller || w.Controller != rest[0].View().Controller || w.Alive(v.Controller) {
				return false
			}
		}
		return true
	})
	t.Logf("controller %s closed; %s took over %v later", v.Controller, rest[0].View().Controller,
		time.Since(closed).Round(time.Millisecond))
	for _, n := range rest {
		if w := n.View(); !slices.Equal(w.Map.Owners, v.Map.Owners) {
			t.Fatalf("%s: owners %v, were %v", n.cfg.Node, countOwned(w.Map.Owners), countOwned(v.Map.Owners))
		}
	}
}

// TestCloseEndsAWaitOnTheClient: Close ends within a bound when one of
// the node's goroutines waits on the etcd client's own context. That is
// where etcd's cancelled campaign resigns (concurrency.Election.Campaign),
// and after an etcd outage its request waited for the client to reconnect,
// for longer than a broker's stop may take (a goroutine dump of
// TestReplicatedClusterServesWithEtcdStopped's hanging exit showed it).
func TestCloseEndsAWaitOnTheClient(t *testing.T) {
	n := start(t, voter(t, "solo", "a"))
	n.wg.Add(1)
	go func() { // as Resign(client.Ctx()) with no etcd to answer
		defer n.wg.Done()
		<-n.cli.Ctx().Done()
	}()
	closed := make(chan error, 1)
	start := time.Now()
	go func() { closed <- n.Close() }()
	select {
	case <-closed:
		t.Logf("closed in %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(3 * stopGrace):
		t.Fatalf("Close did not end within %v:\n%s", 3*stopGrace, nodeGoroutines())
	}
}

// TestSettingsFixedAtCreation: a broker that starts on an existing cluster
// asking for another shard count gets the cluster's, and is listed.
func TestSettingsFixedAtCreation(t *testing.T) {
	a := start(t, voter(t, "fixed", "a"))
	defer a.Close()
	cfg := Config{
		Cluster:   "fixed",
		Node:      "b",
		TCP:       "127.0.0.1:7b",
		Shards:    16,
		Members:   []string{"b"},
		Endpoints: []string{a.cfg.ClientURL},
		Logger:    testLogger(),
	}
	b := start(t, cfg)
	defer b.Close()
	if got := b.View().Map.Shards; got != cluster.DefaultShards {
		t.Fatalf("%d shards, want the cluster's %d", got, cluster.DefaultShards)
	}
	if b.EtcdMetricsURL() != "" {
		t.Fatalf("a non-voter has etcd metrics at %q", b.EtcdMetricsURL())
	}
	waitFor(t, 10*time.Second, "b listed in the map", func() bool {
		return a.View().Map.Broker("b") != nil && b.View().Map.Broker("b") != nil
	})
	if c := countOwned(b.View().Map.Owners); c["a"] != cluster.DefaultShards {
		t.Fatalf("owners %v: b took shards it was not given", c)
	}
	resp, err := b.Client().Get(context.Background(), b.Prefix()+keySettings)
	if err != nil || len(resp.Kvs) != 1 || !strings.Contains(string(resp.Kvs[0].Value), `"members":["a"]`) {
		t.Fatalf("settings %v, %v", resp, err)
	}
}

// TestDeposedControllerCannotWrite: once the election key a controller
// won with is gone (here resigned behind its back), its map writes are
// refused, though the node believes it is still elected; the one it wins
// next writes.
func TestDeposedControllerCannotWrite(t *testing.T) {
	n := start(t, voter(t, "deposed", "a"))
	defer n.Close()
	ctx := context.Background()
	guardOf := func() guard {
		for k, c := range n.View().st.candidates {
			return guard{key: k, rev: c.rev}
		}
		return guard{}
	}

	v := n.View()
	g := guardOf()
	n.mu.Lock()
	s := n.sess
	n.mu.Unlock()
	if err := concurrency.ResumeElection(s, n.prefix+keyController, g.key, g.rev).Resign(ctx); err != nil {
		t.Fatal(err)
	}
	m := v.Map
	m.Owners = slices.Repeat([]string{""}, m.Shards) // a map the controller would never write
	wrote, err := n.writeMap(ctx, g, v.st.mapRev, &m)
	if wrote || err != errDeposed {
		t.Fatalf("deposed write: wrote %v, %v", wrote, err)
	}
	mapRev := func() int64 {
		resp, err := n.Client().Get(ctx, n.Prefix()+keyMap)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("map: %v, %v", resp, err)
		}
		return resp.Kvs[0].ModRevision
	}
	if got := mapRev(); got != v.Map.Epoch {
		t.Fatalf("the map was written at %d after the resignation (epoch %d)", got, v.Map.Epoch)
	}

	// The node campaigns again and wins with a new key: with it, a write
	// of a stale map is refused without error, and a fresh one holds.
	waitFor(t, 10*time.Second, "elected again", func() bool {
		g2 := guardOf()
		return g2.rev > g.rev && n.View().Controller == "a"
	})
	g2 := guardOf()
	w := n.View()
	if wrote, err := n.writeMap(ctx, g2, w.st.mapRev-1, &w.Map); wrote || err != nil {
		t.Fatalf("stale write: wrote %v, %v", wrote, err)
	}
	if wrote, err := n.writeMap(ctx, g2, w.st.mapRev, &w.Map); !wrote || err != nil {
		t.Fatalf("elected write: wrote %v, %v", wrote, err)
	}
	if got := mapRev(); got <= w.Map.Epoch {
		t.Fatalf("map at %d after the elected write, was %d", got, w.Map.Epoch)
	}
}

// TestPlan: the controller's arithmetic, without etcd.
func TestPlan(t *testing.T) {
	st := newState()
	if m, err := plan(st); m != nil || err != nil {
		t.Fatalf("no settings: %v, %v", m, err)
	}
	st.settings = &settings{Shards: 6, Seed: 7, Members: []string{"a", "b", "c"}}
	st.brokers["a"] = cluster.Broker{ID: "a", TCP: "ta"}
	st.brokers["d"] = cluster.Broker{ID: "d", TCP: "td"}
	st.live["a"] = true

	// The first map spreads over every member, started or not, and lists
	// the owners that have no record yet without addresses.
	m, err := plan(st)
	if err != nil {
		t.Fatal(err)
	}
	if c := countOwned(m.Owners); c["a"] != 2 || c["b"] != 2 || c["c"] != 1 || c["d"] != 1 {
		t.Fatalf("first map owners %v", m.Owners)
	}
	want := []cluster.Broker{{ID: "a", TCP: "ta"}, {ID: "b"}, {ID: "c"}, {ID: "d", TCP: "td"}}
	if !slices.Equal(m.Brokers, want) || m.Seed != 7 || m.Shards != 6 {
		t.Fatalf("first map %+v", m)
	}

	// Written: the same state calls for nothing more.
	m.Epoch = 10
	st.cmap, st.mapRev = m, 10
	if again, err := plan(st); again != nil || err != nil {
		t.Fatalf("replanned %+v, %v", again, err)
	}
	// b registers; nothing moves, b gets its address.
	st.brokers["b"] = cluster.Broker{ID: "b", TCP: "tb"}
	next, err := plan(st)
	if err != nil || next == nil || !slices.Equal(next.Owners, m.Owners) || next.Broker("b").TCP != "tb" {
		t.Fatalf("after b registered: %+v, %v", next, err)
	}
	// The live set alone changes nothing: a dead broker keeps its shards.
	st.cmap = next
	delete(st.live, "a")
	st.live["c"] = true
	if again, err := plan(st); again != nil || err != nil {
		t.Fatalf("live change replanned %+v, %v", again, err)
	}
}

// TestPlanReplicas: a replicated cluster's first map gives every shard a
// set of distinct members, its first as the owner; the sets stay when
// brokers die, and every replica is listed.
func TestPlanReplicas(t *testing.T) {
	st := newState()
	st.settings = &settings{Shards: 6, Seed: 7, Members: []string{"a", "b", "c"}, Replicas: 3}
	st.brokers["a"] = cluster.Broker{ID: "a", TCP: "ta"}
	st.live["a"] = true
	m, err := plan(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Check(); err != nil || len(m.Replicas) != 6 {
		t.Fatalf("first map %+v: %v", m, err)
	}
	leads := map[string]int{}
	for s, set := range m.Replicas {
		if len(set) != 3 || set[0] != m.Owners[s] {
			t.Fatalf("shard %d: replicas %v, owner %q", s, set, m.Owners[s])
		}
		sorted := slices.Sorted(slices.Values(set))
		if !slices.Equal(sorted, []string{"a", "b", "c"}) {
			t.Fatalf("shard %d's replicas %v are not the three members", s, set)
		}
		leads[set[0]]++
	}
	if leads["a"] != 2 || leads["b"] != 2 || leads["c"] != 2 {
		t.Fatalf("preferred leaders %v: not spread", leads)
	}
	if len(m.Brokers) != 3 {
		t.Fatalf("brokers %+v: every replica is listed", m.Brokers)
	}
	m.Epoch = 10
	st.cmap, st.mapRev = m, 10
	// Brokers die and come back: the sets stay.
	delete(st.live, "a")
	st.live["b"] = true
	if again, err := plan(st); again != nil || err != nil {
		t.Fatalf("a live change replanned %+v, %v", again, err)
	}
	// Fewer members than replicas cannot be placed.
	st2 := newState()
	st2.settings = &settings{Shards: 2, Seed: 1, Members: []string{"a", "b"}, Replicas: 3}
	if _, err := plan(st2); !errors.Is(err, cluster.ErrTooFewMembers) {
		t.Fatalf("two members for three replicas: %v", err)
	}
}
