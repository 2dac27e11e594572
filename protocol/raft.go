package protocol

// RaftRequest carries Raft messages of a cluster's shard groups from one
// broker to another (1.7): the link between the replicas of a shard. Each
// message is a go.etcd.io/raft/v3 raftpb.Message in its protobuf form, which
// this package does not look into. A server that takes the batch does not
// answer it (1.9; Raft has its own answers), and answers a refusal with an
// error; a 1.7 or 1.8 server answered a taken batch with an empty
// RaftReply.
//
//	uv from | uv n × (uv shard | bytes message)
type RaftRequest struct {
	From uint64 // the sending broker's Raft id
	Msgs []RaftMessage
	arena
}

// RaftMessage is one Raft message of one shard's group.
type RaftMessage struct {
	Shard uint32
	Data  []byte
}

// RaftReply answered a RaftRequest a 1.7 or 1.8 server took; its body is
// empty.
type RaftReply struct{ empty }

func (*RaftRequest) Op() Op        { return OpRaft }
func (*RaftRequest) IsReply() bool { return false }
func (*RaftReply) Op() Op          { return OpRaft }
func (*RaftReply) IsReply() bool   { return true }

func (r *RaftRequest) AppendBody(dst []byte) []byte {
	dst = appendUv(dst, r.From)
	dst = appendUv(dst, uint64(len(r.Msgs)))
	for i := range r.Msgs {
		dst = appendUv(dst, uint64(r.Msgs[i].Shard))
		dst = appendBytes(dst, r.Msgs[i].Data)
	}
	return dst
}

func (r *RaftRequest) Decode(body []byte) error {
	d := newDec(body, &r.arena)
	r.From = d.uv()
	r.Msgs = resize(r.Msgs, d.count(2))
	for i := range r.Msgs {
		r.Msgs[i].Shard = d.uv32()
		r.Msgs[i].Data = d.bytes()
	}
	return d.finish("raft request")
}

// AppendRaftRequest appends a whole Raft request frame.
func AppendRaftRequest(dst []byte, id uint64, r *RaftRequest) []byte {
	return AppendFrame(dst, id, r)
}

// AppendRaftReply appends a whole Raft reply frame.
func AppendRaftReply(dst []byte, id uint64) []byte {
	return AppendFrame(dst, id, &RaftReply{})
}
