package engine

import (
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// Encryption keys and the data directory.
//
// A key is named by its id: the first 8 bytes of HMAC-SHA256 of a fixed
// label under the key (KeyFingerprint). The id tells keys apart and says
// nothing of the key. The journal records the id of the key that seals (a
// keys record, appended at start when it changes, and kept in every
// snapshot); every push record of sealed payloads names the key that sealed
// them (record.go), and so does every dead-letter entry; and every
// partition keeps its key runs: from which offset on which key sealed its
// messages (a run starts only when the key changes, so a partition holds one
// or two of them; snapshots keep those that still cover messages held).
//
// New checks the keys it is given against the directory, after recovery
// and before anything is served:
//
//	| the directory holds                        | keys given                             | start                                  |
//	|--------------------------------------------|----------------------------------------|----------------------------------------|
//	| no key recorded                            | a key                                  | accepted; the key is recorded          |
//	| key A recorded                             | A                                      | accepted                               |
//	| key A recorded                             | B, with A among the old keys           | accepted, a rotation: B is recorded    |
//	|                                            |                                        | and seals, A opens what it sealed      |
//	| key A recorded                             | B, without A                           | refused: the key does not match        |
//	| messages sealed by K (partitions, DLQ)     | K neither the key nor an old key       | refused, naming K and where they are   |
//	| messages sealed before keys were named     | no key at all                          | refused                                |
//
// A key declared lost (Config.EncryptionLostKeys) lifts both refusals for
// that key: what it sealed cannot be read by anyone any more. Old keys that
// open nothing held are reported (they can be dropped). Without a key, the
// recorded key stays recorded.
//
// A message that no key given opens (its key declared lost, a damaged
// payload, a record written before keys were named that no key opens) is
// an error for that message alone: a pop files it to the dead-letter queue
// of the group that reached it, with the reason, and serves what follows
// (pop.go); ScanMessages lists it with PayloadErr; a redrive leaves it in
// the dead-letter queue. Its sealed payload is kept there as it was, so a
// redrive once its key is given again brings it back.
//
// Records written before keys were named are read as they are: their
// sealed payloads are opened by whichever key given opens them. Their key
// runs are known for what the journal replays after the last snapshot; a
// snapshot written before keys were named holds none, so the check cannot
// see what such a directory sealed before it: the first start records the
// key it is given.
//
// The snapshot's key section (after the queues; absent from snapshots
// written before keys were named):
//
//	keys = 'K' u8 | recorded key u64 | n uvarint
//	       | n × (queueID u64 | seq uvarint | nruns uvarint | nruns × (first uvarint | key u64))
//
// where a run's key is 0 for messages not sealed and 2^64-1 for messages
// sealed before keys were named.

// keyLabel is what a key's fingerprint is the HMAC of.
const keyLabel = "regent: encryption key fingerprint v1"

// keyLegacy is, in key runs, the key of payloads sealed by records written
// before keys were named. No key's id is 0 or keyLegacy (setKeys).
const keyLegacy = ^uint64(0)

const keySectionTag = 'K'

// sealKey is a key given to the server, with its id.
type sealKey struct {
	id   uint64
	aead cipher.AEAD
}

// keyRun says that p's messages from offset first on (to the next run) are
// sealed by key (0: not sealed; keyLegacy: by a key not named).
type keyRun struct {
	first uint64
	key   uint64
}

func keyIDOf(key []byte) uint64 {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(keyLabel))
	return binary.BigEndian.Uint64(m.Sum(nil))
}

// KeyFingerprint returns the fingerprint that names an encryption key in
// logs, errors and Config.EncryptionLostKeys: 16 hex characters, the first 8
// bytes of HMAC-SHA256 of a fixed label under the key. It reveals nothing
// of the key.
func KeyFingerprint(key []byte) string { return fmtKeyID(keyIDOf(key)) }

func fmtKeyID(id uint64) string {
	if id == keyLegacy {
		return "(not named: sealed before keys were named)"
	}
	return fmt.Sprintf("%016x", id)
}

func parseKeyID(s string) (uint64, error) {
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != 8 {
		return 0, fmt.Errorf("%w: lost key %q: want a key fingerprint (16 hex characters, as a refusal to start names it)", ErrInvalid, s)
	}
	return binary.BigEndian.Uint64(b), nil
}

// setKeys takes the keys of cfg: the key seals, it and the old keys open.
func (e *Engine) setKeys(cfg *Config) error {
	take := func(key []byte, what string) (sealKey, error) {
		aead, err := newAEAD(key)
		if err != nil {
			return sealKey{}, fmt.Errorf("%s: %w", what, err)
		}
		id := keyIDOf(key)
		if id == 0 || id == keyLegacy {
			return sealKey{}, fmt.Errorf("%w: %s: its fingerprint is reserved: generate another key", ErrInvalid, what)
		}
		return sealKey{id: id, aead: aead}, nil
	}
	if cfg.EncryptionKey != nil {
		k, err := take(cfg.EncryptionKey, "encryption key")
		if err != nil {
			return err
		}
		e.aead, e.keyID = k.aead, k.id
		e.keys = append(e.keys, k)
	}
	for i, old := range cfg.EncryptionOldKeys {
		k, err := take(old, fmt.Sprintf("old encryption key %d", i+1))
		if err != nil {
			return err
		}
		if e.keyByID(k.id) == nil { // a key given twice is one key
			e.keys = append(e.keys, k)
		}
	}
	for _, s := range cfg.EncryptionLostKeys {
		id, err := parseKeyID(s)
		if err != nil {
			return err
		}
		if e.lostKeys == nil {
			e.lostKeys = make(map[uint64]bool)
		}
		e.lostKeys[id] = true
	}
	return nil
}

// keyByID returns the given key named id, or nil.
func (e *Engine) keyByID(id uint64) cipher.AEAD {
	for _, k := range e.keys {
		if k.id == id {
			return k.aead
		}
	}
	return nil
}

// runKey is the key of a push record's payloads in key runs.
func runKey(flags uint8, key uint64) uint64 {
	switch {
	case flags&flagEncrypted == 0:
		return 0
	case key == 0:
		return keyLegacy
	}
	return key
}

// noteKey records that p's messages from first on are sealed by key (a run
// key). Runs that no longer cover a message held are dropped. Caller holds
// p's stripe (or recovery runs).
func (p *partition) noteKey(first, key uint64) {
	last := uint64(0)
	if n := len(p.keys); n > 0 {
		last = p.keys[n-1].key
	}
	if key == last {
		return
	}
	if held := p.heldRuns(); len(held) < len(p.keys) {
		p.keys = append([]keyRun(nil), held...)
	}
	p.keys = append(p.keys, keyRun{first: first, key: key})
}

// heldRuns is p's key runs from the one that covers its oldest message.
func (p *partition) heldRuns() []keyRun {
	low := p.low()
	k := 0
	for k+1 < len(p.keys) && p.keys[k+1].first <= low {
		k++
	}
	return p.keys[k:]
}

// sealedKeys calls fn once for every key that sealed messages p holds.
// Caller holds p's stripe.
func (p *partition) sealedKeys(fn func(key uint64)) {
	runs := p.heldRuns()
	low := p.low()
	var seen []uint64
	for i, r := range runs {
		end := p.next
		if i+1 < len(runs) {
			end = runs[i+1].first
		}
		if r.key == 0 || end <= max(r.first, low) {
			continue
		}
		dup := false
		for _, s := range seen {
			dup = dup || s == r.key
		}
		if !dup {
			seen = append(seen, r.key)
			fn(r.key)
		}
	}
}

// keyUse is where a key sealed messages that are held.
type keyUse struct {
	parts, dead int
	queues      []string // the first few, for messages
	nq          int
}

func (u *keyUse) note(q string, parts, dead int) {
	u.parts += parts
	u.dead += dead
	if n := len(u.queues); n == 0 || u.queues[n-1] != q {
		u.nq++
		if n < 3 {
			u.queues = append(u.queues, q)
		}
	}
}

func (u *keyUse) String() string {
	plural := func(n int, what string) string {
		if n == 1 {
			return "1 " + what
		}
		return fmt.Sprintf("%d %ss", n, what)
	}
	var what []string
	if u.parts > 0 {
		what = append(what, plural(u.parts, "partition"))
	}
	if u.dead > 0 {
		what = append(what, plural(u.dead, "dead letter"))
	}
	qs := make([]string, len(u.queues))
	for i, q := range u.queues {
		qs[i] = fmt.Sprintf("%q", q)
	}
	s := strings.Join(what, " and ") + " of queue"
	if u.nq > 1 {
		s += "s"
	}
	s += " " + strings.Join(qs, ", ")
	if u.nq > len(u.queues) {
		s += fmt.Sprintf(" and %d more", u.nq-len(u.queues))
	}
	return s
}

// keysInUse finds the keys that sealed messages held: in partitions (key
// runs) and in dead-letter queues.
func (e *Engine) keysInUse() map[uint64]*keyUse {
	use := map[uint64]*keyUse{}
	get := func(id uint64) *keyUse {
		u := use[id]
		if u == nil {
			u = &keyUse{}
			use[id] = u
		}
		return u
	}
	e.mu.RLock()
	qs := make([]*queue, 0, len(e.queues))
	for _, q := range e.queues {
		qs = append(qs, q)
	}
	e.mu.RUnlock()
	sort.Slice(qs, func(i, j int) bool { return qs[i].name < qs[j].name })
	for _, q := range qs {
		q.mu.RLock()
		parts := append([]*partition(nil), q.parts...)
		q.mu.RUnlock()
		for _, p := range parts {
			if p == nil {
				continue
			}
			p.st().mu.Lock()
			p.sealedKeys(func(id uint64) { get(id).note(q.name, 1, 0) })
			p.st().mu.Unlock()
		}
		q.dlqMu.Lock()
		for i := range q.dlq {
			if id := runKey(q.dlq[i].m.flags, q.dlq[i].m.key); id != 0 {
				get(id).note(q.name, 0, 1)
			}
		}
		q.dlqMu.Unlock()
	}
	return use
}

// checkKeys checks the keys given against the directory (see the table
// above), and records the key when it is new or rotated in. New calls it
// after recovery.
func (e *Engine) checkKeys() error {
	use := e.keysInUse()
	rec := e.recKey
	given := func(id uint64) bool { return e.keyByID(id) != nil }
	if e.keyID != 0 && rec != 0 && e.keyID != rec && !given(rec) && !e.lostKeys[rec] {
		held := "no message it sealed is held now"
		if u := use[rec]; u != nil {
			held = "it sealed messages held in " + u.String()
		}
		return fmt.Errorf("%w: the encryption key does not match the data directory's: the directory's key is %s (%s), the key given is %s. "+
			"Start with the directory's key; or rotate to the new key, giving %s as an old key (it opens what it sealed, the new key seals from now on); "+
			"or, if %s is lost for good, declare it lost",
			ErrEncryption, fmtKeyID(rec), held, fmtKeyID(e.keyID), fmtKeyID(rec), fmtKeyID(rec))
	}
	ids := make([]uint64, 0, len(use))
	for id := range use {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var missing []string
	for _, id := range ids {
		u := use[id]
		switch {
		case id == keyLegacy:
			if len(e.keys) == 0 {
				missing = append(missing, "messages sealed before keys were named are held in "+u.String()+" (give the key that sealed them)")
			}
		case given(id):
		case e.lostKeys[id]:
			e.log.Warn("messages sealed by a key declared lost are held: each goes to the dead-letter queue when a group reaches it",
				"key", fmtKeyID(id), "held", u.String())
		default:
			missing = append(missing, fmt.Sprintf("key %s sealed messages held in %s", fmtKeyID(id), u))
		}
	}
	if len(missing) > 0 {
		lead := "the data directory holds sealed messages that no key given opens"
		if len(e.keys) == 0 {
			lead = "the data directory holds sealed messages and no encryption key is given"
		}
		return fmt.Errorf("%w: %s: %s. Give each of these keys (the current one as the key, earlier ones as old keys), "+
			"or declare a key lost for good (what it sealed then goes to the dead-letter queue when reached)",
			ErrEncryption, lead, strings.Join(missing, "; "))
	}
	for _, k := range e.keys {
		if k.id != e.keyID && k.id != rec && use[k.id] == nil {
			e.log.Info("an old encryption key opens no message held: it can be dropped", "key", fmtKeyID(k.id))
		}
	}
	if e.keyID == 0 || e.keyID == rec {
		return nil
	}
	if err := e.recordKey(e.keyID); err != nil {
		return fmt.Errorf("engine: recording the encryption key: %w", err)
	}
	if rec == 0 {
		e.log.Info("encryption key recorded in the data directory", "key", fmtKeyID(e.keyID))
	} else {
		e.log.Warn("encryption key rotated: the new key seals from now on, the old keys open what they sealed",
			"key", fmtKeyID(e.keyID), "previous", fmtKeyID(rec))
	}
	return nil
}

// recordKey journals id as the directory's key and waits until that is
// durable.
func (e *Engine) recordKey(id uint64) error {
	ch := make(chan error, 1)
	if _, err := e.append(appendU64([]byte{recKeys}, id), func(err error) { ch <- err }); err != nil {
		return err
	}
	if err := <-ch; err != nil {
		return fmt.Errorf("%w: %w", ErrJournal, err)
	}
	e.recKey = id
	return nil
}

// replayKeys applies a keys record (recovery).
func (e *Engine) replayKeys(r *reader) error {
	id := r.u64()
	if r.err != nil {
		return r.err
	}
	e.recKey = id
	return nil
}

// appendKeySection appends the snapshot's key section. Every lock is held
// (encodeSnapshot).
func (e *Engine) appendKeySection(b []byte) []byte {
	type held struct {
		p    *partition
		runs []keyRun
	}
	var hs []held
	for _, q := range e.queues {
		for _, p := range q.parts {
			if p == nil || len(p.keys) == 0 {
				continue
			}
			sealed := false
			p.sealedKeys(func(uint64) { sealed = true })
			if sealed {
				hs = append(hs, held{p, p.heldRuns()})
			}
		}
	}
	b = append(b, keySectionTag)
	b = appendU64(b, e.recKey)
	b = appendUvarint(b, uint64(len(hs)))
	for _, h := range hs {
		b = appendU64(b, h.p.q.id)
		b = appendUvarint(b, h.p.seq)
		b = appendUvarint(b, uint64(len(h.runs)))
		for _, r := range h.runs {
			b = appendUvarint(b, r.first)
			b = appendU64(b, r.key)
		}
	}
	return b
}

// readKeySection reads the snapshot's key section (recovery), once the
// queues are loaded.
func (e *Engine) readKeySection(r *reader) {
	if r.u8() != keySectionTag {
		r.fail()
		return
	}
	e.recKey = r.u64()
	n := r.count(11)
	for i := 0; i < n && r.err == nil; i++ {
		qid := r.u64()
		seq := r.uvarint()
		nr := r.count(9)
		runs := make([]keyRun, 0, nr)
		for k := 0; k < nr && r.err == nil; k++ {
			run := keyRun{first: r.uvarint(), key: r.u64()}
			if k > 0 && run.first <= runs[k-1].first {
				r.fail()
				return
			}
			runs = append(runs, run)
		}
		if q := e.queuesID[qid]; q != nil && r.err == nil {
			if p := q.partAt(seq); p != nil {
				p.keys = runs
			}
		}
	}
}
