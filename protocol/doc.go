// Package protocol is Regent's wire format: the frame header, the opcodes,
// the request and reply bodies, and the error codes, with encoders that
// append into caller buffers and decoders that never allocate past what the
// input justifies. It imports the standard library only; the server maps
// these types to the engine's and back.
//
// # Model
//
// A connection carries frames both ways. The client opens with Hello, then
// sends requests, each with a request id of its choosing; the server answers
// every request with one reply carrying the same opcode and id, in any order
// (a long-poll Pop answers later than the Push sent after it), so clients
// pipeline requests and match replies by id. A request the server refuses
// as a whole is answered by an error reply (flags reply|error) whose body is
// a code and a message; refusals of single items (one push, one ack) are
// normal replies with a code per item.
//
// # Frame
//
// All integers are big-endian.
//
//	offset  size  field
//	0       4     length: bytes after this field (10 + body length)
//	4       1     opcode
//	5       1     flags
//	6       8     request id (the server copies it into the reply)
//	14      n     body (layout by opcode and direction, below)
//
// A frame is at most MaxFrame bytes, length field included (DefaultMaxFrame,
// 16 MiB, unless configured; the server tells its cap in the Hello reply). A
// reader rejects a larger length from the 14 header bytes alone, before it
// buffers anything for the body (ReadFrame, Framer, Reader).
//
// # Flags
//
//	bit  name        meaning
//	0    FlagReply   the frame is a reply (server to client)
//	1    FlagError   the reply is an error: body = ErrorReply (only with bit 0)
//	2-7  -           must be zero (a frame with them set is malformed)
//
// # Opcodes
//
//	op    name          request                     reply
//	0x01  hello         HelloRequest                HelloReply
//	0x02  ping          PingRequest (empty)         PingReply (empty)
//	0x03  auth          AuthRequest                 AuthReply             (1.2)
//	0x10  push          PushRequest                 PushReply
//	0x11  pop           PopRequest                  PopReply
//	0x12  ack           AckRequest                  AckReply
//	0x13  lease_extend  LeaseExtendRequest          LeaseExtendReply
//	0x14  transaction   TransactionRequest          TransactionReply
//	0x20  configure     ConfigureRequest            ConfigureReply
//	0x21  queue_info    QueueInfoRequest            QueueInfoReply
//	0x22  queue_list    QueueListRequest            QueueListReply
//	0x23  delete_queue  DeleteQueueRequest          DeleteQueueReply
//	0x24  seek          SeekRequest                 SeekReply
//	0x25  delete_group  DeleteGroupRequest          DeleteGroupReply
//	0x26  dlq_list      DLQListRequest              DLQListReply
//	0x27  stats         StatsRequest (empty)        StatsReply
//	0x28  dlq_redrive   DLQRedriveRequest           DLQRedriveReply
//	0x29  dlq_purge     DLQPurgeRequest             DLQPurgeReply
//	0x2A  browse        BrowseRequest               BrowseReply           (1.3)
//	0x2B  query_register QueryRegisterRequest       QueryRegisterReply    (1.4)
//	0x2C  cycle         CycleRequest                CycleReply            (1.4)
//	0x2D  state_get     StateGetRequest             StateGetReply         (1.4)
//	0x2E  metadata      MetadataRequest (empty)     MetadataReply         (1.6)
//	0x2F  raft          RaftRequest                 none (1.9; see below) (1.7)
//
// A Raft request is one-way since 1.9: a server takes it without an
// answer, and answers only a refusal (an error). A 1.7 or 1.8 server
// answers a taken one with an empty RaftReply.
//
// An unknown opcode is answered with CodeUnknownOp (the Regent server then
// closes the connection: a client that sends one speaks something else). A frame above the cap, or a header no version sends
// (length < 10, undefined flags), is answered if possible and the
// connection is closed: the stream cannot be trusted after it.
//
// # Field types
//
//	u8, u16, u32, i64   fixed width, big-endian; i64 is two's complement
//	uv                  unsigned LEB128 varint (encoding/binary.AppendUvarint)
//	sv                  zig-zag signed varint (encoding/binary.AppendVarint)
//	bool                u8: 0 or 1, anything else is malformed
//	str, bytes          uv length, then the bytes (str is UTF-8 by convention)
//	uuid                16 raw bytes
//	T...                uv count, then count × T
//
// Times are i64 Unix nanoseconds (0 = none); durations are uv milliseconds
// (fields named ...Ms) or seconds (...Seconds). Fields declared uv but held
// in 32 bits (batch, counts, retry counts) are malformed above 2^32-1.
//
// # Bodies
//
// Each body is its fields in the order shown, nothing before or after: a
// body with bytes left over is malformed (a later minor version adds fields
// only after Hello shows both sides know them).
//
//	ErrorReply          u16 code | str message
//
//	HelloRequest        u16 major | u16 minor | str clientName | [u32 maxFrame]   (1.1)
//	HelloReply          u16 major | u16 minor | str serverName | u32 maxFrame | uv maxInFlight
//
//	AuthRequest         str token                                          (1.2)
//	AuthReply           bool enforced | u8 role | i64 expires | str subject
//
//	PushRequest         PushItem...
//	  PushItem          str queue | str partition | str transactionId | str traceId | bytes payload
//	PushReply           PushResult...
//	  PushResult        u8 status | uuid messageId | uuid partitionId | uv offset |
//	                    str transactionId | u16 code | str error
//
//	PopRequest          str queue | str partition | str group | u8 subscription |
//	                    i64 from | uv batch | uv partitions | bool wait | uv timeoutMs | bool autoAck |
//	                    str namespace | str task   (queue "": any queue carrying them, by priority)
//	PopReply            str queue | str group | Message...
//	  Message           uuid id | str transactionId | str traceId | bytes payload |
//	                    i64 createdAt | str partition | uuid partitionId | uv offset |
//	                    uuid leaseId | i64 leaseExpires | uv retryCount
//	  CompactMessage    (1.5: in place of Message, to a client that said 1.5)
//	                    uuid id | uv txnTag | [transactionId] | str traceId | bytes payload |
//	                    i64 createdAt | uv partTag | [partition | uuid partitionId] | uv offset |
//	                    uv retryTag | [uuid leaseId | i64 leaseExpires]
//	                    (a tag 0: the id's text, or the previous message's partition;
//	                    n: n-1 bytes follow; retryTag = retryCount<<1 | 1 when the
//	                    lease is the previous message's and is left out)
//
//	AckRequest          AckItem...
//	  AckItem           uuid partitionId | bool hasOffset | uv offset | uuid messageId |
//	                    str transactionId | uuid leaseId | str group | u8 status | str error
//	AckReply            AckResult...
//	  AckResult         u16 code | str error | uv offset | bool leaseReleased | bool deadLettered
//
//	LeaseExtendRequest  uuid leaseId | uv durationMs
//	LeaseExtendReply    i64 expires
//
//	TransactionRequest  AckItem... | PushItem...
//	TransactionReply    u16 code | str error | AckResult... | PushResult...
//
//	ConfigureRequest    str queue | QueueOptions
//	ConfigureReply      uuid queueId | uuid partitionId | bool created | QueueOptions
//	  QueueOptions      uv set | uv leaseTimeMs | uv retryLimit | uv retryDelayMs |
//	                    uv delayedProcessingMs | uv windowBufferMs | uv maxSize | uv ttlMs |
//	                    bool retentionEnabled | uv retentionSeconds |
//	                    uv completedRetentionSeconds | uv maxWaitTimeSeconds | sv priority |
//	                    bool encryptionEnabled | bool deadLetterQueue | bool dlqAfterMaxRetries |
//	                    uv maxPartitions | str namespace | str task
//
//	QueueInfoRequest    str queue | [uuid after | uv limit]            (page fields: 1.2)
//	QueueInfoReply      QueueSummary | PartitionInfo... | [bool more]  (more: 1.2, only when true)
//	QueueListRequest    [str after | uv limit]                        (1.2; empty before)
//	QueueListReply      QueueSummary... | [bool more]                 (more: 1.2, only when true)
//	  QueueSummary      str name | uuid id | i64 created | QueueOptions | uv partitionCount |
//	                    uv messages | str... groups | uv deadLetters
//	  PartitionInfo     str name | uuid id | uv low | uv next | i64 oldest | i64 newest |
//	                    i64 created | GroupCursor...
//	  GroupCursor       str group | uv cursor | uv lag | bool leased | uuid leaseId |
//	                    i64 leaseExpires | i64 blockedUntil | uv retrying
//
//	DeleteQueueRequest  str queue
//	DeleteQueueReply    bool existed
//	SeekRequest         str queue | str group | str partition | bool toEnd | i64 time
//	SeekReply           uv partitionsMoved
//	DeleteGroupRequest  str queue | str group
//	DeleteGroupReply    uv queuesAffected
//
//	DLQListRequest      str queue | str group | str partition | i64 from | i64 to |
//	                    uv limit | uv offset
//	DLQListReply        uv total | DLQEntry...
//	  DLQEntry          uuid id | str queue | str group | Message | str error | uv retryCount | i64 failedAt
//	DLQRedriveRequest   DLQSelect
//	DLQPurgeRequest     DLQSelect
//	  DLQSelect         str queue | str group | str partition | i64 from | i64 to | uv count | count × uuid id
//	DLQRedriveReply     uv count | count × (uuid entry | uuid messageId | uuid partitionId | str queue | str partition)
//	DLQPurgeReply       uv purged
//
//	BrowseRequest       str queue | str partition | u8 start | uv n | uv limit | uv maxPayload |
//	                    uuid resume | uv resumeOffset                                    (1.3)
//	BrowseReply         str queue | BrowseMessage... | BrowseGap... | bool more |
//	                    uuid nextPartition | uv nextOffset
//	  BrowseMessage     uuid id | str transactionId | str traceId | i64 createdAt | str partition |
//	                    uuid partitionId | uv offset | uv size | bytes payload | str payloadError
//	  BrowseGap         uv before | uuid partitionId | str partition | uv first | uv last | u8 reason
//
//	QueryRegisterRequest str name | str sourceQueue | str sinkQueue | str configHash | bool reset (1.4)
//	QueryRegisterReply  uuid queryId | bool fresh | bool reset
//	CycleRequest        uuid queryId | uuid partitionId | str group | StateOp... | PushItem... |
//	                    bool hasAck | str ackTransactionId | uuid ackLeaseId | bool deadLetter |
//	                    str ackError | uv ackCount | bool releaseLease                 (1.4)
//	  StateOp           u8 kind | str key | bytes value | bool hasWindowEnd | sv windowEnd
//	CycleReply          str queue | uv stateOpsApplied | PushResult... | bool hasAck |
//	                    uv ackCount | bool leaseReleased | bool deadLettered
//	StateGetRequest     uuid queryId | uuid partitionId | str... keys | str prefix |
//	                    bool hasRipe | sv ripeAtOrBefore                               (1.4)
//	StateGetReply       (str key | bytes value | i64 updatedAt)...
//
//	StatsRequest        (empty)
//	StatsReply          uv queues | uv pushed | uv popped | uv acked | uv deadLettered |
//	                    sv cacheBytes | uv connections | uv fsyncs | uv fsyncNanos |
//	                    uv bytesWritten | uv entries | (str name | sv value)...
//
// Enumerations (their numbers are the engine's):
//
//	push status     1 queued, 2 duplicate, 3 failed
//	ack status      1 completed, 2 failed, 3 retry, 4 dlq
//	subscription    0 all, 1 new, 2 from
//	browse start    0 from offset n, 1 the last n messages of each partition
//	gap reason      1 retention, 2 lost (journal damage), 3 unreadable, 4 deleted
//	state op kind   1 upsert, 2 delete
//	option set bit  0 leaseTime, 1 retryLimit, 2 retryDelay, 3 delayedProcessing,
//	                4 windowBuffer, 5 maxSize, 6 ttl, 7 retentionEnabled,
//	                8 retentionSeconds, 9 completedRetentionSeconds,
//	                10 maxWaitTimeSeconds, 11 priority, 12 encryptionEnabled,
//	                13 deadLetterQueue, 14 dlqAfterMaxRetries, 15 maxPartitions,
//	                16 namespace, 17 task, 31 keepUnset (1.4: in a
//	                Configure, the options whose bit is clear keep their
//	                values); any other bit is malformed
//
// Decoders check structure only: an undefined status or mode decodes, and
// the receiver refuses it (CodeInvalid) with the Valid methods. In a
// Configure, an option whose set bit is clear goes back to the server's
// default, or keeps its value when keepUnset is set; replies that echo
// options set every option's bit.
//
// # Error codes
//
//	code  name                 HTTP  meaning
//	0     ok                   200   success
//	1     invalid              400   a request the broker cannot act on
//	2     queue_not_found      404   no such queue
//	3     partition_not_found  404   no such partition
//	4     group_not_found      404   the group has never read the queue
//	5     message_not_found    404   no such message id, offset or transactionId
//	6     lease_invalid        409   not the live lease of that (group, partition)
//	7     lease_required       400   an ack without a lease on a server that checks leases
//	8     not_in_flight        409   the message is not in flight for that group
//	9     already_acked        409   the message took another ack in this lease
//	10    too_large            413   a payload or request above the broker's limits
//	11    queue_full           429   the queue is at its maxSize
//	12    closed               503   the broker is shutting down
//	13    journal              503   the journal failed
//	14    txn_aborted          409   a transaction was not applied
//	15    unknown_op           400   an opcode the server does not know
//	16    frame_too_large      413   a frame above the maximum frame size
//	17    malformed            400   a frame or body that breaks this format
//	18    overloaded           429   too many requests in flight
//	19    version_mismatch     400   another major protocol version
//	20    internal             500   a server bug
//	21    encryption           500   a sealed payload cannot be sealed or opened
//	22    unauthenticated      401   no valid token (none, expired, refused)   (1.2)
//	23    forbidden            403   the token's role does not allow it        (1.2)
//	24    damaged              500   stored data of a message went bad          (1.2)
//	25    conflict             409   a streams query's config hash changed      (1.4)
//	26    query_not_found      404   no streams query with that id              (1.4)
//
// Refused acks keep their 409 here, but the HTTP bridge answers an ack
// request with 200 and the refusals inside (Queen's API does). QueueFull is
// 429, not 507: see the comment on the code table.
//
// # Authentication (1.2)
//
// A broker with auth on wants a token, a JWT (the bearer token of Queen's
// HTTP API), on every connection. The client sends it in an Auth frame after
// Hello, not in Hello: a Hello with trailing bytes is refused by a 1.0 server
// (HelloRequest.MaxFrame is said only when it is not the default for that
// reason), and a separate frame can be sent again on the open connection to
// renew a token before it expires.
//
//	client                                server (auth on)
//	Hello                      ──►
//	                           ◄──        HelloReply (minor 2: knows Auth)
//	Auth{token}                ──►        verifies signature, exp/nbf/iat,
//	                           ◄──        iss, aud once; AuthReply{role, expires}
//	Push, Pop, ...             ──►        each checked against the role and
//	                                      the expiry (no new verification)
//	Auth{renewed token}        ──►        replaces the connection's token
//
// With auth on, every request but Hello, Ping and Auth is refused with
// unauthenticated (401) before an Auth was accepted, after a refused Auth,
// and once the token's exp (plus the server's clock skew) has passed: a token
// that expires while the connection is open stops authorizing new requests
// (requests already taken are answered). A request that the role does not
// allow is refused with forbidden (403). Refusals are error replies; the
// connection stays open. The level each opcode needs is the level of the
// HTTP route that does the same thing, from one table in the server:
//
//	public      hello, ping, auth
//	read-only   queue_info, queue_list, dlq_list, stats, browse, state_get
//	read-write  push, pop, ack, lease_extend, transaction, configure, seek,
//	            dlq_redrive, query_register, cycle
//	admin       delete_queue, delete_group, dlq_purge
//
// (Configure is read-write, as POST /api/v1/configure is in Queen: a
// producer's token creates the queues it pushes to.) The roles of AuthReply:
// 0 none (a valid token naming no known role), 1 read-only, 2 read-write,
// 3 admin; each may do what the ones below it may. A server with auth off
// answers Auth with enforced false and checks nothing. Pushes over an
// authenticated connection carry the token's subject as their producerSub.
//
// Old peers: a 1.0 or 1.1 server answers Auth with unknown_op and closes the
// connection, so a client sends Auth only to a server whose HelloReply says
// minor 2 or later (an older server does not check tokens: the client goes
// on without). A 1.0 or 1.1 client on a server with auth on gets its
// requests refused with code 22, which it prints as "code(22)" followed by
// the message, which says that a token is needed.
//
// # Buffers and ownership
//
// Encoders (AppendFrame and the Append<Type> functions) append a whole frame
// to dst and patch its length in place; they do not allocate beyond growing
// dst. Decode methods copy what they keep into an arena owned by the value
// being decoded into, sized once to the body, and reuse the value's slices,
// so decoding into a reused value does not allocate in the steady state.
// Strings and byte slices of a decoded value point into that arena: they are
// valid until the next Decode into the same value. Call Detach before
// handing them to code that keeps them past that point (or copy them).
// Counts are checked against the bytes left in the body before anything is
// allocated for them, so a forged count cannot make a decoder allocate.
package protocol
