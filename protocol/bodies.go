package protocol

// NewRequest returns a new, empty request value of opcode op, or nil for an
// unknown opcode. Servers that decode into reused values keep one of each
// instead.
func NewRequest(op Op) Body {
	switch op {
	case OpHello:
		return &HelloRequest{}
	case OpPing:
		return &PingRequest{}
	case OpAuth:
		return &AuthRequest{}
	case OpPush:
		return &PushRequest{}
	case OpPop:
		return &PopRequest{}
	case OpAck:
		return &AckRequest{}
	case OpLeaseExtend:
		return &LeaseExtendRequest{}
	case OpTransaction:
		return &TransactionRequest{}
	case OpConfigure:
		return &ConfigureRequest{}
	case OpQueueInfo:
		return &QueueInfoRequest{}
	case OpQueueList:
		return &QueueListRequest{}
	case OpDeleteQueue:
		return &DeleteQueueRequest{}
	case OpSeek:
		return &SeekRequest{}
	case OpDeleteGroup:
		return &DeleteGroupRequest{}
	case OpDLQList:
		return &DLQListRequest{}
	case OpStats:
		return &StatsRequest{}
	case OpDLQRedrive:
		return &DLQRedriveRequest{}
	case OpDLQPurge:
		return &DLQPurgeRequest{}
	case OpBrowse:
		return &BrowseRequest{}
	case OpQueryRegister:
		return &QueryRegisterRequest{}
	case OpCycle:
		return &CycleRequest{}
	case OpStateGet:
		return &StateGetRequest{}
	case OpMetadata:
		return &MetadataRequest{}
	case OpRaft:
		return &RaftRequest{}
	}
	return nil
}

// NewReply returns a new, empty reply value of opcode op, or nil for an
// unknown opcode.
func NewReply(op Op) Body {
	switch op {
	case OpHello:
		return &HelloReply{}
	case OpPing:
		return &PingReply{}
	case OpAuth:
		return &AuthReply{}
	case OpPush:
		return &PushReply{}
	case OpPop:
		return &PopReply{}
	case OpAck:
		return &AckReply{}
	case OpLeaseExtend:
		return &LeaseExtendReply{}
	case OpTransaction:
		return &TransactionReply{}
	case OpConfigure:
		return &ConfigureReply{}
	case OpQueueInfo:
		return &QueueInfoReply{}
	case OpQueueList:
		return &QueueListReply{}
	case OpDeleteQueue:
		return &DeleteQueueReply{}
	case OpSeek:
		return &SeekReply{}
	case OpDeleteGroup:
		return &DeleteGroupReply{}
	case OpDLQList:
		return &DLQListReply{}
	case OpStats:
		return &StatsReply{}
	case OpDLQRedrive:
		return &DLQRedriveReply{}
	case OpDLQPurge:
		return &DLQPurgeReply{}
	case OpBrowse:
		return &BrowseReply{}
	case OpQueryRegister:
		return &QueryRegisterReply{}
	case OpCycle:
		return &CycleReply{}
	case OpStateGet:
		return &StateGetReply{}
	case OpMetadata:
		return &MetadataReply{}
	case OpRaft:
		return &RaftReply{}
	}
	return nil
}
