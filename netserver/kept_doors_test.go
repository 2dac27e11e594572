package netserver_test

// The two doors of TestKeptStringsOwnTheirBytes, behind one interface so
// that both run the same scenario: the binary protocol through the Go
// client, the HTTP bridge through its JSON routes.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/regentmq/regent/client"
)

type keptItem struct{ queue, partition, txn, trace string }

type keptPushed struct{ status, id, pid string }

type keptQueue struct {
	ns, task           string
	partitions, groups []string
	modes              map[string]string // group → subscription mode (HTTP only)
}

type keptDeadEntry struct{ id, group, errText, txn, trace, partition string }

type keptDoor interface {
	name() string
	configure(q, ns, task string) error
	push(items []keptItem) ([]keptPushed, error)
	// pop reads as group; sub is where a group new to the queue starts:
	// "all", "new" (after what exists) or "from" (from).
	pop(q, partition, group, sub string, from time.Time, batch int) ([]keptMsgLease, error)
	popLabels(ns, task, group string) ([]keptMsgLease, error)
	// longPoll waits (up to 8 s) for a message.
	longPoll(q, partition, group string) ([]keptMsgLease, error)
	ack(m keptMsgLease, group, status, errText string) (dead bool, err error)
	extend(lease string) error
	txn(m keptMsgLease, group, errText string, push keptItem) (id, pid string, err error)
	seek(q, group string) error
	deleteGroup(q, group string) error
	queue(q string) (keptQueue, error)
	dlq(q string) ([]keptDeadEntry, error)
}

// keptMsgLease is a popped message with its lease (and, over TCP, the
// client's own value, which its acks take).
type keptMsgLease struct {
	keptMsg
	lease string
	cm    client.Message
}

func ctx10() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

type tcpDoor struct{ b *keptBroker }

func (tcpDoor) name() string { return "tcp" }

func (d tcpDoor) configure(q, ns, task string) error {
	ctx, cancel := ctx10()
	defer cancel()
	o := client.QueueOptions{LeaseTime: time.Minute, RetryLimit: 1, TTL: time.Hour,
		DeadLetterQueue: true, DLQAfterMaxRetries: true, Namespace: ns, Task: task}
	_, err := d.b.c.Configure(ctx, q, o)
	return err
}

func (d tcpDoor) push(items []keptItem) ([]keptPushed, error) {
	ctx, cancel := ctx10()
	defer cancel()
	in := make([]client.Item, len(items))
	for i, it := range items {
		in[i] = client.Item{Queue: it.queue, Partition: it.partition, TransactionID: it.txn, TraceID: it.trace, Payload: []byte(`{"n":1}`)}
	}
	res, err := d.b.c.Push(ctx, in...)
	out := make([]keptPushed, len(res))
	for i, r := range res {
		out[i] = keptPushed{r.Status.String(), r.MessageID.String(), r.PartitionID.String()}
	}
	return out, err
}

func (d tcpDoor) msgs(ms []client.Message, err error) ([]keptMsgLease, error) {
	out := make([]keptMsgLease, len(ms))
	for i, m := range ms {
		out[i] = keptMsgLease{keptMsg{id: m.ID.String(), queue: m.Queue, partition: m.Partition, pid: m.PartitionID.String(),
			txn: m.TransactionID, trace: m.TraceID}, m.LeaseID.String(), m}
	}
	return out, err
}

func (d tcpDoor) pop(q, partition, group, sub string, from time.Time, batch int) ([]keptMsgLease, error) {
	ctx, cancel := ctx10()
	defer cancel()
	qb := d.b.c.Queue(q).Partition(partition).Group(group).Batch(batch)
	switch sub {
	case "new":
		qb = qb.SubscriptionMode(client.FromNew)
	case "from":
		qb = qb.From(from)
	}
	return d.msgs(qb.Pop(ctx))
}

func (d tcpDoor) longPoll(q, partition, group string) ([]keptMsgLease, error) {
	ctx, cancel := ctx10()
	defer cancel()
	return d.msgs(d.b.c.Queue(q).Partition(partition).Group(group).Wait(true).Timeout(8 * time.Second).Pop(ctx))
}

func (d tcpDoor) popLabels(ns, task, group string) ([]keptMsgLease, error) {
	ctx, cancel := ctx10()
	defer cancel()
	return d.msgs(d.b.c.Labels(ns, task).Group(group).Batch(10).Pop(ctx))
}

var tcpAckStatus = map[string]client.AckStatus{"completed": client.Completed, "failed": client.Failed, "dlq": client.DLQ}

func (d tcpDoor) ack(m keptMsgLease, group, status, errText string) (bool, error) {
	ctx, cancel := ctx10()
	defer cancel()
	res, err := d.b.c.Ack(ctx, []client.Message{m.cm}, tcpAckStatus[status], client.AckOptions{Group: group, Error: errText})
	if err != nil {
		return false, err
	}
	return res[0].DeadLettered, res[0].Err
}

func (d tcpDoor) extend(lease string) error {
	ctx, cancel := ctx10()
	defer cancel()
	id, err := client.ParseID(lease)
	if err != nil {
		return err
	}
	_, err = d.b.c.Extend(ctx, id, 2*time.Minute)
	return err
}

func (d tcpDoor) txn(m keptMsgLease, group, errText string, push keptItem) (string, string, error) {
	ctx, cancel := ctx10()
	defer cancel()
	r, err := d.b.c.Transaction().AckWithError(m.cm, client.DLQ, errText).
		Push(client.Item{Queue: push.queue, Partition: push.partition, TransactionID: push.txn, TraceID: push.trace, Payload: []byte(`{"n":2}`)}).
		Commit(ctx)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return "", "", err
	}
	return r.Pushes[0].MessageID.String(), r.Pushes[0].PartitionID.String(), nil
}

func (d tcpDoor) seek(q, group string) error {
	ctx, cancel := ctx10()
	defer cancel()
	_, err := d.b.c.Seek(ctx, q, group, client.SeekTo{ToEnd: true})
	return err
}

func (d tcpDoor) deleteGroup(q, group string) error {
	ctx, cancel := ctx10()
	defer cancel()
	_, err := d.b.c.DeleteGroup(ctx, q, group)
	return err
}

func (d tcpDoor) queue(q string) (keptQueue, error) {
	ctx, cancel := ctx10()
	defer cancel()
	qi, err := d.b.c.QueueInfo(ctx, q)
	out := keptQueue{ns: qi.Options.Namespace, task: qi.Options.Task, groups: qi.Groups}
	for _, p := range qi.Partitions {
		out.partitions = append(out.partitions, p.Name)
	}
	return out, err
}

func (d tcpDoor) dlq(q string) ([]keptDeadEntry, error) {
	ctx, cancel := ctx10()
	defer cancel()
	es, _, err := d.b.c.DLQ(ctx, client.DLQFilter{Queue: q, Limit: 1000})
	out := make([]keptDeadEntry, len(es))
	for i, e := range es {
		out[i] = keptDeadEntry{e.Message.ID.String(), e.Message.Group, e.Error, e.Message.TransactionID, e.Message.TraceID, e.Message.Partition}
	}
	return out, err
}

type httpDoor struct{ b *keptBroker }

func (httpDoor) name() string { return "http" }

// call sends a JSON request and decodes the answer into out.
func (b *keptBroker) call(method, path string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		enc, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(enc)
	}
	ctx, cancel := ctx10()
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, b.url+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, got)
	}
	if out != nil && len(got) > 0 {
		if err := json.Unmarshal(got, out); err != nil {
			return fmt.Errorf("%s %s: %v in %s", method, path, err, got)
		}
	}
	return nil
}

func (d httpDoor) configure(q, ns, task string) error {
	return d.b.call("POST", "/api/v1/configure", map[string]any{"queue": q, "namespace": ns, "task": task,
		"options": map[string]any{"leaseTime": 60, "retryLimit": 1, "retryDelay": 0, "deadLetterQueue": true, "dlqAfterMaxRetries": true}}, 200, nil)
}

func (d httpDoor) push(items []keptItem) ([]keptPushed, error) {
	in := make([]map[string]any, len(items))
	for i, it := range items {
		in[i] = map[string]any{"queue": it.queue, "transactionId": it.txn, "traceId": it.trace, "payload": map[string]int{"n": 1}}
		if it.partition != "" {
			in[i]["partition"] = it.partition
		}
	}
	var res []struct {
		Status string `json:"status"`
		ID     string `json:"message_id"`
		PID    string `json:"partition_id"`
	}
	if err := d.b.call("POST", "/api/v1/push", map[string]any{"items": in}, 201, &res); err != nil {
		return nil, err
	}
	out := make([]keptPushed, len(res))
	for i, r := range res {
		out[i] = keptPushed{r.Status, r.ID, r.PID}
	}
	return out, nil
}

type httpPopped struct {
	Queue    string `json:"queue"`
	Messages []struct {
		ID        string `json:"id"`
		Txn       string `json:"transactionId"`
		Trace     string `json:"traceId"`
		Partition string `json:"partition"`
		PID       string `json:"partitionId"`
		Queue     string `json:"queue"`
		Lease     string `json:"leaseId"`
	} `json:"messages"`
}

func (d httpDoor) popPath(path string) ([]keptMsgLease, error) {
	var p httpPopped
	err := d.b.call("GET", path, nil, 200, &p)
	if err != nil && strings.Contains(err.Error(), "status 204") {
		return nil, nil
	}
	var out []keptMsgLease
	for _, m := range p.Messages {
		out = append(out, keptMsgLease{keptMsg: keptMsg{id: m.ID, queue: m.Queue, partition: m.Partition, pid: m.PID, txn: m.Txn, trace: m.Trace}, lease: m.Lease})
	}
	return out, err
}

func (d httpDoor) pop(q, partition, group, sub string, from time.Time, batch int) ([]keptMsgLease, error) {
	path := "/api/v1/pop/queue/" + url.PathEscape(q)
	if partition != "" {
		path += "/partition/" + url.PathEscape(partition)
	}
	v := url.Values{"consumerGroup": {group}, "batch": {fmt.Sprint(batch)}}
	switch sub {
	case "new":
		v.Set("subscriptionMode", "new")
	case "from":
		v.Set("subscriptionFrom", from.UTC().Format(time.RFC3339Nano))
	}
	return d.popPath(path + "?" + v.Encode())
}

func (d httpDoor) longPoll(q, partition, group string) ([]keptMsgLease, error) {
	v := url.Values{"consumerGroup": {group}, "wait": {"true"}, "timeout": {"8000"}}
	return d.popPath("/api/v1/pop/queue/" + url.PathEscape(q) + "/partition/" + url.PathEscape(partition) + "?" + v.Encode())
}

func (d httpDoor) popLabels(ns, task, group string) ([]keptMsgLease, error) {
	v := url.Values{"namespace": {ns}, "task": {task}, "consumerGroup": {group}, "batch": {"10"}}
	return d.popPath("/api/v1/pop?" + v.Encode())
}

type httpAckResult struct {
	Success bool    `json:"success"`
	Error   *string `json:"error"`
	DLQ     bool    `json:"dlq"`
}

func (d httpDoor) ack(m keptMsgLease, group, status, errText string) (bool, error) {
	body := map[string]any{"transactionId": m.txn, "partitionId": m.pid, "leaseId": m.lease, "status": status, "consumerGroup": group}
	if errText != "" {
		body["error"] = errText
	}
	var res []httpAckResult
	if err := d.b.call("POST", "/api/v1/ack", body, 200, &res); err != nil {
		return false, err
	}
	if !res[0].Success {
		return false, fmt.Errorf("ack refused: %v", *res[0].Error)
	}
	return res[0].DLQ, nil
}

func (d httpDoor) extend(lease string) error {
	var res []struct {
		Success bool `json:"success"`
	}
	if err := d.b.call("POST", "/api/v1/lease/"+lease+"/extend", map[string]any{"seconds": 120}, 200, &res); err != nil {
		return err
	}
	if !res[0].Success {
		return fmt.Errorf("lease %s not extended", lease)
	}
	return nil
}

func (d httpDoor) txn(m keptMsgLease, group, errText string, push keptItem) (string, string, error) {
	var res struct {
		Success bool   `json:"success"`
		Error   string `json:"error"`
		Results []struct {
			Type string `json:"type"`
			ID   string `json:"messageId"`
			PID  string `json:"partitionId"`
		} `json:"results"`
	}
	err := d.b.call("POST", "/api/v1/transaction", map[string]any{"operations": []map[string]any{
		{"type": "ack", "transactionId": m.txn, "partitionId": m.pid, "leaseId": m.lease, "status": "dlq", "consumerGroup": group, "error": errText},
		{"type": "push", "items": []map[string]any{{"queue": push.queue, "partition": push.partition, "transactionId": push.txn, "traceId": push.trace, "payload": map[string]int{"n": 2}}}},
	}}, 200, &res)
	if err == nil && (!res.Success || len(res.Results) != 2) {
		err = fmt.Errorf("transaction refused: %s", res.Error)
	}
	if err != nil {
		return "", "", err
	}
	return res.Results[1].ID, res.Results[1].PID, nil
}

func (d httpDoor) seek(q, group string) error {
	return d.b.call("POST", "/api/v1/consumer-groups/"+url.PathEscape(group)+"/queues/"+url.PathEscape(q)+"/seek", map[string]any{"toEnd": true}, 200, nil)
}

func (d httpDoor) deleteGroup(q, group string) error {
	return d.b.call("DELETE", "/api/v1/consumer-groups/"+url.PathEscape(group)+"/queues/"+url.PathEscape(q), nil, 200, nil)
}

func (d httpDoor) queue(q string) (keptQueue, error) {
	var qi struct {
		NS         string `json:"namespace"`
		Task       string `json:"task"`
		Partitions []struct {
			Name string `json:"name"`
		} `json:"partitions"`
	}
	if err := d.b.call("GET", "/api/v1/resources/queues/"+url.PathEscape(q), nil, 200, &qi); err != nil {
		return keptQueue{}, err
	}
	out := keptQueue{ns: qi.NS, task: qi.Task}
	for _, p := range qi.Partitions {
		out.partitions = append(out.partitions, p.Name)
	}
	var gs []struct {
		Name  string `json:"name"`
		Queue string `json:"queueName"`
		Mode  string `json:"subscriptionMode"`
	}
	if err := d.b.call("GET", "/api/v1/consumer-groups", nil, 200, &gs); err != nil {
		return out, err
	}
	out.modes = map[string]string{}
	for _, g := range gs {
		if g.Queue == q {
			out.groups = append(out.groups, g.Name)
			out.modes[g.Name] = g.Mode
		}
	}
	return out, nil
}

func (d httpDoor) dlq(q string) ([]keptDeadEntry, error) {
	var res struct {
		Messages []struct {
			ID        string  `json:"id"`
			Group     string  `json:"consumerGroup"`
			Error     *string `json:"errorMessage"`
			Txn       string  `json:"transactionId"`
			Trace     *string `json:"traceId"`
			Partition string  `json:"partition"`
		} `json:"messages"`
	}
	if err := d.b.call("GET", "/api/v1/dlq?limit=1000&queue="+url.QueryEscape(q), nil, 200, &res); err != nil {
		return nil, err
	}
	out := make([]keptDeadEntry, len(res.Messages))
	deref := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	for i, m := range res.Messages {
		out[i] = keptDeadEntry{m.ID, m.Group, deref(m.Error), m.Txn, deref(m.Trace), m.Partition}
	}
	return out, nil
}
