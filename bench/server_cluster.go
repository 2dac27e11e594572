package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/regentmq/regent/client"
)

// replicatedBrokers is how many brokers the regent-replicated target runs,
// each shard on all of them.
const replicatedBrokers = 3

// leadersQuiet is how long the leaders stay put before waitLeaders takes
// them as settled (longer than a lead's hand-back, 3 s after a takeover);
// leadersSettle bounds that wait.
const (
	leadersQuiet  = 4 * time.Second
	leadersSettle = 15 * time.Second
)

// replicatedShards is the shard count of the regent-replicated target's
// cluster: enough that every broker leads several.
const replicatedShards = 16

// StartRegentCluster runs n `bin serve --cluster` children on 127.0.0.1,
// each an embedded etcd voter, every shard replicated on all n (--replicas
// n), with the given sync policy, and waits until every shard has a
// leader. The Server's address is the first broker's (the Go client
// routes to each shard's leader from there); its Probe sums the CPU time
// and the resident sets of the n processes.
func StartRegentCluster(ctx context.Context, bin, syncPolicy string, n int, env []string, logw io.Writer) (*Server, error) {
	// Ports are chosen before the brokers bind them, and another program
	// may take one meanwhile: a start that fails is made again on new
	// ports, up to three times.
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		var srv *Server
		if srv, err = startRegentCluster(ctx, bin, syncPolicy, n, env, logw); err == nil || ctx.Err() != nil {
			return srv, err
		}
	}
	return nil, err
}

func startRegentCluster(ctx context.Context, bin, syncPolicy string, n int, env []string, logw io.Writer) (*Server, error) {
	dir, err := os.MkdirTemp("", "regent-bench-cluster-*")
	if err != nil {
		return nil, err
	}
	if syncPolicy == "" {
		syncPolicy = "always"
	}
	type ports struct{ tcp, http, peer, client int }
	ps := make([]ports, n)
	var peers []string
	for i := range ps {
		for _, p := range []*int{&ps[i].tcp, &ps[i].http, &ps[i].peer, &ps[i].client} {
			if *p, err = freePort(); err != nil {
				os.RemoveAll(dir)
				return nil, err
			}
		}
		peers = append(peers, fmt.Sprintf("b%d=http://127.0.0.1:%d", i+1, ps[i].peer))
	}
	srvs := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n { // at once: each etcd member waits for a quorum
		wg.Add(1)
		go func() {
			defer wg.Done()
			srvs[i], errs[i] = startServe(ctx, bin, []string{"--data", filepath.Join(dir, fmt.Sprintf("b%d", i+1)),
				"--tcp", fmt.Sprintf("127.0.0.1:%d", ps[i].tcp), "--http", fmt.Sprintf("127.0.0.1:%d", ps[i].http),
				"--sync", syncPolicy, "--log-level", "warn",
				"--cluster", "bench", "--node", fmt.Sprintf("b%d", i+1), "--peers", strings.Join(peers, ","),
				"--etcd-voter", "--etcd-client-url", fmt.Sprintf("http://127.0.0.1:%d", ps[i].client),
				"--shards", fmt.Sprint(replicatedShards), "--replicas", fmt.Sprint(n)}, env, logw)
		}()
	}
	wg.Wait()
	cl := &Server{Durability: RegentDurability(syncPolicy) + fmt.Sprintf(", on %d brokers, each shard on all %d (committed by a majority)", n, n)}
	for _, kv := range env {
		if procs, ok := strings.CutPrefix(kv, "GOMAXPROCS="); ok {
			cl.Durability += ", GOMAXPROCS=" + procs + " each"
		}
	}
	cl.StopFunc = func() error {
		var errs []error
		for _, s := range srvs {
			errs = append(errs, s.Stop())
		}
		os.RemoveAll(dir)
		return errors.Join(errs...)
	}
	if err := errors.Join(errs...); err != nil {
		cl.Stop()
		return nil, err
	}
	cl.RegentTCP = srvs[0].RegentTCP
	probes := make(clusterProbe, n)
	for i, s := range srvs {
		probes[i] = procProbe(s.Pid)
	}
	cl.probe = probes
	if err := waitLeaders(ctx, cl.RegentTCP, 60*time.Second); err != nil {
		cl.Stop()
		return nil, err
	}
	return cl, nil
}

// waitLeaders waits until the broker at addr knows a leader for every
// shard and then, for up to leadersSettle more, until the leaders have
// not moved for leadersQuiet. A broker that won a shard's first election
// hands the shard to its preferred leader (the first of its replica set)
// about 3 s after taking it over, which in a measured round meant
// not_leader answers and a pause in the middle of it: the rounds measure
// the cluster as it runs, not its start.
func waitLeaders(ctx context.Context, addr string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		return fmt.Errorf("bench: the cluster: %w", err)
	}
	defer c.Close()
	var led, moved time.Time
	var last []string
	for {
		m, err := c.Cluster(ctx)
		if err == nil && len(m.Owners) > 0 && !slices.Contains(m.Owners, "") {
			now := time.Now()
			if led.IsZero() {
				led = now
			}
			if !slices.Equal(m.Owners, last) {
				last, moved = m.Owners, now
			}
			if now.Sub(moved) >= leadersQuiet || now.Sub(led) >= leadersSettle {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: not every shard of the cluster has a leader within %v (%v)", d, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// clusterProbe sums its processes' CPU time and resident sets (the memory
// a cluster on one machine costs).
type clusterProbe []procProbe

func (c clusterProbe) CPU() (time.Duration, error) {
	var sum time.Duration
	for _, p := range c {
		v, err := p.CPU()
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

func (c clusterProbe) PeakRSS() (int64, error) { return c.sum(procProbe.PeakRSS) }

func (c clusterProbe) RSS() (int64, error) { return c.sum(procProbe.RSS) }

func (c clusterProbe) sum(f func(procProbe) (int64, error)) (int64, error) {
	var sum int64
	for _, p := range c {
		v, err := f(p)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}
