// Package meta keeps a Regent cluster's membership and shard placement in
// etcd (the meta part of CLUSTER.md): which brokers exist and where to
// reach them, which are alive, which one is the controller, and the shard
// map the controller writes. It carries no message, ack or lease: besides
// the keep-alive of its session, a broker writes to etcd when it starts,
// when its session lapses, and (the controller) when the membership
// changes, and the data path never waits on etcd.
//
// # The model
//
// Every broker runs a Node (Start). A Node registers its broker, keeps a
// session lease alive while the process lives, and campaigns to be the
// controller. It also keeps one consistent picture of the whole cluster,
// the View: it reads every key under the cluster's prefix at one revision,
// then follows a single watch of the prefix from the next revision, and
// publishes a new View after each batch of events (Changes wakes whoever
// waits for one). A watch that fails or falls behind a compaction is
// replaced by a new read and a new watch; nothing is missed, since each
// View is rebuilt from the keys, not from a count of events.
//
// The controller, one broker at a time (concurrency.Election), turns the
// registrations into a shard map with cluster.Place whenever the settings,
// the registered brokers or the live set change, and writes it only when
// the owners or the listed brokers differ. A broker that dies keeps its
// shards: in stage 1 their data is on its disk, so they wait for it to
// come back (CLUSTER.md, "Stages"). The first map is the exception that
// lets a cluster start: it spreads the shards over every declared member,
// started or not, so that the placement does not depend on which broker
// came up first. Each write is a transaction that holds only if the map
// is still the one the controller read and its election key still exists
// with the revision it won with: a controller that lost its lease, or was
// deposed by any other means, writes nothing.
//
// Settings (the shard count G, the hash seed, the declared members) are
// fixed by whichever broker creates the cluster; later starts read them
// and ignore their own.
//
// # Keys
//
// Every key of this package lives under the prefix /regent/<cluster>/meta/
// (Node.Prefix); the broker keeps its own records (queue configurations)
// beside it, under /regent/<cluster>/, so that they wake no view:
//
//	key               value                          written by       lifetime
//	settings          JSON {shards, seed, members}   the first start  once, in a transaction (create revision 0)
//	brokers/<id>      JSON cluster.Broker            each start       persistent, rewritten at every start
//	live/<id>         the node id                    each session     under the broker's session lease
//	controller/<hex>  the node id                    the election     under the session lease; lowest create revision leads
//	map               JSON cluster.Map               the controller   persistent; its Epoch is the key's mod revision
//
// The map's Epoch as stored is meaningless: a reader sets it to the key's
// ModRevision, which etcd makes larger at every write, so two maps always
// compare by Epoch.
//
// # Embedded etcd
//
// A voter (Config.Voter) runs an etcd member in its own process, on its
// own peer and client URLs, with its data in Config.DataDir; a restart
// with the same directory rejoins as the same member. Other brokers reach
// the voters through Config.Endpoints. A cluster of three voters answers
// once two are up, so the first voter's Start waits for a second.
package meta
