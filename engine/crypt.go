package engine

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// Payload encryption at rest: a queue with encryptionEnabled stores every
// payload sealed with AES-256-GCM under the server's key (Config.EncryptionKey)
// as nonce (12 bytes, random) | ciphertext | tag (16 bytes), and its push
// record names the key by its id (keys.go). The journal, the snapshots and
// the cache hold only sealed payloads; they are opened when a message is
// delivered or listed, with the key the record names (the server's key or
// one of its old keys). A queue that asks for encryption on a server without
// a key refuses pushes: storing plaintext silently is not an option.

// ErrEncryption: a queue asks for encryption and the server has no key, a
// sealed payload does not open (its key is not given, or it was tampered
// with), or the keys given at start do not fit the data directory.
var ErrEncryption = errors.New("encryption")

const sealOverhead = 12 + 16

func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("%w: the encryption key must be 32 bytes (64 hex characters), got %d", ErrInvalid, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// nonces makes GCM nonces that never repeat under one key: a random 64-bit
// prefix drawn at start (and drawn again whenever the 32-bit counter after
// it wraps), then the counter. No system call per message.
type nonces struct {
	mu     sync.Mutex
	prefix uint64
	ctr    uint32
}

func (n *nonces) next(dst []byte) {
	n.mu.Lock()
	if n.ctr == 0 {
		var b [8]byte
		rand.Read(b[:]) // crypto/rand does not fail on supported platforms
		n.prefix = binary.BigEndian.Uint64(b[:])
	}
	n.ctr++
	binary.BigEndian.PutUint64(dst[0:8], n.prefix)
	binary.BigEndian.PutUint32(dst[8:12], n.ctr)
	n.mu.Unlock()
}

// appendSealed appends nonce | seal(payload) to dst.
func (e *Engine) appendSealed(dst, payload []byte) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, 12)...)
	nonce := dst[start : start+12]
	e.nonce.next(nonce)
	return e.aead.Seal(dst, nonce, payload, nil)
}

// open returns m's payload in clear: opened with the key its record names,
// or, for a record written before keys were named, with the first of the
// server's keys that opens it.
func (e *Engine) open(m *msg) ([]byte, error) {
	if m.flags&flagEncrypted == 0 {
		return m.payload, nil
	}
	if len(m.payload) < sealOverhead {
		return nil, fmt.Errorf("%w: message %s: sealed payload too short", ErrEncryption, m.id)
	}
	if m.key != 0 {
		k := e.keyByID(m.key)
		if k == nil && e.lostKeys[m.key] {
			return nil, fmt.Errorf("%w: message %s is sealed by key %s, declared lost", ErrEncryption, m.id, fmtKeyID(m.key))
		}
		if k == nil {
			return nil, fmt.Errorf("%w: message %s is sealed by key %s, which this server is not given", ErrEncryption, m.id, fmtKeyID(m.key))
		}
		pl, err := k.Open(nil, m.payload[:12], m.payload[12:], nil)
		if err != nil {
			return nil, fmt.Errorf("%w: message %s does not open with key %s, which sealed it: it was damaged or tampered with", ErrEncryption, m.id, fmtKeyID(m.key))
		}
		return pl, nil
	}
	if len(e.keys) == 0 {
		return nil, fmt.Errorf("%w: message %s is encrypted and the server has no key", ErrEncryption, m.id)
	}
	for _, k := range e.keys {
		if pl, err := k.aead.Open(nil, m.payload[:12], m.payload[12:], nil); err == nil {
			return pl, nil
		}
	}
	return nil, fmt.Errorf("%w: message %s (sealed before keys were named) does not open with any key this server is given", ErrEncryption, m.id)
}

// messageMeta is the listed form of a message whose payload does not open:
// everything but the payload, and why.
func messageMeta(p *partition, off uint64, m *msg, why error) Message {
	return Message{ID: m.id, TransactionID: m.txnID(), TraceID: m.trace, CreatedAt: m.ts,
		Queue: p.q.name, Partition: p.name, PartitionID: p.id(), Offset: off, ProducerSub: m.sub, PayloadErr: why}
}

// message builds the delivered form of p's message at offset off.
func (e *Engine) message(p *partition, off uint64, m *msg, ids *idText) (Message, error) {
	pl, err := e.open(m)
	if err != nil {
		return Message{}, err
	}
	txn := m.txn
	if txn == "" {
		txn = ids.of(m.id)
	}
	return Message{
		ID: m.id, TransactionID: txn, TraceID: m.trace, Payload: pl, CreatedAt: m.ts,
		Queue: p.q.name, Partition: p.name, PartitionID: p.id(), Offset: off, ProducerSub: m.sub,
	}, nil
}
