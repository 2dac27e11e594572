package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/regentmq/regent/cluster"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The keys under the cluster's prefix (doc.go, "Keys").
const (
	keySettings   = "settings"
	keyBrokers    = "brokers/"
	keyLive       = "live/"
	keyController = "controller" // the election's prefix; its keys are controller/<lease>
	keyMap        = "map"
)

// settings are the cluster's, fixed at its creation.
type settings struct {
	Shards  int      `json:"shards"`
	Seed    uint64   `json:"seed"`
	Members []string `json:"members"`
	// Replicas is the replication factor of every shard (stage 2); 0: the
	// shards are not replicated (stage 1: one owner each).
	Replicas int `json:"replicas,omitempty"`
}

func (s *settings) check() error {
	if err := cluster.CheckShards(s.Shards); err != nil {
		return err
	}
	if s.Replicas != 0 {
		if err := cluster.CheckReplicas(s.Replicas); err != nil {
			return err
		}
	}
	for _, id := range s.Members {
		if err := checkID(id); err != nil {
			return err
		}
	}
	return nil
}

// candidate is one key of the controller's election: the broker with the
// lowest create revision is the controller.
type candidate struct {
	id  string
	rev int64 // the key's CreateRevision
}

// state is what a node knows of the cluster's keys at one revision. A
// state is never changed once a View points to it: each batch of events
// changes a clone.
type state struct {
	rev        int64
	settings   *settings                 // nil: not created yet (or unreadable)
	brokers    map[string]cluster.Broker // by id
	live       map[string]bool
	mapRev     int64                // the map key's ModRevision, 0 if none
	cmap       *cluster.Map         // the map, nil if none or unreadable
	candidates map[string]candidate // by election key
}

func newState() *state {
	return &state{
		brokers:    map[string]cluster.Broker{},
		live:       map[string]bool{},
		candidates: map[string]candidate{},
	}
}

func (st *state) clone() *state {
	c := *st
	c.brokers = maps.Clone(st.brokers)
	c.live = maps.Clone(st.live)
	c.candidates = maps.Clone(st.candidates)
	return &c
}

// apply records one key's put (deleted false) or deletion. A value that
// does not decode counts as absent and is logged to warn.
func (n *Node) apply(st *state, kv *mvccpb.KeyValue, deleted bool) {
	name, ok := strings.CutPrefix(string(kv.Key), n.prefix)
	if !ok {
		return
	}
	bad := func(err error) {
		n.log.Warn("unreadable cluster record ignored", "key", string(kv.Key), "revision", kv.ModRevision, "err", err)
	}
	switch {
	case name == keySettings:
		st.settings = nil
		if !deleted {
			var s settings
			err := json.Unmarshal(kv.Value, &s)
			if err == nil {
				err = s.check()
			}
			if err != nil {
				bad(err)
				return
			}
			st.settings = &s
		}
	case strings.HasPrefix(name, keyBrokers):
		id := name[len(keyBrokers):]
		delete(st.brokers, id)
		if !deleted {
			var b cluster.Broker
			if err := json.Unmarshal(kv.Value, &b); err != nil {
				bad(err)
				return
			}
			if b.ID != id {
				bad(fmt.Errorf("record of %q under the key of %q", b.ID, id))
				return
			}
			st.brokers[id] = b
		}
	case strings.HasPrefix(name, keyLive):
		id := name[len(keyLive):]
		if deleted {
			delete(st.live, id)
		} else {
			st.live[id] = true
		}
	case strings.HasPrefix(name, keyController+"/"):
		key := string(kv.Key)
		if deleted {
			delete(st.candidates, key)
		} else {
			st.candidates[key] = candidate{id: string(kv.Value), rev: kv.CreateRevision}
		}
	case name == keyMap:
		st.mapRev, st.cmap = 0, nil
		if !deleted {
			st.mapRev = kv.ModRevision
			var m cluster.Map
			err := json.Unmarshal(kv.Value, &m)
			m.Epoch = kv.ModRevision
			if err == nil {
				err = m.Check()
			}
			if err != nil {
				bad(err)
				return
			}
			st.cmap = &m
		}
	}
}

// controller is the node id of the election's leader, "" if none.
func (st *state) controller() string {
	var lead candidate
	for _, c := range st.candidates {
		if lead.rev == 0 || c.rev < lead.rev {
			lead = c
		}
	}
	return lead.id
}

// view builds the View of st.
func (st *state) view() *View {
	v := &View{Live: st.live, Controller: st.controller(), Revision: st.rev, st: st}
	if st.cmap != nil {
		v.Map = *st.cmap
	}
	return v
}

// watch keeps the view: a read of the whole prefix, then a watch from the
// next revision, and again after any failure of either.
func (n *Node) watch() {
	defer n.wg.Done()
	b := backoff{}
	for {
		err := n.follow(&b)
		if n.stopping() {
			return
		}
		n.log.Warn("cluster watch interrupted; reading again", "err", err)
		if !b.wait(n.ctx) {
			return
		}
	}
}

// follow reads the prefix and publishes its view, then publishes a new one
// after each batch of the watch that follows, until the watch fails.
func (n *Node) follow(b *backoff) error {
	resp, err := n.cli.Get(n.ctx, n.prefix, clientv3.WithPrefix())
	if err != nil {
		return err
	}
	st := newState()
	for _, kv := range resp.Kvs {
		n.apply(st, kv, false)
	}
	st.rev = resp.Header.Revision
	n.publish(st.view())
	b.reset()

	// Without a leader the member cannot say what changed: the watch then
	// fails instead of waiting silently, and the read after it waits for a
	// leader.
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(n.ctx))
	defer cancel()
	for wr := range n.cli.Watch(ctx, n.prefix, clientv3.WithPrefix(), clientv3.WithRev(st.rev+1)) {
		if err := wr.Err(); err != nil {
			return err
		}
		if len(wr.Events) == 0 {
			continue
		}
		st = st.clone()
		for _, ev := range wr.Events {
			n.apply(st, ev.Kv, ev.Type == clientv3.EventTypeDelete)
			st.rev = max(st.rev, ev.Kv.ModRevision)
		}
		n.publish(st.view())
	}
	if err := n.ctx.Err(); err != nil {
		return err
	}
	return errors.New("meta: the watch closed")
}

// backoff spaces retries of a failing call: 100 ms doubling up to 2 s.
type backoff struct{ d time.Duration }

func (b *backoff) reset() { b.d = 0 }

// wait sleeps the next delay; false if ctx ended first.
func (b *backoff) wait(ctx context.Context) bool {
	b.d = min(max(2*b.d, 100*time.Millisecond), 2*time.Second)
	t := time.NewTimer(b.d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
