package engine

import (
	"crypto/cipher"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures an Engine. Zero values take the documented defaults.
type Config struct {
	// Clock is the engine's time source; nil means the real clock.
	Clock Clock
	// Stripes is the number of lock stripes partitions are spread over
	// (rounded up to a power of two); default 64.
	Stripes int
	// TimerTick is the resolution of lease expiry, retry delays and poll
	// timeouts; default 10 ms.
	TimerTick time.Duration
	// NoTicker leaves timers to explicit Tick calls (tests with a fake clock).
	NoTicker bool
	// CacheBytes bounds the payload bytes of recent messages kept in memory
	// across all partitions; older ones are read back from the journal.
	// Default 8 MiB (what regent serve gives it under its default memory
	// limit).
	CacheBytes int64
	// MaxPayloadBytes is the largest message payload accepted; default
	// MaxPopBytes - MaxMessageOverhead, the largest that a pop can answer
	// (a larger one is refused: it could never be delivered).
	MaxPayloadBytes int
	// MaxPopBatch caps PopRequest.Batch; default 10000.
	MaxPopBatch int
	// MaxPopBytes caps one pop's answer by bytes (see PopRequest.MaxBytes),
	// whatever its batch; default 16 MiB.
	MaxPopBytes int
	// DefaultPopTimeout is the long-poll timeout when a pop gives none;
	// default 30 s. MaxPopTimeout caps it; default 10 minutes.
	DefaultPopTimeout time.Duration
	MaxPopTimeout     time.Duration
	// UncheckedAcks accepts acks that name no lease for any message in flight
	// for their group, whichever lease holds it (Queen's behaviour: no
	// ownership check, so a worker whose lease expired can ack a message
	// now leased by another). A message that no live lease holds is still
	// refused, as it is coming back (Queen would move the cursor to it). Off
	// by default: an ack without a lease id is refused with
	// ErrLeaseRequired.
	UncheckedAcks bool
	// SnapshotEveryBytes makes the engine snapshot its state once that many
	// bytes were journaled since the last snapshot (and on Close), so that
	// recovery replays little and old journal segments can go; and never
	// before snapshotRatio times the last snapshot's size, so that a large
	// state (many partitions, a long backlog of large messages: a chunk
	// each) does not have snapshots take most of what is written. Default
	// 256 MiB; negative disables automatic snapshots.
	SnapshotEveryBytes int64
	// EncryptionKey (32 bytes) seals the payloads of queues with
	// encryptionEnabled (AES-256-GCM). Without it such queues refuse pushes.
	// New checks the keys against the data directory (keys.go): it refuses
	// a key other than the one recorded there, and a missing key (or old
	// key) while messages it sealed are held.
	EncryptionKey []byte
	// MaxRecordBytes is the size the engine keeps the records it can split
	// within: the acks of one request that file dead letters (each entry
	// carries its message's payload), and dead-letter redrives. A record
	// that cannot be split (a push, a transaction) is refused whole when the
	// journal finds it too large. Default 64 MiB: a quarter of the journal's
	// largest entry, and four times the largest message.
	MaxRecordBytes int
	// EncryptionOldKeys (32 bytes each) open the payloads they sealed and
	// never seal: a rotation gives the new key as EncryptionKey and the
	// previous ones here, and the new one is recorded as the directory's.
	EncryptionOldKeys [][]byte
	// EncryptionLostKeys are fingerprints (KeyFingerprint) of keys lost for
	// good: New starts although messages they sealed are held, and each such
	// message goes to the dead-letter queue when a group reaches it.
	EncryptionLostKeys []string
	// JournalLeases journals every lease: a leased pop's grant, its
	// extensions, and the lease's state with every ack and failure that
	// changes it (inside the effect record of the change), and answers a
	// leased pop and an extension only once their records are durable. A replicated shard needs it (package
	// cluster/replica): the next leader replays the grants, so a live
	// lease survives the failover, its acks are accepted there, and an ack
	// under a lease the leader does not know is refused. Off, a restart
	// forgets leases (their messages come back), as a single broker always
	// has.
	JournalLeases bool
	// JournalStallAfter is how long records may wait for the journal to
	// write them before Healthy reports the journal stuck; default 10 s.
	JournalStallAfter time.Duration
	// Logger receives the engine's logs; nil means slog.Default().
	Logger *slog.Logger
	// Shards, above 0, places the engine in a cluster of that many shards
	// (route.go): ShardOf gives the shard of a queue's partition (of its
	// name as given: "" stands for DefaultPartition), every new partition
	// gets a number whose remainder by Shards is its shard, so that its id
	// tells any broker where it lives (PartitionShard), and Route, when
	// set, says whether this engine serves a shard: nil, or the error to
	// answer instead (a cluster's not_owner or unavailable). Pushes, pops
	// of a named partition, acks and transactions ask it first and are
	// refused whole when one of their partitions is not served here.
	Shards  int
	ShardOf func(queue, partition string) int
	Route   func(shard int) error
}

// WithDefaults returns c with its defaults filled in, or why New would
// refuse it: what an engine built from c would run with (a broker of
// replicated shards builds its engines later, one per shard it comes to
// lead, and checks their configuration at its start).
func (c Config) WithDefaults() (Config, error) {
	err := c.setDefaults()
	return c, err
}

func (c *Config) setDefaults() error {
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	if c.Stripes <= 0 {
		c.Stripes = 64
	}
	n := 1
	for n < c.Stripes {
		n <<= 1
	}
	c.Stripes = n
	if c.Stripes > 1<<16 {
		return fmt.Errorf("%w: Stripes above 65536", ErrInvalid)
	}
	if c.TimerTick <= 0 {
		c.TimerTick = 10 * time.Millisecond
	}
	if c.CacheBytes <= 0 {
		c.CacheBytes = 8 << 20
	}
	if c.MaxPopBytes <= 0 {
		c.MaxPopBytes = DefaultMaxPopBytes
	}
	if c.MaxPayloadBytes <= 0 {
		c.MaxPayloadBytes = c.MaxPopBytes - MaxMessageOverhead
	}
	if c.MaxPayloadBytes+MaxMessageOverhead > c.MaxPopBytes {
		return fmt.Errorf("%w: MaxPayloadBytes %d does not fit MaxPopBytes %d with its names and fields (%d bytes): such a message could never be popped",
			ErrInvalid, c.MaxPayloadBytes, c.MaxPopBytes, MaxMessageOverhead)
	}
	if c.MaxPopBatch <= 0 {
		c.MaxPopBatch = 10000
	}
	if c.DefaultPopTimeout <= 0 {
		c.DefaultPopTimeout = 30 * time.Second
	}
	if c.MaxPopTimeout <= 0 {
		c.MaxPopTimeout = 10 * time.Minute
	}
	if c.SnapshotEveryBytes == 0 {
		c.SnapshotEveryBytes = 256 << 20
	}
	if c.MaxRecordBytes <= 0 {
		c.MaxRecordBytes = 64 << 20
	}
	if c.JournalStallAfter <= 0 {
		c.JournalStallAfter = 10 * time.Second
	}
	if c.Shards < 0 || c.Shards > 1<<16 || (c.Shards > 0 && c.ShardOf == nil) {
		return fmt.Errorf("%w: Shards %d needs 1 to 65536 shards and a ShardOf", ErrInvalid, c.Shards)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Engine holds all broker state and applies the rules of SEMANTICS.md. It is
// safe for concurrent use; transports call it from any goroutine.
type Engine struct {
	cfg   Config
	clock Clock
	j     Journal
	log   *slog.Logger
	ids   uuidGen
	stamp atomic.Int64 // last timestamp handed out (see now)

	stripes []stripe
	smask   uint64

	mu       sync.RWMutex
	queues   map[string]*queue
	queuesID map[uint64]*queue

	leases leaseRegistry

	cacheBytes atomic.Int64
	// nameBytes is what live leases' names hold (lease.names), kept within
	// Config.CacheBytes: past it a lease keeps none.
	nameBytes atomic.Int64
	lastPos   atomic.Uint64
	snapMu    sync.Mutex
	snapPos   uint64       // position of the newest snapshot (guarded by snapMu)
	sinceSnap atomic.Int64 // bytes journaled since the last snapshot
	snapBytes atomic.Int64 // the last snapshot's size
	snapping  atomic.Bool
	sv        *salvageState // while a salvaging recovery runs (damage.go)
	failErr   atomic.Pointer[error]
	closed    atomic.Bool
	stop      chan struct{}
	wg        sync.WaitGroup
	stats     counters
	aead      cipher.AEAD // nil without Config.EncryptionKey
	keyID     uint64      // aead's key id (keys.go); 0 without a key
	keys      []sealKey   // the key, then the old keys: what opens
	lostKeys  map[uint64]bool
	recKey    uint64 // the key recorded in the data directory (keys.go); 0 if none
	nonce     nonces

	labels       labelWaiters // parked pops by namespace and task
	labelWaiting atomic.Int64 // how many: notify looks only when some wait
	labelTurn    atomic.Uint64
	absent       absentWaiters // parked pops on queues that do not exist yet (absent.go)
	streams      streams       // streams queries and their state (streams.go)
}

type counters struct {
	pushed, popped, acked, deadLettered atomic.Uint64
	retained, evicted                   atomic.Uint64 // removed by retention; of them, never consumed by some group
	readErrors                          atomic.Uint64 // messages that could not be read back from the journal (damage.go)
	ackFailed, retentionCuts            atomic.Uint64 // flow.go
	lag                                 popLag
}

// New returns an engine that writes through j, after recovering the state
// that j holds (its newest snapshot and every record after it).
func New(cfg Config, j Journal) (*Engine, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if j == nil {
		return nil, fmt.Errorf("%w: no journal", ErrInvalid)
	}
	e := &Engine{
		cfg:      cfg,
		clock:    cfg.Clock,
		j:        j,
		log:      cfg.Logger,
		stripes:  make([]stripe, cfg.Stripes),
		smask:    uint64(cfg.Stripes - 1),
		queues:   make(map[string]*queue),
		queuesID: make(map[uint64]*queue),
		stop:     make(chan struct{}),
	}
	if err := e.setKeys(&cfg); err != nil {
		return nil, err
	}
	now := e.clock.Now()
	for i := range e.stripes {
		e.stripes[i].wheel.init(int64(cfg.TimerTick), 1024, now)
	}
	if err := e.recover(); err != nil {
		return nil, err
	}
	if err := e.checkKeys(); err != nil {
		return nil, err
	}
	if !cfg.NoTicker {
		e.wg.Add(1)
		go e.ticker()
	}
	return e, nil
}

// Close stops the timers, answers parked pops with ErrClosed and, when
// anything was journaled since the last snapshot, writes one (so the next
// start replays little). It does not close the journal: its owner does, after
// Close.
func (e *Engine) Close() error {
	if !e.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(e.stop)
	e.wg.Wait()
	var err error
	// A deposed engine's journal takes nothing more: no snapshot to write.
	if e.cfg.SnapshotEveryBytes > 0 && e.sinceSnap.Load() > 0 && e.failErr.Load() == nil && !errors.Is(e.j.Err(), ErrDeposed) {
		err = e.snapshot()
	}
	e.mu.RLock()
	qs := make([]*queue, 0, len(e.queues))
	for _, q := range e.queues {
		qs = append(qs, q)
	}
	e.mu.RUnlock()
	for _, q := range qs {
		for _, g := range q.groupList() {
			if g != nil {
				e.failWaiters(g, ErrClosed)
			}
		}
	}
	e.failAbsent(ErrClosed)
	e.labels.mu.Lock()
	ws := e.labels.list
	e.labels.list = nil
	e.labels.mu.Unlock()
	for _, w := range ws {
		w.mu.Lock()
		if !w.finished {
			w.finish()
			w.c.done(nil, false, ErrClosed)
		}
		w.mu.Unlock()
	}
	return err
}

func (e *Engine) ticker() {
	defer e.wg.Done()
	t := time.NewTicker(e.cfg.TimerTick)
	defer t.Stop()
	var lastSweep time.Time
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
			e.Tick()
			e.maybeSnapshot()
			if now := time.Now(); now.Sub(lastSweep) >= time.Second {
				lastSweep = now
				// A journal that is behind refuses a sweep's records for a
				// while: the next sweep goes on, nothing to report.
				if _, err := e.RetentionSweep(); err != nil && e.check() == nil && !errors.Is(err, ErrOverloaded) {
					e.log.Error("retention sweep", "err", err)
				}
			}
		}
	}
}

// Tick fires every timer that is due at the clock's current time. The
// engine's own ticker calls it; with Config.NoTicker tests call it after
// moving a FakeClock.
func (e *Engine) Tick() {
	now := e.clock.Now()
	f := wheelFire{e: e, now: now}
	for i := range e.stripes {
		s := &e.stripes[i]
		s.mu.Lock()
		s.wheel.advance(now, &f)
		s.mu.Unlock()
		for _, fn := range f.after {
			fn()
		}
		f.after = f.after[:0]
	}
}

// stamp returns a timestamp for a new message or group: the clock's time, but
// always later than every stamp handed out before, so that "pushed after the
// group appeared" is exact.
func (e *Engine) newStamp() int64 {
	now := e.clock.Now()
	for {
		last := e.stamp.Load()
		v := now
		if v <= last {
			v = last + 1
		}
		if e.stamp.CompareAndSwap(last, v) {
			return v
		}
	}
}

func (e *Engine) observeStamp(ts int64) {
	for {
		last := e.stamp.Load()
		if ts <= last || e.stamp.CompareAndSwap(last, ts) {
			return
		}
	}
}

// queue returns the live queue with that name, or nil.
func (e *Engine) queue(name string) *queue {
	e.mu.RLock()
	q := e.queues[name]
	e.mu.RUnlock()
	return q
}

// queueOrCreate returns the queue, creating it (with autoQueueOptions) on
// first use.
func (e *Engine) queueOrCreate(name string) (*queue, error) {
	if q := e.queue(name); q != nil {
		return q, nil
	}
	if err := checkName("queue", name, true); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if q := e.queues[name]; q != nil {
		return q, nil
	}
	o := autoQueueOptions(name)
	q := e.newQueue(name, newQueueID(), e.newStamp(), &o)
	for e.queuesID[q.id] != nil {
		q.id = newQueueID()
	}
	if _, err := e.append(encodeQueue(q, &o), nil); err != nil {
		return nil, err
	}
	e.queues[q.name] = q // q.name is the engine's copy: name may alias a caller's buffer
	e.queuesID[q.id] = q
	e.queueBorn(q.name)
	return q, nil
}

func (e *Engine) newQueue(name string, id uint64, created int64, o *QueueOptions) *queue {
	q := &queue{
		e:       e,
		name:    own(name),
		id:      id,
		created: created,
		gnames:  make(map[string]*group),
	}
	q.setOptions(o)
	return q
}

// dropPartition forgets p's entry; q.mu must be held. The entry becomes
// nil in place (O(1), like a forgotten slot always was); once holes are most
// of the table, it is compacted into new slices.
func (q *queue) dropPartition(p *partition) bool {
	i := q.search(p.seq)
	if i == len(q.seqs) || q.parts[i] != p {
		return false
	}
	q.parts[i] = nil
	q.holes++
	if q.holes > 32 && 2*q.holes > len(q.parts) {
		n := len(q.parts) - q.holes
		parts, seqs := make([]*partition, 0, n), make([]uint64, 0, n)
		for k, o := range q.parts {
			if o != nil {
				parts, seqs = append(parts, o), append(seqs, q.seqs[k])
			}
		}
		q.parts, q.seqs, q.holes = parts, seqs, 0
	}
	return true
}

// MaxPayloadBytes is the largest message payload a push accepts (see
// Config.MaxPayloadBytes).
func (e *Engine) MaxPayloadBytes() int { return e.cfg.MaxPayloadBytes }

// UncheckedAcks reports whether acks that name no lease are accepted (see
// Config.UncheckedAcks).
func (e *Engine) UncheckedAcks() bool { return e.cfg.UncheckedAcks }
