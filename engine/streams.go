package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Streams: the server side of Queen's stateful stream processing. The
// client SDKs run the operators (map, windows, gates); the engine keeps, for
// each registered query, its registration and its state (key/value rows
// sharded by the source partition), and commits one processing cycle in one
// journal record: the state changes, the pushes to the sink, and the ack of
// the source messages, all or nothing (a txn record with a streamState
// record inside).
//
// A query is registered by name with a config hash (the SDK's hash of its
// operator chain): the same hash keeps the state, another one is refused
// unless reset, which wipes the query's state and keeps its id.
//
// Bounds: a key up to MaxStateKeyBytes, a value up to MaxStateValueBytes, and
// a query's whole state (keys, values and MaxStateRowOverhead per row) up to
// MaxQueryStateBytes; a cycle that would pass one is refused whole.
//
// Locks: a cycle holds its query's cycle lock (serialising the cycles of one
// query, as Queen's per-shard lock serialises a shard's) while its
// transaction is checked and applied in memory, not while it waits for the
// journal; inside it the transaction's locks (the engine lock when it
// creates queues, the stripes), and innermost streams.mu, which guards the
// registry and every shard. A registration holds the engine lock, then
// streams.mu, so that a snapshot (lockAll) never sees a registration that is
// journaled but not applied.

// Bounds of the streams state.
const (
	MaxStateKeyBytes    = 4 << 10
	MaxStateValueBytes  = 1 << 20
	MaxQueryStateBytes  = 64 << 20
	MaxStateRowOverhead = 64 // bytes a row counts beyond its key and value
	MaxQueryNameBytes   = 1 << 10
)

// streamFailureText is the dead-letter error text of a cycle's failed ack
// that gives none (Queen's).
const streamFailureText = "Streaming cycle reported failure"

type streams struct {
	mu     sync.Mutex
	byName map[string]*streamQuery
	byID   map[UUID]*streamQuery
}

type streamQuery struct {
	id                       UUID
	name, source, sink, hash string
	created, updated         int64
	shards                   map[UUID]map[string]*stateRow
	bytes                    int64      // the state's size, as MaxQueryStateBytes counts it
	cycleMu                  sync.Mutex // serialises this query's cycles (outermost)
}

type stateRow struct {
	value        []byte
	windowEnd    int64
	hasWindowEnd bool
	updated      int64
}

func rowSize(key string, value []byte) int64 {
	return int64(len(key) + len(value) + MaxStateRowOverhead)
}

// StreamQuery is a registered query.
type StreamQuery struct {
	ID          UUID
	Name        string
	SourceQueue string
	SinkQueue   string // "" when the stream has no sink
	ConfigHash  string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// QueryRegistration registers a query (RegisterQuery).
type QueryRegistration struct {
	Name, SourceQueue, SinkQueue, ConfigHash string
	// Reset wipes the query's state when the config hash changed (it keeps
	// its id); with the same hash the state is kept regardless.
	Reset bool
}

// RegisterResult answers RegisterQuery.
type RegisterResult struct {
	Query StreamQuery
	Fresh bool // the query did not exist: it was created
	Reset bool // its hash changed and Reset wiped its state
}

func (q *streamQuery) public() StreamQuery {
	return StreamQuery{ID: q.id, Name: q.name, SourceQueue: q.source, SinkQueue: q.sink, ConfigHash: q.hash,
		CreatedAt: time.Unix(0, q.created), UpdatedAt: time.Unix(0, q.updated)}
}

// RegisterQuery registers a query, idempotently: a new name is created with
// a new id; a known name with the same config hash keeps its state (its
// source and sink are updated); with another hash it is refused with
// ErrConflict (the result then holds the query as it is), unless Reset,
// which wipes its state and stores the new hash. It returns once durable.
func (e *Engine) RegisterQuery(ctx context.Context, r QueryRegistration) (RegisterResult, error) {
	if err := e.check(); err != nil {
		return RegisterResult{}, err
	}
	for _, f := range []struct{ what, v string }{{"name", r.Name}, {"source queue", r.SourceQueue}, {"config hash", r.ConfigHash}} {
		if f.v == "" {
			return RegisterResult{}, fmt.Errorf("%w: a query's %s is required", ErrInvalid, f.what)
		}
	}
	for _, f := range []string{r.Name, r.SourceQueue, r.SinkQueue, r.ConfigHash} {
		if len(f) > MaxQueryNameBytes {
			return RegisterResult{}, fmt.Errorf("%w: a query's name, queues and config hash are at most %d bytes", ErrTooLarge, MaxQueryNameBytes)
		}
	}
	ch := make(chan error, 1)
	res, err := e.register(r, func(err error) { ch <- err })
	if err != nil {
		return res, err
	}
	return res, waitDurable(ctx, ch)
}

func (e *Engine) register(r QueryRegistration, done func(error)) (RegisterResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := &e.streams
	s.mu.Lock()
	defer s.mu.Unlock()
	now := e.clock.Now()
	q := s.byName[r.Name]
	var res RegisterResult
	rec := streamQueryRecord{name: own(r.Name), source: own(r.SourceQueue), sink: own(r.SinkQueue), hash: own(r.ConfigHash), updated: now}
	switch {
	case q == nil:
		rec.id, rec.created = newRandomUUID(), now
		res.Fresh = true
	case q.hash == r.ConfigHash:
		rec.id, rec.created = q.id, q.created
	case !r.Reset:
		return RegisterResult{Query: q.public()}, fmt.Errorf("%w: config_hash mismatch: operator chain changed for queryId '%s'. pass reset:true to wipe its state, or use a new queryId", ErrConflict, r.Name)
	default:
		rec.id, rec.created, rec.reset = q.id, q.created, true
		res.Reset = true
	}
	if _, err := e.append(rec.encode(), done); err != nil {
		return RegisterResult{}, err
	}
	res.Query = s.applyQuery(&rec).public()
	return res, nil
}

// applyQuery stores a registration. Caller holds s.mu.
func (s *streams) applyQuery(r *streamQueryRecord) *streamQuery {
	if s.byName == nil {
		s.byName, s.byID = map[string]*streamQuery{}, map[UUID]*streamQuery{}
	}
	q := s.byID[r.id]
	if q == nil {
		if old := s.byName[r.name]; old != nil { // a name re-registered under another id (never written; be safe)
			delete(s.byID, old.id)
		}
		q = &streamQuery{id: r.id, created: r.created, shards: map[UUID]map[string]*stateRow{}}
		s.byID[r.id] = q
	}
	if q.name != r.name {
		delete(s.byName, q.name)
	}
	q.name, q.source, q.sink, q.hash, q.updated = r.name, r.source, r.sink, r.hash, r.updated
	s.byName[q.name] = q
	if r.reset {
		q.shards, q.bytes = map[UUID]map[string]*stateRow{}, 0
	}
	return q
}

// Queries lists the registered queries, by name.
func (e *Engine) Queries() []StreamQuery {
	s := &e.streams
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]StreamQuery, 0, len(s.byName))
	for _, q := range s.byName {
		out = append(out, q.public())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// StateOp changes one key of a state shard: an upsert (the whole value
// replaced) or, with Delete, a removal (of a key that may not exist).
type StateOp struct {
	Key    string
	Delete bool
	Value  []byte // the value as stored and returned (Queen's: JSON text)
	// WindowEnd, when HasWindowEnd, is the value's windowEnd (a number of
	// milliseconds), which StateFilter.RipeAtOrBefore compares.
	WindowEnd    int64
	HasWindowEnd bool
}

// StreamAck acknowledges a cycle's source messages, cumulatively: every
// message of the lease up to the one with TransactionID (included) is
// completed (the cursor moves past them). ReleaseLease then gives the rest
// of the lease back at once, in order; without it the rest stays leased
// until the lease ends. DeadLetter files the named message in the
// dead-letter queue instead (those before it completed, the lease
// released).
type StreamAck struct {
	TransactionID string
	LeaseID       UUID // zero: the live lease (only with Config.UncheckedAcks)
	DeadLetter    bool
	Error         string // with DeadLetter
	Count         int    // what the answer reports as acked (Queen's count); 0: 1
	ReleaseLease  bool
}

// StreamCycle is one processing cycle of a query on one source partition.
type StreamCycle struct {
	QueryID     UUID
	PartitionID UUID   // the source partition (the state shard's key)
	Group       string // the source consumer group; "" is queue mode
	State       []StateOp
	Pushes      []PushItem
	Ack         *StreamAck
}

// StreamAckResult answers a cycle's ack.
type StreamAckResult struct {
	Count         int
	LeaseReleased bool
	DeadLettered  bool
}

// StreamCycleResult answers a cycle that was committed.
type StreamCycleResult struct {
	Queue           string // the source partition's queue ("" when unknown)
	StateOpsApplied int
	Pushes          []PushResult
	Ack             *StreamAckResult // nil without an ack
}

// Cycle commits a cycle all or nothing, as one journal record, and returns
// once it is durable. A refused cycle changes nothing; its error says why:
// ErrLeaseInvalid (the lease named is not the live lease of that group and
// partition, or it has expired), ErrMessageNotFound (no message of the lease
// has that transactionId), ErrQueryNotFound (state changes for a query that
// is not registered), ErrTooLarge (a bound of the state), or a push's
// refusal.
func (e *Engine) Cycle(ctx context.Context, c StreamCycle) (StreamCycleResult, error) {
	if err := e.check(); err != nil {
		return StreamCycleResult{}, err
	}
	type answer struct {
		r   TxnResult
		err error
	}
	ch := make(chan answer, 1)
	res, err := e.startCycle(&c, func(r TxnResult, err error) { ch <- answer{r, err} })
	if err != nil {
		return StreamCycleResult{}, err
	}
	var a answer
	select {
	case a = <-ch:
	case <-ctx.Done():
		return StreamCycleResult{}, ctx.Err()
	}
	if a.err != nil {
		return StreamCycleResult{}, a.err
	}
	if a.r.Err != nil {
		return StreamCycleResult{}, a.r.Err
	}
	res.Pushes = a.r.Pushes
	return res, nil
}

// startCycle checks a cycle and hands it to the transaction machinery,
// under its query's cycle lock: the transaction applies it in memory before
// it returns, so the lock orders the query's cycles (and keeps the state's
// bound true) without being held while done waits for the journal. done
// runs once, when the cycle is durable or was refused; it does not run
// when startCycle returns an error.
func (e *Engine) startCycle(c *StreamCycle, done func(TxnResult, error)) (StreamCycleResult, error) {
	q, err := e.checkCycle(c)
	if err != nil {
		return StreamCycleResult{}, err
	}
	if q != nil {
		q.cycleMu.Lock()
		defer q.cycleMu.Unlock()
	}
	res := StreamCycleResult{StateOpsApplied: len(c.State)}
	p := e.partitionByID(c.PartitionID)
	if p != nil {
		res.Queue = p.q.name
	}
	var acks []AckItem
	if c.Ack != nil {
		if p == nil {
			return StreamCycleResult{}, fmt.Errorf("%w: no partition %s", ErrMessageNotFound, c.PartitionID)
		}
		var ar StreamAckResult
		if acks, ar, err = e.planStreamAck(p, c.Group, c.Ack); err != nil {
			return StreamCycleResult{}, err
		}
		res.Ack = &ar
	}
	var extra *txnExtra
	if len(c.State) > 0 {
		if extra, err = e.stateChange(q, c.PartitionID, c.State); err != nil {
			return StreamCycleResult{}, err
		}
	}
	e.transact(acks, c.Pushes, extra, done)
	return res, nil
}

// checkCycle checks what a cycle asks before anything is locked, and
// returns its query (nil for a cycle without state changes of a query that
// is not registered).
func (e *Engine) checkCycle(c *StreamCycle) (*streamQuery, error) {
	s := &e.streams
	s.mu.Lock()
	q := s.byID[c.QueryID]
	s.mu.Unlock()
	if q == nil && len(c.State) > 0 {
		return nil, fmt.Errorf("%w: no query %s is registered (state belongs to a registered query)", ErrQueryNotFound, c.QueryID)
	}
	for i := range c.State {
		op := &c.State[i]
		if len(op.Key) > MaxStateKeyBytes {
			return nil, fmt.Errorf("%w: state key of %d bytes (at most %d)", ErrTooLarge, len(op.Key), MaxStateKeyBytes)
		}
		if len(op.Value) > MaxStateValueBytes {
			return nil, fmt.Errorf("%w: state value of %d bytes for key %q (at most %d)", ErrTooLarge, len(op.Value), op.Key, MaxStateValueBytes)
		}
	}
	if a := c.Ack; a != nil && a.TransactionID == "" {
		return nil, fmt.Errorf("%w: ack.transactionId is required", ErrInvalid)
	}
	return q, nil
}

// planStreamAck turns a cycle's ack into the transaction's acks, checked
// against the live lease: completed for the lease's messages up to the one
// named, then (to release the rest) retry for the first one left, or dlq
// for the one named. The transaction checks them again under its locks
// (the lease must still be live: AckItem.live).
func (e *Engine) planStreamAck(p *partition, group string, a *StreamAck) ([]AckItem, StreamAckResult, error) {
	if group == "" {
		group = QueueModeGroup
	}
	g := p.q.group(group)
	lost := func() ([]AckItem, StreamAckResult, error) {
		return nil, StreamAckResult{}, fmt.Errorf("%w: no live lease of %s on %s/%s", ErrLeaseInvalid, groupLabel(group), p.q.name, p.name)
	}
	if g == nil {
		return lost()
	}
	st := p.st()
	st.mu.Lock()
	defer st.mu.Unlock()
	if g.idx >= len(p.groups) || p.groups[g.idx].act == nil {
		return lost()
	}
	pg := &p.groups[g.idx]
	l := pg.act.lease
	now := e.clock.Now()
	if l == nil || l.ended || l.released || l.expires <= now {
		return lost()
	}
	lease := a.LeaseID
	if lease.IsZero() {
		if !e.cfg.UncheckedAcks {
			return nil, StreamAckResult{}, fmt.Errorf("%w: name the lease the pop returned (the server checks leases)", ErrLeaseRequired)
		}
		lease = l.id
	} else if l.id != lease {
		return lost()
	}
	var cache leaseMsgs
	defer cache.release()
	target, ok := e.findInLease(p, l, &AckItem{TransactionID: a.TransactionID}, &cache)
	if !ok {
		return nil, StreamAckResult{}, fmt.Errorf("%w: no message of lease %s on %s/%s has transactionId %q", ErrMessageNotFound, lease, p.q.name, p.name, a.TransactionID)
	}
	item := func(off uint64, s AckStatus) AckItem {
		return AckItem{PartitionID: p.id(), HasOffset: true, Offset: off, LeaseID: lease, Group: group, Status: s, live: true}
	}
	var items []AckItem
	end := target + 1 // completed: [cursor, end)
	if a.DeadLetter {
		end = target
	}
	for off := max(pg.cursor, l.from); off < end; off++ {
		if l.statusAt(off) == stNone {
			items = append(items, item(off, Completed))
		}
	}
	res := StreamAckResult{Count: max(a.Count, 1)}
	if a.DeadLetter {
		it := item(target, DLQ)
		it.Error = a.Error
		if it.Error == "" {
			it.Error = streamFailureText
		}
		items = append(items, it)
		res = StreamAckResult{DeadLettered: true} // Queen answers count 0, lease_released false
	}
	if a.ReleaseLease || a.DeadLetter {
		for off := target + 1; off < l.to; off++ {
			if l.statusAt(off) == stNone {
				items = append(items, item(off, Retry)) // the rest comes back at once, in order
				break
			}
		}
		if !a.DeadLetter {
			res.LeaseReleased = true
		}
	}
	return items, res, nil
}

// stateChange prepares a cycle's state changes: the record that journals
// them inside the cycle's transaction, and their effect, applied once the
// journal took it. Caller holds q's cycle lock (the bound check stays true
// until the effect is applied: only this query's cycles add to its state).
func (e *Engine) stateChange(q *streamQuery, part UUID, ops []StateOp) (*txnExtra, error) {
	now := e.clock.Now()
	s := &e.streams
	s.mu.Lock()
	size := q.bytes
	shard := q.shards[part]
	sizes := map[string]int64{} // the size each key touched has, as the ops go
	for i := range ops {
		op := &ops[i]
		cur, seen := sizes[op.Key]
		if !seen {
			if r := shard[op.Key]; r != nil {
				cur = rowSize(op.Key, r.value)
			}
		}
		next := int64(0)
		if !op.Delete {
			next = rowSize(op.Key, op.Value)
		}
		size += next - cur
		sizes[op.Key] = next
	}
	s.mu.Unlock()
	if size > MaxQueryStateBytes {
		return nil, fmt.Errorf("%w: the cycle would hold %d bytes of state for query %q (at most %d per query)", ErrTooLarge, size, q.name, MaxQueryStateBytes)
	}
	rec := streamStateRecord{query: q.id, part: part, ts: now, ops: ops}
	return &txnExtra{rec: rec.encode(), apply: func() {
		s.mu.Lock()
		s.applyState(q, part, now, ops)
		s.mu.Unlock()
	}}, nil
}

// applyState applies state ops, in order. Caller holds s.mu.
func (s *streams) applyState(q *streamQuery, part UUID, ts int64, ops []StateOp) {
	shard := q.shards[part]
	if shard == nil {
		shard = map[string]*stateRow{}
		q.shards[part] = shard
	}
	for i := range ops {
		op := &ops[i]
		if r := shard[op.Key]; r != nil {
			q.bytes -= rowSize(op.Key, r.value)
			delete(shard, op.Key)
		}
		if op.Delete {
			continue
		}
		key := strings.Clone(op.Key)
		shard[key] = &stateRow{value: bytes.Clone(op.Value), windowEnd: op.WindowEnd, hasWindowEnd: op.HasWindowEnd, updated: ts}
		q.bytes += rowSize(key, op.Value)
	}
	if len(shard) == 0 {
		delete(q.shards, part)
	}
}

// StateFilter selects rows of a state shard; the conditions are ANDed.
type StateFilter struct {
	Keys   []string // none: every key
	Prefix string   // "": any key
	// RipeAtOrBefore, when HasRipe, keeps the rows whose value has a
	// windowEnd at or before it.
	RipeAtOrBefore int64
	HasRipe        bool
}

// StateRow is one row of a state shard.
type StateRow struct {
	Key       string
	Value     []byte
	UpdatedAt time.Time
}

// State returns the rows of query's shard for a source partition that f
// selects, sorted by key (bytewise). A query or shard that does not exist
// has none.
func (e *Engine) State(query, partition UUID, f StateFilter) ([]StateRow, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	var want map[string]bool
	if len(f.Keys) > 0 {
		want = make(map[string]bool, len(f.Keys))
		for _, k := range f.Keys {
			want[k] = true
		}
	}
	s := &e.streams
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.byID[query]
	if q == nil {
		return []StateRow{}, nil
	}
	out := []StateRow{}
	for k, r := range q.shards[partition] {
		if (want != nil && !want[k]) || !strings.HasPrefix(k, f.Prefix) || (f.HasRipe && (!r.hasWindowEnd || r.windowEnd > f.RipeAtOrBefore)) {
			continue
		}
		out = append(out, StateRow{Key: k, Value: r.value, UpdatedAt: time.Unix(0, r.updated)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// newRandomUUID returns a random (version 4) UUID: a query's id.
func newRandomUUID() UUID {
	var u UUID
	if _, err := rand.Read(u[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// Records.
//
//	streamQuery (15) = id [16] | name str | source str | sink str | hash str
//	                   | reset u8 | created varint | updated varint
//	streamState (16) = query [16] | partition [16] | ts varint | n uvarint
//	                   | n × (op u8 (1 upsert, 2 delete) | key str
//	                          | [value bytes | hasWindowEnd u8 | windowEnd varint, for an upsert])
const (
	opUpsert = 1
	opDelete = 2
)

type streamQueryRecord struct {
	id                       UUID
	name, source, sink, hash string
	reset                    bool
	created, updated         int64
}

func (r *streamQueryRecord) encode() []byte {
	b := make([]byte, 0, 64+len(r.name)+len(r.source)+len(r.sink)+len(r.hash))
	b = append(b, recStreamQuery)
	b = append(b, r.id[:]...)
	b = appendStr(b, r.name)
	b = appendStr(b, r.source)
	b = appendStr(b, r.sink)
	b = appendStr(b, r.hash)
	b = appendBool(b, r.reset)
	b = appendVarint(b, r.created)
	return appendVarint(b, r.updated)
}

func readStreamQuery(r *reader) streamQueryRecord {
	return streamQueryRecord{id: r.uuid(), name: r.str(), source: r.str(), sink: r.str(), hash: r.str(), reset: r.bool(),
		created: r.varint(), updated: r.varint()}
}

type streamStateRecord struct {
	query, part UUID
	ts          int64
	ops         []StateOp
}

func (r *streamStateRecord) encode() []byte {
	size := 1 + 32 + 20
	for i := range r.ops {
		size += 24 + len(r.ops[i].Key) + len(r.ops[i].Value)
	}
	b := make([]byte, 0, size)
	b = append(b, recStreamState)
	b = append(b, r.query[:]...)
	b = append(b, r.part[:]...)
	b = appendVarint(b, r.ts)
	b = appendUvarint(b, uint64(len(r.ops)))
	for i := range r.ops {
		op := &r.ops[i]
		if op.Delete {
			b = append(b, opDelete)
			b = appendStr(b, op.Key)
			continue
		}
		b = append(b, opUpsert)
		b = appendStr(b, op.Key)
		b = appendBytes(b, op.Value)
		b = appendBool(b, op.HasWindowEnd)
		b = appendVarint(b, op.WindowEnd)
	}
	return b
}

func readStreamState(r *reader) streamStateRecord {
	rec := streamStateRecord{query: r.uuid(), part: r.uuid(), ts: r.varint()}
	n := r.count(2)
	rec.ops = make([]StateOp, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		var op StateOp
		switch r.u8() {
		case opDelete:
			op = StateOp{Key: r.str(), Delete: true}
		case opUpsert:
			op = StateOp{Key: r.str(), Value: r.bytesRef()}
			op.HasWindowEnd = r.bool()
			op.WindowEnd = r.varint()
		default:
			r.fail()
		}
		rec.ops = append(rec.ops, op)
	}
	return rec
}

// replayStream applies a streams record (recovery).
func (e *Engine) replayStream(kind byte, r *reader) error {
	s := &e.streams
	s.mu.Lock()
	defer s.mu.Unlock()
	switch kind {
	case recStreamQuery:
		rec := readStreamQuery(r)
		if r.err != nil {
			return r.err
		}
		s.applyQuery(&rec)
	case recStreamState:
		rec := readStreamState(r)
		if r.err != nil {
			return r.err
		}
		if q := s.byID[rec.query]; q != nil {
			s.applyState(q, rec.part, rec.ts, rec.ops) // applyState copies what it keeps
		}
	}
	return nil
}

// Snapshot section (after the key section):
//
//	streams = tag u8 ('S') | nq uvarint | nq × (query record's fields from id to updated
//	          | nshards uvarint | nshards × (partition [16] | nrows uvarint
//	          | nrows × (key str | value bytes | hasWindowEnd u8 | windowEnd varint | updated varint)))
const streamsSectionTag = 'S'

// appendStreamsSection appends the registry and every shard. Every lock is
// held (encodeSnapshot).
func (e *Engine) appendStreamsSection(b []byte) []byte {
	s := &e.streams
	s.mu.Lock()
	defer s.mu.Unlock()
	b = append(b, streamsSectionTag)
	b = appendUvarint(b, uint64(len(s.byID)))
	for _, q := range s.byID {
		rec := streamQueryRecord{id: q.id, name: q.name, source: q.source, sink: q.sink, hash: q.hash, created: q.created, updated: q.updated}
		b = append(b, rec.encode()[1:]...)
		b = appendUvarint(b, uint64(len(q.shards)))
		for part, shard := range q.shards {
			b = append(b, part[:]...)
			b = appendUvarint(b, uint64(len(shard)))
			for k, row := range shard {
				b = appendStr(b, k)
				b = appendBytes(b, row.value)
				b = appendBool(b, row.hasWindowEnd)
				b = appendVarint(b, row.windowEnd)
				b = appendVarint(b, row.updated)
			}
		}
	}
	return b
}

// readStreamsSection reads the snapshot's streams section (recovery).
func (e *Engine) readStreamsSection(r *reader) {
	if r.u8() != streamsSectionTag {
		r.fail()
		return
	}
	s := &e.streams
	s.mu.Lock()
	defer s.mu.Unlock()
	nq := r.count(16 + 8)
	for i := 0; i < nq && r.err == nil; i++ {
		rec := readStreamQuery(r)
		if r.err != nil {
			return
		}
		q := s.applyQuery(&rec)
		ns := r.count(17)
		for k := 0; k < ns && r.err == nil; k++ {
			part := r.uuid()
			nr := r.count(4)
			shard := make(map[string]*stateRow, nr)
			for j := 0; j < nr && r.err == nil; j++ {
				key := r.str()
				row := &stateRow{value: bytes.Clone(r.bytesRef()), hasWindowEnd: r.bool(), windowEnd: r.varint(), updated: r.varint()}
				shard[key] = row
				q.bytes += rowSize(key, row.value)
			}
			if len(shard) > 0 {
				q.shards[part] = shard
			}
		}
	}
}
