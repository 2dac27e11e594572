package protocol

import "strconv"

// MetadataRequest asks a broker for its cluster's shard map (1.6). Its body
// is empty. A broker that is not in a cluster answers with an empty Cluster.
type MetadataRequest struct{ empty }

// MetadataBroker is one broker of a cluster as clients reach it.
type MetadataBroker struct {
	ID   string
	TCP  string // binary protocol address ("" until it registered one)
	HTTP string // HTTP address ("" if it has none)
	Live bool   // registered now: its shards are served
}

// MetadataReply is a cluster's shard map as the answering broker knows it:
// the shard of a (queue, partition) is cluster.Shard(Seed, queue,
// partition, Shards), and Owners[shard] indexes Brokers (-1: no owner yet).
// Epoch orders maps: a client keeps the newer of two.
//
//	str cluster | str node | sv epoch | i64 seed | uv shards |
//	uv ownerCount × sv owner | uv brokerCount × (str id | str tcp |
//	str http | bool live) | str controller
type MetadataReply struct {
	Cluster    string // "" when the broker runs alone (the rest is then empty)
	Node       string // the answering broker's id
	Epoch      int64
	Seed       uint64
	Shards     uint32
	Owners     []int32
	Brokers    []MetadataBroker
	Controller string // the elected controller's id ("" when none is known)
	arena
}

func (*MetadataRequest) Op() Op        { return OpMetadata }
func (*MetadataRequest) IsReply() bool { return false }
func (*MetadataReply) Op() Op          { return OpMetadata }
func (*MetadataReply) IsReply() bool   { return true }

func (r *MetadataReply) AppendBody(dst []byte) []byte {
	dst = appendStr(dst, r.Cluster)
	dst = appendStr(dst, r.Node)
	dst = appendSv(dst, r.Epoch)
	dst = appendI64(dst, int64(r.Seed))
	dst = appendUv(dst, uint64(r.Shards))
	dst = appendUv(dst, uint64(len(r.Owners)))
	for _, o := range r.Owners {
		dst = appendSv(dst, int64(o))
	}
	dst = appendUv(dst, uint64(len(r.Brokers)))
	for i := range r.Brokers {
		b := &r.Brokers[i]
		dst = appendStr(dst, b.ID)
		dst = appendStr(dst, b.TCP)
		dst = appendStr(dst, b.HTTP)
		dst = appendBool(dst, b.Live)
	}
	return appendStr(dst, r.Controller)
}

func (r *MetadataReply) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.Cluster = d.str()
	r.Node = d.str()
	r.Epoch = d.sv()
	r.Seed = uint64(d.i64())
	r.Shards = d.uv32()
	r.Owners = resize(r.Owners, d.count(1))
	for i := range r.Owners {
		r.Owners[i] = d.sv32()
	}
	r.Brokers = resize(r.Brokers, d.count(4))
	for i := range r.Brokers {
		b := &r.Brokers[i]
		b.ID = d.str()
		b.TCP = d.str()
		b.HTTP = d.str()
		b.Live = d.bool()
	}
	r.Controller = d.str()
	return d.finish("metadata reply")
}

// Check says whether a decoded map can route requests: a cluster with
// shards, one owner per shard, each -1 or a listed broker. Decode checks
// only the wire format; a client checks the map before it acts on it.
func (r *MetadataReply) Check() error {
	if r.Cluster == "" {
		return nil
	}
	if r.Shards == 0 || len(r.Owners) != int(r.Shards) {
		return &Error{Code: CodeMalformed, Msg: "metadata reply: " + strconv.Itoa(len(r.Owners)) + " owners for " + strconv.FormatUint(uint64(r.Shards), 10) + " shards"}
	}
	for _, o := range r.Owners {
		if o < -1 || int(o) >= len(r.Brokers) {
			return &Error{Code: CodeMalformed, Msg: "metadata reply: an owner that is not a listed broker"}
		}
	}
	return nil
}

// AppendMetadataRequest appends a whole Metadata request frame.
func AppendMetadataRequest(dst []byte, id uint64) []byte {
	return AppendFrame(dst, id, &MetadataRequest{})
}

// AppendMetadataReply appends a whole Metadata reply frame.
func AppendMetadataReply(dst []byte, id uint64, r *MetadataReply) []byte {
	return AppendFrame(dst, id, r)
}
