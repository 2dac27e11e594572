package engine

import (
	"encoding/binary"
	"errors"
	"time"
	"unsafe"
)

// Journal records. Every change to broker state is one record, appended to the
// journal under the lock that orders it (a partition's stripe lock, or the
// engine lock for queues), and replayed in order on recovery. Records carry
// effects (the state after the change: a cursor, retry counts, dead-letter
// entries), not requests, so that replay needs no lease or clock.
//
//	record       = kind u8 | body
//	queue   (1)  = id u64 | name str | created varint | options
//	queueDel(2)  = id u64
//	push    (3)  = queueID u64 | seq uvarint | partition str | first uvarint | ts varint
//	               | flags u8 | [sub str, when flags has 2] | [key u64, when flags has 4]
//	               | n uvarint | n × message
//	  message    = id [16] | transactionId str | traceId str | payload bytes
//	  flags      = 1: payloads sealed (AES-256-GCM: nonce 12 | ciphertext | tag 16); 2: a producer subject;
//	               4: the id of the key that sealed them (the first 8 bytes of its fingerprint, keys.go).
//	               Sealed without 4 (records written before keys were named): any key given may open them.
//	effect  (4)  = queueID u64 | seq uvarint | group str | cursor uvarint | blockedUntil varint
//	               | n uvarint | n × (offset uvarint | retries uvarint) | m uvarint | m × dead
//	               | [lease, with Config.JournalLeases]
//	  lease      = 0 (the group holds no live lease of the partition)
//	               | 1 | id [16] | from uvarint | expires varint | released u8 | n uvarint | n × status u8
//	  dead       = entry id [16] | offset uvarint | retries uvarint | failedAt varint | error str
//	               | flags u8 | [sub str, when flags has 2] | [key u64, when flags has 4]
//	               | id [16] | transactionId str | traceId str | createdAt varint | payload bytes
//	group   (5)  = queueID u64 | name str | mode u8 | from varint | created varint
//	groupDel(6)  = queueID u64 | name str
//	txn     (7)  = n uvarint | n × bytes (each a queue, push, effect, dlqDel or streamState record,
//	               applied in order; a record refused or lost is all of them)
//	barrier (8)  = (nothing)
//	move    (9)  = as push: messages already stored, copied forward out of an old segment
//	retain (10)  = queueID u64 | seq uvarint | low uvarint   (retention removed what is below low)
//	dlqDel (11)  = queueID u64 | n uvarint | n × entry id [16]  (redriven or purged)
//	forget (12)  = queueID u64 | seq uvarint   (an empty, idle partition is forgotten)
//	tomb   (13)  = queueID u64 | seq uvarint | offset uvarint   (one message deleted)
//	keys   (14)  = key u64   (the id of the key that seals from here on: recorded at start, keys.go)
//	streamQuery (15), streamState (16): a streams query's registration, and a cycle's state
//	               changes (inside the cycle's txn record); streams.go draws them
//
// str and bytes are uvarint-length-prefixed; integers in varint are signed.
const (
	recQueue    = 1
	recQueueDel = 2
	recPush     = 3
	recEffect   = 4
	recGroup    = 5
	recGroupDel = 6
	recTxn      = 7
	recBarrier  = 8 // empty: lets a snapshot wait for everything before it
	recMove     = 9 // a push record copied forward: its messages now live here
	recRetain   = 10
	recDLQDel   = 11
	recForget   = 12
	recTomb     = 13
	recKeys     = 14
	// streams.go
	recStreamQuery = 15
	recStreamState = 16
)

func appendOptions(b []byte, o *QueueOptions) []byte {
	b = appendUvarint(b, 19) // number of fields that follow, for later additions
	b = appendVarint(b, int64(o.LeaseTime))
	b = appendVarint(b, int64(o.RetryLimit))
	b = appendVarint(b, int64(o.RetryDelay))
	b = appendVarint(b, int64(o.DelayedProcessing))
	b = appendVarint(b, int64(o.WindowBuffer))
	b = appendVarint(b, o.MaxSize)
	b = appendVarint(b, int64(o.TTL))
	b = appendBool(b, o.RetentionEnabled)
	b = appendVarint(b, o.RetentionSeconds)
	b = appendVarint(b, o.CompletedRetentionSeconds)
	b = appendVarint(b, o.MaxWaitTimeSeconds)
	b = appendVarint(b, int64(o.Priority))
	b = appendBool(b, o.EncryptionEnabled)
	b = appendBool(b, o.DeadLetterQueue)
	b = appendBool(b, o.DLQAfterMaxRetries)
	b = appendVarint(b, int64(o.MaxPartitions))
	b = appendStr(b, o.Namespace)
	b = appendStr(b, o.Task)
	b = appendVarint(b, int64(o.DedupWindow))
	return b
}

func readOptions(r *reader) QueueOptions {
	n := r.uvarint()
	if n < 18 {
		r.fail()
		return QueueOptions{}
	}
	var o QueueOptions
	o.LeaseTime = time.Duration(r.varint())
	o.RetryLimit = int(r.varint())
	o.RetryDelay = time.Duration(r.varint())
	o.DelayedProcessing = time.Duration(r.varint())
	o.WindowBuffer = time.Duration(r.varint())
	o.MaxSize = r.varint()
	o.TTL = time.Duration(r.varint())
	o.RetentionEnabled = r.bool()
	o.RetentionSeconds = r.varint()
	o.CompletedRetentionSeconds = r.varint()
	o.MaxWaitTimeSeconds = r.varint()
	o.Priority = int(r.varint())
	o.EncryptionEnabled = r.bool()
	o.DeadLetterQueue = r.bool()
	o.DLQAfterMaxRetries = r.bool()
	o.MaxPartitions = int(r.varint())
	o.Namespace = r.str()
	o.Task = r.str()
	if n >= 19 {
		o.DedupWindow = time.Duration(r.varint())
	}
	return o
}

func encodeQueue(q *queue, o *QueueOptions) []byte {
	b := make([]byte, 0, 64+len(q.name))
	b = append(b, recQueue)
	b = appendU64(b, q.id)
	b = appendStr(b, q.name)
	b = appendVarint(b, q.created)
	return appendOptions(b, o)
}

func encodeQueueDel(id uint64) []byte {
	b := make([]byte, 0, 9)
	b = append(b, recQueueDel)
	return appendU64(b, id)
}

func encodeGroup(q *queue, g *group) []byte {
	b := make([]byte, 0, 32+len(g.name))
	b = append(b, recGroup)
	b = appendU64(b, q.id)
	b = appendStr(b, g.name)
	b = append(b, byte(g.mode))
	b = appendVarint(b, g.from)
	return appendVarint(b, g.created)
}

func encodeGroupDel(q *queue, name string) []byte {
	b := make([]byte, 0, 16+len(name))
	b = append(b, recGroupDel)
	b = appendU64(b, q.id)
	return appendStr(b, name)
}

// pushRecord is a decoded push record: where each message's fields are in
// buf, the record's buffer (which the tail cache keeps).
type pushRecord struct {
	queueID uint64
	seq     uint64
	part    string
	first   uint64
	ts      int64
	flags   uint8
	sub     string
	key     uint64 // the sealing key's id (flags has flagKey), or 0
	buf     []byte
	refs    []msgRef
}

// encodePush encodes msgs, stored payloads (sealed or not, per flags, all
// by the key of msgs[0]), as a push (or move) record of p from offset first.
func encodePush(kind byte, p *partition, first uint64, ts int64, flags uint8, sub string, msgs []msg) []byte {
	size := 56 + len(p.name) + len(sub)
	for i := range msgs {
		size += 16 + 12 + len(msgs[i].txn) + len(msgs[i].trace) + len(msgs[i].payload)
	}
	var key uint64
	if len(msgs) > 0 && flags&flagEncrypted != 0 {
		key = msgs[0].key
	}
	b := make([]byte, 0, size)
	b = appendPushHeaderKey(b, kind, p, first, ts, flags, sub, key, len(msgs))
	for k := range msgs {
		m := &msgs[k]
		b = append(b, m.id[:]...)
		b = appendStr(b, m.txn)
		b = appendStr(b, m.trace)
		b = appendBytes(b, m.payload)
	}
	return b
}

// appendPushHeader appends the header of a push record whose payloads name
// no key (not sealed).
func appendPushHeader(b []byte, kind byte, p *partition, first uint64, ts int64, flags uint8, sub string, n int) []byte {
	return appendPushHeaderKey(b, kind, p, first, ts, flags, sub, 0, n)
}

// appendPushHeaderKey appends the header of a push record whose payloads
// are sealed by key (0: none named).
func appendPushHeaderKey(b []byte, kind byte, p *partition, first uint64, ts int64, flags uint8, sub string, key uint64, n int) []byte {
	b = append(b, kind)
	b = appendU64(b, p.q.id)
	b = appendUvarint(b, p.seq)
	b = appendStr(b, p.name)
	b = appendUvarint(b, first)
	b = appendVarint(b, ts)
	flags &^= recordFlags
	if sub != "" {
		flags |= flagSub
	}
	if key != 0 {
		flags |= flagKey
	}
	b = append(b, flags)
	if sub != "" {
		b = appendStr(b, sub)
	}
	if key != 0 {
		b = appendU64(b, key)
	}
	return appendUvarint(b, uint64(n))
}

// readPush decodes a push record body from r, whose input is a suffix of rec
// (the whole record, kind byte included).
func readPush(r *reader, rec []byte) pushRecord {
	var p pushRecord
	p.buf = rec
	p.queueID = r.u64()
	p.seq = r.uvarint()
	p.part = r.strRef()
	p.first = r.uvarint()
	p.ts = r.varint()
	p.flags = r.u8()
	if p.flags&flagSub != 0 {
		p.sub = r.strRef()
	}
	if p.flags&flagKey != 0 {
		p.key = r.u64()
	}
	n := r.count(19)
	if n > 0 {
		p.refs = make([]msgRef, 0, n)
	}
	at := func() uint32 { return uint32(len(rec) - len(r.b)) }
	for i := 0; i < n && r.err == nil; i++ {
		var m msgRef
		m.id = r.uuid()
		txn := r.bytesRef()
		m.txn, m.txnLen = at()-uint32(len(txn)), uint8(len(txn))
		trace := r.bytesRef()
		m.trace, m.traceLen = at()-uint32(len(trace)), uint8(len(trace))
		pay := r.bytesRef()
		m.pay, m.payLen = at()-uint32(len(pay)), uint32(len(pay))
		if len(txn) > MaxNameBytes || len(trace) > MaxNameBytes || len(rec) > 1<<32-1 {
			r.fail()
		}
		p.refs = append(p.refs, m)
	}
	return p
}

// effect is the state of one (group, partition) after a change, plus the
// dead-letter entries the change filed.
type effect struct {
	queueID      uint64
	seq          uint64
	group        string
	cursor       uint64
	blockedUntil int64
	retries      []retryCount
	dead         []deadEntry
	// withLease says the record states the group's lease of the partition
	// (Config.JournalLeases): lease, or none when nil.
	withLease bool
	lease     *leaseRec
}

// leaseRec is a lease as an effect record states it.
type leaseRec struct {
	id       UUID
	from     uint64
	expires  int64
	released bool
	status   []uint8
}

type retryCount struct {
	off uint64
	n   uint32
}

// deadEntry is a dead-letter entry as journaled: self-contained, so that
// retention of the original message does not lose it.
type deadEntry struct {
	id       UUID // the entry's own id (redrive and purge name it)
	off      uint64
	retries  int
	failedAt int64
	err      string
	m        msg
}

func appendEffect(b []byte, e *effect) []byte {
	b = append(b, recEffect)
	b = appendU64(b, e.queueID)
	b = appendUvarint(b, e.seq)
	b = appendStr(b, e.group)
	b = appendUvarint(b, e.cursor)
	b = appendVarint(b, e.blockedUntil)
	b = appendUvarint(b, uint64(len(e.retries)))
	for _, rc := range e.retries {
		b = appendUvarint(b, rc.off)
		b = appendUvarint(b, uint64(rc.n))
	}
	b = appendUvarint(b, uint64(len(e.dead)))
	for i := range e.dead {
		b = appendDead(b, &e.dead[i])
	}
	if e.withLease {
		b = appendLeaseRec(b, e.lease)
	}
	return b
}

func appendDead(b []byte, d *deadEntry) []byte {
	b = append(b, d.id[:]...)
	b = appendUvarint(b, d.off)
	b = appendUvarint(b, uint64(d.retries))
	b = appendVarint(b, d.failedAt)
	b = appendStr(b, d.err)
	flags := d.m.flags &^ recordFlags
	if d.m.sub != "" {
		flags |= flagSub
	}
	if d.m.key != 0 {
		flags |= flagKey
	}
	b = append(b, flags)
	if d.m.sub != "" {
		b = appendStr(b, d.m.sub)
	}
	if d.m.key != 0 {
		b = appendU64(b, d.m.key)
	}
	b = append(b, d.m.id[:]...)
	b = appendStr(b, d.m.txn)
	b = appendStr(b, d.m.trace)
	b = appendVarint(b, d.m.ts)
	return appendBytes(b, d.m.payload)
}

func readDead(r *reader) deadEntry {
	var d deadEntry
	d.id = r.uuid()
	d.off = r.uvarint()
	d.retries = int(r.uvarint())
	d.failedAt = r.varint()
	d.err = r.str()
	d.m.flags = r.u8()
	if d.m.flags&flagSub != 0 {
		d.m.sub = r.str()
	}
	if d.m.flags&flagKey != 0 {
		d.m.key = r.u64()
	}
	d.m.flags &^= recordFlags
	d.m.id = r.uuid()
	d.m.txn = r.str()
	d.m.trace = r.str()
	d.m.ts = r.varint()
	d.m.payload = append([]byte(nil), r.bytesRef()...)
	return d
}

// readEffect decodes an effect record body; strings and payloads are copied.
func readEffect(r *reader) effect {
	var e effect
	e.queueID = r.u64()
	e.seq = r.uvarint()
	e.group = r.str()
	e.cursor = r.uvarint()
	e.blockedUntil = r.varint()
	n := r.count(2)
	if n > 0 {
		e.retries = make([]retryCount, 0, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		off := r.uvarint()
		e.retries = append(e.retries, retryCount{off: off, n: uint32(r.uvarint())})
	}
	m := r.count(41)
	for i := 0; i < m && r.err == nil; i++ {
		e.dead = append(e.dead, readDead(r))
	}
	if r.err == nil && len(r.b) > 0 {
		e.withLease, e.lease = true, readLeaseRec(r)
	}
	return e
}

// Append-style encoders and a bounds-checked decoder for journal records and
// snapshots. The decoder never panics and never allocates more than the input
// holds: a malformed record gives errCorruptRecord.

var errCorruptRecord = errors.New("engine: corrupt journal record")

func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
func appendVarint(b []byte, v int64) []byte   { return binary.AppendVarint(b, v) }
func appendU64(b []byte, v uint64) []byte     { return binary.BigEndian.AppendUint64(b, v) }
func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
func appendBytes(b []byte, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}
func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = errCorruptRecord
	}
	r.b = nil
}

func (r *reader) u8() byte {
	if len(r.b) < 1 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) bool() bool { return r.u8() != 0 }

func (r *reader) u64() uint64 {
	if len(r.b) < 8 {
		r.fail()
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a length that must be coverable by the remaining input at
// minSize bytes per element (so a forged count cannot make us allocate).
func (r *reader) count(minSize int) int {
	v := r.uvarint()
	if minSize < 1 {
		minSize = 1
	}
	if v > uint64(len(r.b)/minSize) {
		r.fail()
		return 0
	}
	return int(v)
}

// bytesRef returns a sub-slice of the input (no copy).
func (r *reader) bytesRef() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// strRef returns a string that aliases the input: valid only as long as the
// input is (used for records whose buffer the engine keeps).
func (r *reader) strRef() string {
	p := r.bytesRef()
	if len(p) == 0 {
		return ""
	}
	return unsafe.String(&p[0], len(p))
}

// str returns a copied string.
func (r *reader) str() string { return string(r.bytesRef()) }

func (r *reader) uuid() UUID {
	var u UUID
	if len(r.b) < 16 {
		r.fail()
		return u
	}
	copy(u[:], r.b)
	r.b = r.b[16:]
	return u
}

func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

const stripeSize = unsafe.Sizeof(stripe{})

func uintptrOf(s *stripe) uintptr { return uintptr(unsafe.Pointer(s)) }
