package tcp

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver"
	"github.com/regentmq/regent/protocol"
)

func durationMs(ms uint64) time.Duration {
	return time.Duration(min(ms, uint64(1<<62)/uint64(time.Millisecond))) * time.Millisecond
}

// pushJob is one Push request on its way through the engine. Jobs are
// pooled: the decoded request, the engine's items and results, and the reply
// keep their buffers.
type pushJob struct {
	job
	req   protocol.PushRequest
	items []engine.PushItem
	res   []engine.PushResult
	reply protocol.PushReply
	err   error
	done  func(error)
}

var pushJobs, ackJobs sync.Pool

func init() {
	pushJobs.New = func() any {
		j := &pushJob{}
		j.done = j.committed
		return j
	}
	ackJobs.New = func() any {
		j := &ackJob{}
		j.done = j.committed
		return j
	}
}

func (tc *tcpConn) push(id uint64, body []byte) bool {
	j := pushJobs.Get().(*pushJob)
	if err := j.req.Decode(body); err != nil {
		tc.detachLarge(&j.req) // its arena was sized for the large frame
		pushJobs.Put(j)
		tc.send(errReply{protocol.OpPush, id, err})
		return false
	}
	if !j.begin(tc, protocol.OpPush, id, &j.req) {
		pushJobs.Put(j)
		return true
	}
	j.err = nil
	j.items = toEnginePush(j.items, j.req.Items)
	if sub := tc.producerSub(); sub != "" {
		for i := range j.items {
			j.items[i].ProducerSub = sub
		}
	}
	if cap(j.res) < len(j.items) {
		j.res = make([]engine.PushResult, len(j.items))
	}
	j.res = j.res[:len(j.items)]
	tc.s.dp.PushAsync(context.Background(), j.items, j.res, j.done)
	return true
}

// committed runs once the push is durable (on the journal's committer).
func (j *pushJob) committed(err error) {
	j.err = err
	j.finish(j)
	j.tc = nil
	clear(j.items)
	clear(j.res)
	pushJobs.Put(j)
}

func (j *pushJob) appendTo(dst []byte) []byte {
	if j.err != nil {
		return errReply{protocol.OpPush, j.id, j.err}.appendTo(dst)
	}
	j.reply.Items = fromEnginePushResults(j.reply.Items, j.res)
	return protocol.AppendPushReply(dst, j.id, &j.reply)
}

// ackJob is one Ack request on its way through the engine.
type ackJob struct {
	job
	req   protocol.AckRequest
	items []engine.AckItem
	res   []engine.AckResult
	reply protocol.AckReply
	err   error
	done  func(error)
}

func (tc *tcpConn) ack(id uint64, body []byte) bool {
	j := ackJobs.Get().(*ackJob)
	if err := j.req.Decode(body); err != nil {
		tc.detachLarge(&j.req) // its arena was sized for the large frame
		ackJobs.Put(j)
		tc.send(errReply{protocol.OpAck, id, err})
		return false
	}
	for i := range j.req.Items {
		if !j.req.Items[i].Status.Valid() {
			tc.detachLarge(&j.req)
			ackJobs.Put(j)
			tc.send(errReply{protocol.OpAck, id, protocol.NewError(protocol.CodeInvalid, "unknown ack status")})
			return true
		}
	}
	if !j.begin(tc, protocol.OpAck, id, &j.req) {
		ackJobs.Put(j)
		return true
	}
	j.err = nil
	j.items = toEngineAcks(j.items, j.req.Items)
	if cap(j.res) < len(j.items) {
		j.res = make([]engine.AckResult, len(j.items))
	}
	j.res = j.res[:len(j.items)]
	tc.s.dp.AckAsync(context.Background(), j.items, j.res, j.done)
	return true
}

func (j *ackJob) committed(err error) {
	j.err = err
	j.finish(j)
	j.tc = nil
	clear(j.items)
	clear(j.res)
	ackJobs.Put(j)
}

func (j *ackJob) appendTo(dst []byte) []byte {
	if j.err != nil {
		return errReply{protocol.OpAck, j.id, j.err}.appendTo(dst)
	}
	j.reply.Items = fromEngineAckResults(j.reply.Items, j.res)
	return protocol.AppendAckReply(dst, j.id, &j.reply)
}

// popJob is one Pop request: answered at once, or parked as a long poll
// until the engine answers it. Not pooled: a parked poll's request strings
// must live as long as it does.
type popJob struct {
	job
	req      protocol.PopRequest
	msgs     []engine.Message
	cut      bool // the reply's byte budget left out messages that were ready
	sayCut   bool // the client reads PopReply.Cut (1.1)
	compact  bool // the client reads CompactMessages (1.5)
	err      error
	waiter   netserver.PopWaiter
	buf      atomic.Pointer[[]engine.Message] // from netserver.PopBuf; whoever swaps it out gives it back
	finished bool                             // guarded by tc.mu
}

func (tc *tcpConn) pop(id uint64, body []byte) bool {
	j := &popJob{}
	if err := j.req.Decode(body); err != nil {
		tc.send(errReply{protocol.OpPop, id, err})
		return false
	}
	if !j.begin(tc, protocol.OpPop, id, &j.req) {
		return true
	}
	er := toEnginePop(&j.req)
	er.BareTxn = true // appendTo writes an id's text where the transactionId is the id
	// The reply must fit the client's frames: its messages get what the
	// frame leaves beyond the reply's own fields (a pop by labels names the
	// queue it read: count the longest name).
	qlen := len(j.req.Queue)
	if qlen == 0 {
		qlen = engine.MaxNameBytes
	}
	er.MaxBytes = tc.maxReply - protocol.PopReplyHeaderBytes(qlen, max(len(j.req.Group), len(engine.QueueModeGroup)))
	j.sayCut = tc.minor >= 1
	j.compact = tc.minor >= 5
	if b := netserver.PopBuf(int(j.req.Batch)); b != nil {
		er.Buf = *b
		j.buf.Store(b)
	}
	w := tc.s.dp.PopAsync(er, j.answered)
	if w != nil {
		// Parked: the engine no longer holds the buffer (a parked poll
		// must not keep one; the answer, whenever, brings its own).
		if b := j.buf.Swap(nil); b != nil {
			netserver.RecyclePopBuf(b, nil)
		}
		tc.mu.Lock()
		if !j.finished && !tc.closed {
			j.waiter = w
			if tc.waiters == nil {
				tc.waiters = make(map[*popJob]struct{})
			}
			tc.waiters[j] = struct{}{}
		} else if tc.closed && !j.finished {
			tc.mu.Unlock()
			if w.Cancel() {
				j.finish(j) // nobody to answer: the slot is given back
			}
			return true
		}
		tc.mu.Unlock()
	}
	return true
}

func (j *popJob) answered(msgs []engine.Message, cut bool, err error) {
	tc := j.tc
	tc.mu.Lock()
	j.finished = true
	delete(tc.waiters, j)
	tc.mu.Unlock()
	j.msgs, j.cut, j.err = msgs, cut, err
	j.finish(j) // encodes the messages: they are not needed after it
	if b := j.buf.Swap(nil); b != nil {
		j.msgs = nil
		netserver.RecyclePopBuf(b, msgs)
	}
}

// size bounds the reply's encoding (see sizer): its fields, and what the
// engine's budget counts for each message.
func (j *popJob) size() int {
	n := protocol.PopReplyHeaderBytes(engine.MaxNameBytes, max(len(j.req.Group), len(engine.QueueModeGroup)))
	for i := range j.msgs {
		m := &j.msgs[i]
		n += engine.MessageBytes(len(m.Payload), m.TransactionID, m.TraceID, m.Partition, "")
	}
	return n
}

func (j *popJob) appendTo(dst []byte) []byte {
	if j.err != nil {
		return errReply{protocol.OpPop, j.id, j.err}.appendTo(dst)
	}
	queue, group := j.req.Queue, j.req.Group
	if queue == "" && len(j.msgs) > 0 { // a pop by labels: the queue it read
		queue = j.msgs[0].Queue
	}
	if group == "" {
		group = engine.QueueModeGroup
	}
	// Straight from the engine's messages into the frame: no copy of them.
	dst, start := protocol.AppendPopReplyStart(dst, j.id, queue, group, len(j.msgs))
	if j.compact {
		// What repeats is left out: the id's text (an empty transactionId
		// says it), the partition and the lease of the message before.
		var m, prev protocol.Message
		var before *protocol.Message // nil for the first
		for i := range j.msgs {
			m = fromEngineMessage(&j.msgs[i])
			dst = protocol.AppendPopMessageCompact(dst, &m, before)
			prev, before = m, &prev
		}
	} else {
		var idText [36]byte
		for i := range j.msgs {
			m := fromEngineMessage(&j.msgs[i])
			if m.TransactionID == "" { // pushed without one: the id's text
				m.TransactionID = unsafe.String(&j.msgs[i].ID.Append(idText[:0])[0], len(idText))
			}
			dst = protocol.AppendPopMessage(dst, &m)
		}
	}
	if j.cut && j.sayCut {
		dst = protocol.AppendPopReplyCut(dst)
	}
	protocol.PatchLength(dst, start)
	return dst
}

// txnJob is one Transaction request.
type txnJob struct {
	job
	req    protocol.TransactionRequest
	acks   []engine.AckItem
	pushes []engine.PushItem
	res    engine.TxnResult
	err    error
}

func (tc *tcpConn) txn(id uint64, body []byte) bool {
	j := &txnJob{}
	if err := j.req.Decode(body); err != nil {
		tc.send(errReply{protocol.OpTransaction, id, err})
		return false
	}
	if !j.begin(tc, protocol.OpTransaction, id, &j.req) {
		return true
	}
	j.acks = toEngineAcks(nil, j.req.Acks)
	j.pushes = toEnginePush(nil, j.req.Pushes)
	if sub := tc.producerSub(); sub != "" {
		for i := range j.pushes {
			j.pushes[i].ProducerSub = sub
		}
	}
	tc.s.dp.TransactionAsync(context.Background(), j.acks, j.pushes, func(r engine.TxnResult, err error) {
		j.res, j.err = r, err
		j.finish(j)
	})
	return true
}

func (j *txnJob) appendTo(dst []byte) []byte {
	if j.err != nil {
		return errReply{protocol.OpTransaction, j.id, j.err}.appendTo(dst)
	}
	reply := protocol.TransactionReply{
		Acks:   fromEngineAckResults(nil, j.res.Acks),
		Pushes: fromEnginePushResults(nil, j.res.Pushes),
	}
	if j.res.Err != nil {
		reply.Code, reply.Error = netserver.CodeOf(j.res.Err), netserver.MessageOf(j.res.Err)
	}
	return protocol.AppendTransactionReply(dst, j.id, &reply)
}

// extendJob is one LeaseExtend request: answered when the engine says, at
// once, or (journaled leases: a replicated shard) once the new expiries are
// durable, off the event loop.
type extendJob struct {
	job
	exp time.Time
	err error
}

func (tc *tcpConn) extend(id uint64, body []byte) bool {
	var req protocol.LeaseExtendRequest
	if err := req.Decode(body); err != nil {
		tc.send(errReply{protocol.OpLeaseExtend, id, err})
		return false
	}
	j := &extendJob{}
	if !j.begin(tc, protocol.OpLeaseExtend, id, nil) {
		return true
	}
	tc.s.dp.ExtendLeaseAsync(context.Background(), engine.UUID(req.LeaseID), durationMs(req.DurationMs), func(exp time.Time, err error) {
		j.exp, j.err = exp, err
		j.finish(j)
	})
	return true
}

func (j *extendJob) appendTo(dst []byte) []byte {
	if j.err != nil {
		return errReply{protocol.OpLeaseExtend, j.id, j.err}.appendTo(dst)
	}
	return protocol.AppendLeaseExtendReply(dst, j.id, &protocol.LeaseExtendReply{Expires: j.exp.UnixNano()})
}
