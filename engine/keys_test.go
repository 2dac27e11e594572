package engine

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

var (
	key1 = bytes.Repeat([]byte{0x11}, 32)
	key2 = bytes.Repeat([]byte{0x22}, 32)
)

// restartWith simulates a crash and a start with cfg changed by mod. It
// returns New's error; on success the fixture runs the new engine.
func (f *fixture) restartWith(mod func(*Config)) error {
	f.t.Helper()
	old := f.j
	f.j = old.reopen()
	f.e.Close()
	old.close()
	mod(&f.cfg)
	e, err := New(f.cfg, f.j)
	if err != nil {
		return err
	}
	f.e = e
	return nil
}

func withKeys(key []byte, old ...[]byte) func(*Config) {
	return func(c *Config) {
		c.EncryptionKey, c.EncryptionOldKeys, c.EncryptionLostKeys = key, old, nil
	}
}

// sealedFixture is a broker on key1 with queue "secret" (encrypted)
// holding the given payloads, one push record each.
func sealedFixture(t *testing.T, pls ...string) *fixture {
	f := newFixture(t, withKeys(key1))
	f.configure("secret", func(o *QueueOptions) { o.EncryptionEnabled = true })
	for _, pl := range pls {
		if r := f.push("secret", "p", pl); r[0].Status != Queued {
			t.Fatalf("push %q: %+v", pl, r[0])
		}
	}
	return f
}

func wantRefused(t *testing.T, err error, parts ...string) {
	t.Helper()
	if !errors.Is(err, ErrEncryption) {
		t.Fatalf("start: %v, want a refusal (ErrEncryption)", err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("the refusal does not say %q:\n%v", p, err)
		}
	}
	t.Logf("refused: %v", err)
}

// pushRecords decodes the journal's push records (inside transactions too).
func (f *fixture) pushRecords() []pushRecord {
	f.j.mu.Lock()
	defer f.j.mu.Unlock()
	var out []pushRecord
	var walk func(rec []byte)
	walk = func(rec []byte) {
		r := reader{b: rec}
		switch r.u8() {
		case recPush:
			if pr := readPush(&r, rec); r.err == nil {
				out = append(out, pr)
			}
		case recTxn:
			n := r.count(1)
			for i := 0; i < n && r.err == nil; i++ {
				walk(r.bytesRef())
			}
		}
	}
	for _, rec := range f.j.recs {
		walk(rec)
	}
	return out
}

// keysNamed lists the keys that the journal's push records of messages
// name, in order ("-" for none).
func (f *fixture) keysNamed() []string {
	var out []string
	for _, pr := range f.pushRecords() {
		if len(pr.refs) == 0 {
			continue // a partition's creation
		}
		if pr.key == 0 {
			out = append(out, "-")
		} else {
			out = append(out, fmtKeyID(pr.key))
		}
	}
	return out
}

// recordedKeys lists the keys records of the journal.
func (f *fixture) recordedKeys() []string {
	f.j.mu.Lock()
	defer f.j.mu.Unlock()
	var ids []string
	for _, rec := range f.j.recs {
		if len(rec) == 9 && rec[0] == recKeys {
			r := reader{b: rec[1:]}
			ids = append(ids, fmtKeyID(r.u64()))
		}
	}
	return ids
}

// TestStartRefusesAWrongKey: a broker whose messages were sealed by key1,
// started with key2, refuses to start and says which key the directory
// has, which was given, and what to do (it used to start, fail every pop
// of the partition and seal new messages with key2). The record of the key
// survives a snapshot that covers its record. Back on key1, everything is
// delivered.
func TestStartRefusesAWrongKey(t *testing.T) {
	f := sealedFixture(t, "a", "b")
	for _, snap := range []bool{false, true} {
		if snap {
			if err := f.e.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
		err := f.restartWith(withKeys(key2))
		wantRefused(t, err, "does not match", KeyFingerprint(key1), KeyFingerprint(key2), "old key", `queue "secret"`)
		if err := f.restartWith(withKeys(key1)); err != nil {
			t.Fatalf("start with the right key (snapshot %v): %v", snap, err)
		}
	}
	msgs := f.pop(PopRequest{Queue: "secret", Batch: 10})
	wantPayloads(t, msgs, "a,b")
}

// TestStartRefusesNoKeyOverSealedData: without a key, a broker holding
// sealed messages refuses to start, naming the key and the queue; once no
// sealed message is held any more, it starts without one.
func TestStartRefusesNoKeyOverSealedData(t *testing.T) {
	f := sealedFixture(t, "a")
	err := f.restartWith(withKeys(nil))
	wantRefused(t, err, "no encryption key is given", KeyFingerprint(key1), `1 partition of queue "secret"`)
	if err := f.restartWith(withKeys(key1)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.e.DeleteQueue(context.Background(), "secret"); err != nil {
		t.Fatal(err)
	}
	if err := f.restartWith(withKeys(nil)); err != nil {
		t.Fatalf("start without a key once nothing sealed is held: %v", err)
	}
}

// TestKeyIsRecordedOnADirectoryWithoutSealedData: a key given to a broker
// that never sealed anything is accepted and recorded; from then on another
// key is refused (nothing sealed or not), and no key at all is accepted
// while nothing sealed is held.
func TestKeyIsRecordedOnADirectoryWithoutSealedData(t *testing.T) {
	f := newFixture(t)
	f.push("plain", "", "x")
	if err := f.restartWith(withKeys(key1)); err != nil {
		t.Fatalf("a first key over unsealed data: %v", err)
	}
	if got := f.recordedKeys(); len(got) != 1 || got[0] != KeyFingerprint(key1) {
		t.Fatalf("keys recorded: %v, want [%s]", got, KeyFingerprint(key1))
	}
	if err := f.restartWith(withKeys(key1)); err != nil {
		t.Fatal(err)
	}
	if got := f.recordedKeys(); len(got) != 1 {
		t.Fatalf("the same key recorded again: %v", got)
	}
	wantRefused(t, f.restartWith(withKeys(key2)), "does not match", "no message it sealed is held")
	if err := f.restartWith(withKeys(nil)); err != nil {
		t.Fatalf("no key, nothing sealed: %v", err)
	}
	wantPayloads(t, f.pop(PopRequest{Queue: "plain"}), "x")
}

// TestRotationWithOldKeys: key2 with key1 as an old key is a rotation:
// what key1 sealed opens, new messages are sealed by key2 (their records
// name it), and key2 is recorded. Then key2 alone is refused while key1's
// messages are held (and key1 alone too: the directory's key is key2),
// through a snapshot; once retention has removed them, key2 alone starts.
func TestRotationWithOldKeys(t *testing.T) {
	f := sealedFixture(t, "a", "b")
	if err := f.restartWith(withKeys(key2, key1)); err != nil {
		t.Fatalf("rotation: %v", err)
	}
	if got := f.recordedKeys(); len(got) != 2 || got[1] != KeyFingerprint(key2) {
		t.Fatalf("keys recorded: %v, want key2's last", got)
	}
	f.clock.Advance(2 * time.Minute)
	f.push("secret", "p", "c")
	k1, k2 := KeyFingerprint(key1), KeyFingerprint(key2)
	if got, want := strings.Join(f.keysNamed(), ","), strings.Join([]string{k1, k1, k2}, ","); got != want {
		t.Fatalf("push records name keys %s, want %s", got, want)
	}
	msgs := f.pop(PopRequest{Queue: "secret", Batch: 10})
	wantPayloads(t, msgs, "a,b,c")
	f.ackMsgs(msgs, Completed)
	if err := f.e.Snapshot(); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, f.restartWith(withKeys(key2)), "no key given opens", KeyFingerprint(key1), `1 partition of queue "secret"`)
	wantRefused(t, f.restartWith(withKeys(key1)), "does not match", KeyFingerprint(key2))
	if err := f.restartWith(withKeys(key2, key1)); err != nil {
		t.Fatal(err)
	}
	// Retention removes key1's messages (older than 90 s), not key2's.
	f.configure("secret", func(o *QueueOptions) {
		o.EncryptionEnabled, o.RetentionEnabled, o.RetentionSeconds = true, true, 90
	})
	f.clock.Advance(time.Minute)
	if n, err := f.e.RetentionSweep(); err != nil || n != 2 {
		t.Fatalf("retention removed %d (%v), want key1's 2", n, err)
	}
	if err := f.restartWith(withKeys(key2)); err != nil {
		t.Fatalf("key2 alone once key1's messages are gone: %v", err)
	}
	wantPayloads(t, f.pop(PopRequest{Queue: "secret", Group: "late"}), "c")
}

// tamper flips the last byte (in the GCM tag) of the sealed payload of
// every message in the journal whose payload was pl, and restarts so that
// the tail cache reads the journal again.
func (f *fixture) tamper(pl string) {
	f.t.Helper()
	f.j.mu.Lock()
	n := 0
	for _, rec := range f.j.recs {
		r := reader{b: rec}
		if r.u8() != recPush {
			continue
		}
		pr := readPush(&r, rec)
		for _, m := range pr.refs {
			sealed := rec[m.pay : m.pay+m.payLen]
			if got, err := f.e.open(&msg{flags: flagEncrypted, key: pr.key, payload: sealed}); err == nil && string(got) == pl {
				sealed[len(sealed)-1] ^= 1
				n++
			}
		}
	}
	f.j.mu.Unlock()
	if n == 0 {
		f.t.Fatalf("no message %q to tamper with", pl)
	}
	f.restart()
}

// TestUnreadableMessageGoesToTheDLQ: a message that no key opens (here
// its payload was tampered with) is an error for that message alone: a pop
// stops before it, the next pop files it to the dead-letter queue of the
// group that reached it, with the reason, and delivers what follows; each
// group files it for itself; listings show it as unreadable instead of
// failing; a redrive leaves it where it is. Before, every pop of the
// partition failed from that message on, for ever.
func TestUnreadableMessageGoesToTheDLQ(t *testing.T) {
	f := sealedFixture(t, "a", "bad", "c", "d")
	f.tamper("bad")
	msgs := f.pop(PopRequest{Queue: "secret", Batch: 10})
	wantPayloads(t, msgs, "a")
	f.ackMsgs(msgs, Completed)
	msgs = f.pop(PopRequest{Queue: "secret", Batch: 10})
	wantPayloads(t, msgs, "c,d")
	f.ackMsgs(msgs, Completed)
	dlq, _, err := f.e.DLQ(DLQFilter{Queue: "secret"})
	if err != nil || len(dlq) != 1 || dlq[0].Message.Offset != 1 || dlq[0].Message.Group != QueueModeGroup ||
		!strings.Contains(dlq[0].Error, "damaged or tampered with") || !errors.Is(dlq[0].Message.PayloadErr, ErrEncryption) {
		t.Fatalf("DLQ: %+v %v", dlq, err)
	}
	// Another group, autoAck, and a run of one at the cursor: the same.
	got := f.pop(PopRequest{Queue: "secret", Group: "g2", Batch: 1, AutoAck: true})
	wantPayloads(t, got, "a")
	got = f.pop(PopRequest{Queue: "secret", Group: "g2", Batch: 10, AutoAck: true})
	wantPayloads(t, got, "c,d")
	if _, n, _ := f.e.DLQ(DLQFilter{Queue: "secret", Group: "g2"}); n != 1 {
		t.Fatalf("g2 filed %d dead letters, want 1", n)
	}
	var listed []string
	err = f.e.ScanMessages("secret", "p", 0, 0, func(m *Message) bool {
		if m.PayloadErr != nil {
			listed = append(listed, "unreadable")
		} else {
			listed = append(listed, string(m.Payload))
		}
		return true
	})
	if err != nil || strings.Join(listed, ",") != "a,unreadable,c,d" {
		t.Fatalf("listed %v (%v)", listed, err)
	}
	red, err := f.e.RedriveDLQ(context.Background(), DLQFilter{Queue: "secret"}, nil)
	if !errors.Is(err, ErrEncryption) || len(red) != 0 {
		t.Fatalf("redrive of unreadable entries: %v %v", red, err)
	}
	f.restart()
	if _, n, _ := f.e.DLQ(DLQFilter{Queue: "secret"}); n != 2 {
		t.Fatalf("after a restart the DLQ holds %d, want 2", n)
	}
	f.push("secret", "p", "e")
	wantPayloads(t, f.pop(PopRequest{Queue: "secret", Batch: 10}), "e")
}

// TestLostKeyMessagesGoToTheDLQ: a key declared lost lets the broker start
// although messages it sealed are held; each goes to the dead-letter queue
// when reached, with the reason, and the messages after it are delivered.
// Given the key again as an old key, a redrive brings them back (sealed by
// the new key); the originals, still held in the partition, still need it.
func TestLostKeyMessagesGoToTheDLQ(t *testing.T) {
	f := sealedFixture(t, "a", "b")
	err := f.restartWith(func(c *Config) {
		c.EncryptionKey, c.EncryptionOldKeys, c.EncryptionLostKeys = key2, nil, []string{KeyFingerprint(key1)}
	})
	if err != nil {
		t.Fatalf("start with key1 declared lost: %v", err)
	}
	f.push("secret", "p", "c")
	wantPayloads(t, f.pop(PopRequest{Queue: "secret", Batch: 10, AutoAck: true}), "c")
	dlq, _, _ := f.e.DLQ(DLQFilter{Queue: "secret"})
	if len(dlq) != 2 || !strings.Contains(dlq[0].Error, KeyFingerprint(key1)) {
		t.Fatalf("DLQ: %+v", dlq)
	}
	// Still needed by the DLQ: key2 alone is refused.
	wantRefused(t, f.restartWith(withKeys(key2)), KeyFingerprint(key1), `2 dead letters of queue "secret"`)
	if err := f.restartWith(withKeys(key2, key1)); err != nil {
		t.Fatal(err)
	}
	red, err := f.e.RedriveDLQ(context.Background(), DLQFilter{Queue: "secret"}, nil)
	if err != nil || len(red) != 2 {
		t.Fatalf("redrive: %v %v", red, err)
	}
	wantPayloads(t, f.pop(PopRequest{Queue: "secret", Batch: 10}), "a,b")
	k1, k2 := KeyFingerprint(key1), KeyFingerprint(key2)
	// a, b, c, then the redrive of a and b (one record)
	if got, want := strings.Join(f.keysNamed(), ","), strings.Join([]string{k1, k1, k2, k2}, ","); got != want {
		t.Fatalf("push records name keys %s, want %s", got, want)
	}
	wantRefused(t, f.restartWith(withKeys(key2)), k1, `1 partition of queue "secret".`)
}

// TestRecordsWithoutKeyIDs: a directory written before push records named
// their key (no keys record, sealed records without a key id) opens with
// the key given, which is then recorded; without a key it is refused.
func TestRecordsWithoutKeyIDs(t *testing.T) {
	f := sealedFixture(t, "a", "b")
	f.j.mu.Lock()
	var recs [][]byte
	for _, rec := range f.j.recs {
		r := reader{b: rec}
		switch r.u8() {
		case recKeys:
			continue
		case recPush:
			pr := readPush(&r, rec)
			p := &partition{q: &queue{id: pr.queueID}, seq: pr.seq, name: pr.part}
			ms := make([]msg, len(pr.refs))
			for i := range ms {
				ms[i] = (&cached{buf: pr.buf, refs: pr.refs, flags: pr.flags &^ recordFlags}).msg(i, pr.ts)
			}
			rec = encodePush(recPush, p, pr.first, pr.ts, pr.flags, pr.sub, ms) // ms name no key
		}
		recs = append(recs, rec)
	}
	f.j.recs = recs
	f.j.mu.Unlock()
	wantRefused(t, f.restartWith(withKeys(nil)), "sealed before keys were named")
	if err := f.restartWith(withKeys(key2, key1)); err != nil {
		t.Fatal(err)
	}
	if got := f.recordedKeys(); len(got) != 1 || got[0] != KeyFingerprint(key2) {
		t.Fatalf("keys recorded: %v", got)
	}
	wantPayloads(t, f.pop(PopRequest{Queue: "secret", Batch: 10}), "a,b")
}
