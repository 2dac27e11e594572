package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/cluster"
)

// The cluster settings of serve: a broker that is one of a cluster's
// (broker.ClusterOptions). Without --cluster the broker runs alone and the
// rest are not read.
var clusterSettings = []setting{
	{"cluster", "REGENT_CLUSTER", "", "the name of the cluster this broker is one of; empty: it runs alone"},
	{"node", "REGENT_NODE", "", "this broker's id in the cluster (letters, digits, '-', '_', '.')"},
	{"peers", "REGENT_PEERS", "", "the cluster's first brokers as id=etcdPeerURL, comma-separated (b1=http://10.0.0.1:2380,...): the embedded etcd's voters, and the brokers the first shard map spreads the shards over"},
	{"etcd-voter", "REGENT_ETCD_VOTER", "false", "true: run an embedded etcd member in this broker (the first three brokers of a cluster), at its --peers URL and --etcd-client-url"},
	{"etcd-client-url", "REGENT_ETCD_CLIENT_URL", "", "the embedded etcd member's client URL (http://10.0.0.1:2379); with --etcd-voter"},
	{"etcd-dir", "REGENT_ETCD_DIR", "", "the embedded etcd member's directory; default etcd/ in --data"},
	{"etcd-endpoints", "REGENT_ETCD_ENDPOINTS", "", "etcd client URLs, comma-separated, for a broker that is not a voter (or an external etcd)"},
	{"shards", "REGENT_SHARDS", strconv.Itoa(cluster.DefaultShards), "the cluster's number of shards, a power of two; read once, when the cluster is created"},
	{"replicas", "REGENT_REPLICAS", "0", "replicas of every shard (1, 3 or 5), each shard a Raft group over its brokers' journals; 0: each shard has one owner. Read once, when the cluster is created"},
	{"advertise-tcp", "REGENT_ADVERTISE_TCP", "", "the binary protocol address clients and brokers reach this one at; default --tcp (with this machine's name when it has no host)"},
	{"advertise-http", "REGENT_ADVERTISE_HTTP", "", "the HTTP address others reach this one at; default --http, likewise"},
	{"link-token", "REGENT_LINK_TOKEN", "", "with authentication on, the token this broker presents to the other brokers' doors (an admin token they accept); default: one minted from --jwt-secret, required with keys that only verify"},
}

func init() {
	serveSettings = append(serveSettings, clusterSettings...)
	hiddenSettings["link-token"] = true
}

// clusterFrom reads the cluster settings; nil when --cluster is empty.
func clusterFrom(s *settings, dataDir string) (*broker.ClusterOptions, error) {
	name := s.get("cluster")
	if name == "" {
		for _, st := range clusterSettings[1:] {
			if s.given(st.flag) && st.flag != "shards" && st.flag != "replicas" {
				return nil, fmt.Errorf("--%s needs --cluster", st.flag)
			}
		}
		return nil, nil
	}
	o := &broker.ClusterOptions{Name: name, Node: s.get("node"),
		AdvertiseTCP: s.get("advertise-tcp"), AdvertiseHTTP: s.get("advertise-http"), LinkToken: s.get("link-token")}
	if o.Node == "" {
		return nil, fmt.Errorf("--cluster needs --node, this broker's id")
	}
	var err error
	if o.Shards, err = strconv.Atoi(s.get("shards")); err != nil {
		return nil, fmt.Errorf("--shards: want a number")
	}
	if err := cluster.CheckShards(o.Shards); err != nil {
		return nil, fmt.Errorf("--shards: %w", err)
	}
	if o.Replicas, err = strconv.Atoi(s.get("replicas")); err != nil {
		return nil, fmt.Errorf("--replicas: want a number")
	}
	if o.Replicas != 0 {
		if err := cluster.CheckReplicas(o.Replicas); err != nil {
			return nil, fmt.Errorf("--replicas: %w", err)
		}
	}
	var initial []string
	myPeer := ""
	for _, p := range splitList(s.get("peers")) {
		id, url, ok := strings.Cut(p, "=")
		if !ok || id == "" || url == "" {
			return nil, fmt.Errorf("--peers: want id=etcdPeerURL, not %q", p)
		}
		o.Members = append(o.Members, id)
		initial = append(initial, p)
		if id == o.Node {
			myPeer = url
		}
	}
	if o.Voter, err = strconv.ParseBool(s.get("etcd-voter")); err != nil {
		return nil, fmt.Errorf("--etcd-voter: want true or false")
	}
	o.Endpoints = splitList(s.get("etcd-endpoints"))
	if o.Voter {
		if myPeer == "" {
			return nil, fmt.Errorf("--etcd-voter: --peers must give this broker's (%s) etcd peer URL", o.Node)
		}
		o.PeerURL, o.ClientURL, o.InitialCluster = myPeer, s.get("etcd-client-url"), strings.Join(initial, ",")
		if o.ClientURL == "" {
			return nil, fmt.Errorf("--etcd-voter needs --etcd-client-url")
		}
		if o.EtcdDir = s.get("etcd-dir"); o.EtcdDir == "" {
			o.EtcdDir = filepath.Join(dataDir, "etcd")
		}
	} else if len(o.Endpoints) == 0 {
		return nil, fmt.Errorf("--cluster needs --etcd-voter or --etcd-endpoints")
	}
	return o, nil
}

// clusterBanner is what serve prints of the cluster at start.
func clusterBanner(o *broker.ClusterOptions) string {
	if o == nil {
		return ""
	}
	etcd := "etcd " + strings.Join(o.Endpoints, ",")
	if o.Voter {
		etcd = "embedded etcd voter at " + o.ClientURL
	}
	replicas := ""
	if o.Replicas > 0 {
		replicas = fmt.Sprintf(", %d replicas per shard", o.Replicas)
	}
	return fmt.Sprintf("  cluster %s, node %s (%s%s)\n", o.Name, o.Node, etcd, replicas)
}
