package engine

// ResolveAcks names the message of each ack by its offset where it can,
// instead of by its transactionId or id, so that applying a batch ack costs
// one read of each lease's messages rather than one per ack. Queen's HTTP
// clients name messages by transactionId; the HTTP bridge calls this before
// AckAsync or TransactionAsync.
//
// It only looks messages up: an ack it cannot resolve (no lease named, the
// lease already ended, a message not in it) is left as it was, and AckAsync
// checks every ack against the live lease as always. The offset of a
// message never changes, so resolving outside the partition's lock is safe:
// a resolved ack names the same message its transactionId named.
func (e *Engine) ResolveAcks(items []AckItem) {
	for i := 0; i < len(items); {
		j := i + 1
		for j < len(items) && items[j].PartitionID == items[i].PartitionID && items[j].LeaseID == items[i].LeaseID {
			j++
		}
		e.resolveRun(items[i:j])
		i = j
	}
}

// resolveRun resolves acks that share a partition and a lease.
func (e *Engine) resolveRun(items []AckItem) {
	it0 := &items[0]
	if it0.LeaseID.IsZero() {
		return
	}
	p := e.partitionByID(it0.PartitionID)
	if p == nil {
		return
	}
	var l *lease
	for _, x := range e.leases.get(it0.LeaseID) {
		if x.p == p {
			l = x
		}
	}
	if l == nil {
		return
	}
	st := p.st()
	st.mu.Lock()
	if l.ended {
		st.mu.Unlock()
		return
	}
	from, to := l.from, l.to
	var buf [128]msg
	ms, err := e.msgsRange(p, from, to, buf[:0])
	st.mu.Unlock()
	if err != nil || len(ms) == 0 {
		return
	}
	k := 0 // acks usually come in delivery order: search from the last match
	for i := range items {
		it := &items[i]
		if it.HasOffset || (it.MessageID.IsZero() && it.TransactionID == "") {
			continue
		}
		// A message pushed without a transactionId is named by its id.
		var id UUID
		idOK := false
		if it.MessageID.IsZero() && len(it.TransactionID) == 36 {
			if u, err := ParseUUID(it.TransactionID); err == nil {
				var canon [36]byte
				idOK = string(u.Append(canon[:0])) == it.TransactionID
				id = u
			}
		}
		for n := 0; n < len(ms); n++ {
			x := (k + n) % len(ms)
			m := &ms[x]
			var match bool
			switch {
			case !it.MessageID.IsZero():
				match = m.id == it.MessageID
			case m.txn != "":
				match = m.txn == it.TransactionID
			default:
				match = idOK && m.id == id
			}
			if match {
				it.HasOffset, it.Offset = true, from+uint64(x)
				k = (x + 1) % len(ms)
				break
			}
		}
	}
}
