package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/regentmq/regent/client"
)

func init() { register(clusterCmd) }

func clusterCmd(a *app) *cobra.Command {
	c := &cobra.Command{Use: "cluster", Short: "a cluster's brokers, controller and shard owners (status)"}
	st := &cobra.Command{Use: "status", Short: "the cluster's members, controller, shard owners and etcd's health, as the broker at --addr knows them",
		Args: posArgs(0, 0),
		Long: `Ask the broker at --addr for its cluster's shard map: each broker with its
addresses, whether it is up and how many shards it owns, the elected
controller, and the map's epoch. Each broker's /health then says whether
etcd answers it. A broker that runs alone says so.`}
	st.Run = a.opRun(func(o *opCmd, _ []string) int { return clusterStatus(o) })
	c.AddCommand(st)
	return c
}

func clusterStatus(o *opCmd) int {
	c, err := o.dial(context.Background())
	if err != nil {
		return o.fail(err)
	}
	defer c.Close()
	ctx, cancel := o.ctx()
	defer cancel()
	m, err := c.Cluster(ctx)
	if err != nil {
		return o.fail(err)
	}
	if m.Name == "" {
		if *o.json {
			return o.emit(map[string]any{"cluster": ""})
		}
		fmt.Fprintln(o.stdout, "this broker runs alone (no --cluster)")
		return exitOK
	}
	etcd := make([]string, len(m.Brokers))
	for i, b := range m.Brokers {
		etcd[i] = etcdHealth(ctx, b)
	}
	if *o.json {
		brokers := make([]map[string]any, len(m.Brokers))
		for i, b := range m.Brokers {
			brokers[i] = map[string]any{"id": b.ID, "tcp": b.TCP, "http": b.HTTP, "live": b.Live, "shards": b.Shards, "etcd": etcd[i]}
		}
		return o.emit(map[string]any{"cluster": m.Name, "answeredBy": m.Node, "epoch": m.Epoch, "shards": m.Shards,
			"controller": m.Controller, "brokers": brokers, "owners": m.Owners})
	}
	fmt.Fprintf(o.stdout, "cluster %s: %d shards, map epoch %d, controller %s (as %s sees it)\n\n", m.Name, m.Shards, m.Epoch, orNone(m.Controller), m.Node)
	w := table(o.stdout)
	fmt.Fprintln(w, "BROKER\tSTATE\tSHARDS\tTCP\tHTTP\tETCD")
	for i, b := range m.Brokers {
		state := "up"
		if !b.Live {
			state = "DOWN"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", b.ID, state, b.Shards, orNone(b.TCP), orNone(b.HTTP), etcd[i])
	}
	w.Flush()
	if down := downShards(m); down > 0 {
		fmt.Fprintf(o.stdout, "\n%d of %d shards are unavailable until their broker is back\n", down, m.Shards)
	}
	return exitOK
}

// downShards counts the shards without a live owner.
func downShards(m client.ClusterMap) int {
	live := map[string]bool{}
	for _, b := range m.Brokers {
		live[b.ID] = b.Live
	}
	n := 0
	for _, o := range m.Owners {
		if !live[o] {
			n++
		}
	}
	return n
}

// etcdHealth is what a broker's /health says of etcd, or why it could not
// be asked.
func etcdHealth(ctx context.Context, b client.ClusterBroker) string {
	if !b.Live || b.HTTP == "" {
		return "-"
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.HTTP+"/health", nil)
	if err != nil {
		return err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "no answer from /health"
	}
	defer resp.Body.Close()
	var h struct {
		Cluster struct {
			Etcd string `json:"etcd"`
		} `json:"cluster"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || h.Cluster.Etcd == "" {
		return "unknown"
	}
	return strings.ReplaceAll(h.Cluster.Etcd, "\n", " ")
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
