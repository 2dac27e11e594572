package meta

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// startEtcd starts this voter's etcd member and waits until it serves
// clients, which needs a majority of the voters up.
func startEtcd(ctx context.Context, cfg *Config, lg *zap.Logger) (*embed.Etcd, error) {
	peer, err := parseURL(cfg.PeerURL)
	if err != nil {
		return nil, err
	}
	client, err := parseURL(cfg.ClientURL)
	if err != nil {
		return nil, err
	}
	ec := embed.NewConfig()
	ec.Name = cfg.Node
	ec.Dir = cfg.DataDir
	ec.ListenPeerUrls = []url.URL{*peer}
	ec.AdvertisePeerUrls = []url.URL{*peer}
	ec.ListenClientUrls = []url.URL{*client}
	ec.AdvertiseClientUrls = []url.URL{*client}
	ec.InitialCluster = cfg.InitialCluster
	if ec.InitialCluster == "" {
		ec.InitialCluster = cfg.Node + "=" + cfg.PeerURL
	}
	ec.InitialClusterToken = cfg.Cluster
	// A member that has run before finds its identity and the cluster's
	// in its write-ahead log; etcd then ignores the initial cluster.
	ec.ClusterState = embed.ClusterStateFlagNew
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "member", "wal")); err == nil {
		ec.ClusterState = embed.ClusterStateFlagExisting
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("meta: etcd data directory: %w", err)
	}
	// Revisions older than an hour are compacted, so the store does not
	// keep every value ever written; a watch that falls behind reads the
	// prefix again (view.go).
	ec.AutoCompactionMode = embed.CompactorModePeriodic
	ec.AutoCompactionRetention = "1h"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg) // zaplog.go: into the broker's log

	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("meta: starting etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("meta: etcd: %w", err)
	case <-e.Server.StopNotify():
		e.Close()
		return nil, errors.New("meta: etcd stopped before it was ready")
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("meta: waiting for etcd to be ready (a majority of the voters up): %w", context.Cause(ctx))
	}
}

// reportEtcd logs what the embedded etcd reports failing while it runs;
// it returns when the member is closed.
func (n *Node) reportEtcd() {
	defer n.etcdWG.Done()
	for err := range n.etcd.Err() {
		if err != nil {
			n.log.Error("embedded etcd failed", "err", err)
		}
	}
}

// clientConfig is the configuration of the node's etcd client: it logs
// into the broker's log (zaplog.go), and a connection that stops answering
// is dropped within seconds so the client tries another endpoint.
func clientConfig(endpoints []string, lg *zap.Logger) (clientv3.Config, error) {
	return clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               lg,
	}, nil
}
