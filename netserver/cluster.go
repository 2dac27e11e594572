package netserver

import (
	"context"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/protocol"
)

// Cluster is what a cluster's broker adds to both doors (nil in their
// configurations: the broker runs alone). The data path needs nothing of
// it: the engine routes pushes, pops and acks itself (engine.Config.Route)
// and refuses a partition of another broker with not_owner or
// unavailable, which the Go client avoids by sending to the owner; the
// HTTP door, whose clients talk to one broker, gets a DataPlane from the
// broker that forwards to the owner (dataplane.go). What the doors ask of
// Cluster are the answers that concern the whole cluster.
type Cluster interface {
	// Metadata is the cluster's shard map as this broker knows it. It is
	// called on an event loop and must not block: the broker keeps the
	// answer ready, and its callers do not modify it.
	Metadata() *protocol.MetadataReply
	// Configured records a queue's options, as they stand on this broker
	// after a configure, for the whole cluster, and returns once every
	// broker that is up applied them (one that is down applies them when
	// it starts).
	Configured(ctx context.Context, queue string, o engine.QueueOptions) error
	// DeleteQueue deletes a queue on every broker; it refuses with
	// unavailable while a broker is down (its part would come back). It
	// reports whether any broker had the queue.
	DeleteQueue(ctx context.Context, queue string) (existed bool, err error)
	// Health reports whether the cluster's etcd answers this broker (nil
	// when it does). The data path does not need it: /health reports it
	// beside the broker's own state, which it does not change.
	Health(ctx context.Context) error
}

// ConfigureAcross configures a queue on a broker without one engine (a
// replicated cluster's, whose engines are its led shards'): the name and
// options are checked as an engine checks them, then recorded for the
// whole cluster (Cluster.Configured), which every broker up applies to
// the engines it has before the answer, and an engine built later when
// it is built. A queue has an id per shard's engine there: none is
// answered.
func ConfigureAcross(ctx context.Context, cl Cluster, queue string, o engine.QueueOptions) error {
	if err := engine.CheckQueueName(queue); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	return cl.Configured(ctx, queue, o)
}
