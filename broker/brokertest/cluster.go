package brokertest

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regentmq/regent/broker"
	"github.com/regentmq/regent/internal/freeport"
	"github.com/regentmq/regent/protocol"
)

// Cluster is a cluster of brokers in one process, each with an embedded
// etcd voter, on 127.0.0.1.
type Cluster struct {
	t       testing.TB
	Name    string
	Brokers []*broker.Broker
	Options []broker.Options // each broker's, as started: Restart uses them
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago,
// drawn below the ephemeral range (internal/freeport).
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := freeport.Get()
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	return p
}

// StartCluster starts n brokers (ids b1..bn) of one cluster, all etcd
// voters and all members of the first map, concurrently (etcd waits for a
// quorum), and stops them when t ends. tune, when set, adjusts each
// broker's options before its start. Ports are chosen before the brokers
// bind them, so another test may take one meanwhile: a start that fails on
// a port in use is made again on new ports and directories, up to three
// times.
func StartCluster(t testing.TB, n int, tune func(i int, o *broker.Options)) *Cluster {
	t.Helper()
	for attempt := 1; ; attempt++ {
		c, err := startCluster(t, n, tune)
		if err == nil {
			t.Cleanup(c.stop)
			return c
		}
		c.stop()
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatalf("brokertest: %v", err)
		}
		t.Logf("brokertest: start %d: a port was taken (%v): again on new ports", attempt, err)
	}
}

func startCluster(t testing.TB, n int, tune func(i int, o *broker.Options)) (*Cluster, error) {
	c := &Cluster{t: t, Name: "test", Brokers: make([]*broker.Broker, n), Options: make([]broker.Options, n)}
	var peers []string
	for i := range n {
		ip := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
		peers = append(peers, fmt.Sprintf("b%d=http://%s", i+1, ip))
	}
	var members []string
	for i := range n {
		members = append(members, fmt.Sprintf("b%d", i+1))
	}
	dir := t.TempDir()
	for i := range n {
		peer := strings.SplitN(peers[i], "=", 2)[1]
		o := broker.Options{
			TCPAddr:         fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
			HTTPAddr:        fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
			ShutdownTimeout: ShutdownTimeout,
			Cluster: &broker.ClusterOptions{
				Name: c.Name, Node: members[i], Members: members, Shards: 16,
				Voter: true, EtcdDir: filepath.Join(dir, members[i], "etcd"),
				PeerURL: peer, ClientURL: fmt.Sprintf("http://127.0.0.1:%d", FreePort(t)),
				InitialCluster: strings.Join(peers, ","),
				SessionTTL:     2 * time.Second,
			},
		}
		o.Journal.Dir = filepath.Join(dir, members[i])
		if tune != nil {
			tune(i, &o)
		}
		c.Options[i] = o
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if c.Brokers[i], err = start(c.Options[i]); err != nil {
				errs[i] = fmt.Errorf("cluster broker %s: %w", members[i], err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	// Each broker's view of the cluster follows etcd a little late: a
	// client that dials one at once may be told another is down. Tests
	// start once every broker sees every broker live.
	deadline := time.Now().Add(30 * time.Second)
	for _, b := range c.Brokers {
		for {
			live, err := liveIn(b.TCPAddr().String())
			if err == nil && live == n {
				break
			}
			if code := protocol.CodeOf(err); code == protocol.CodeUnauthenticated || code == protocol.CodeForbidden {
				break // auth on: the map is not the kit's to read
			}
			if time.Now().After(deadline) {
				return c, fmt.Errorf("%s sees %d of %d brokers live (%v)", b.TCPAddr(), live, n, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return c, nil
}

// liveIn asks the broker at addr for its cluster's map (Hello, then
// Metadata) and counts the brokers it says are live.
func liveIn(addr string) (int, error) {
	nc, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(2 * time.Second))
	req := protocol.AppendHelloRequest(nil, 1, &protocol.HelloRequest{Major: protocol.VersionMajor, Minor: protocol.VersionMinor, ClientName: "brokertest"})
	req = protocol.AppendMetadataRequest(req, 2)
	if _, err := nc.Write(req); err != nil {
		return 0, err
	}
	rd := protocol.NewReader(nc, protocol.DefaultMaxFrame)
	var md protocol.MetadataReply
	for range 2 {
		f, err := rd.Next()
		if err != nil {
			return 0, err
		}
		if f.IsError() {
			var er protocol.ErrorReply
			_ = er.Decode(f.Body)
			return 0, er.Err()
		}
		if f.Header.ID == 2 {
			if err := md.Decode(f.Body); err != nil {
				return 0, err
			}
		}
	}
	live := 0
	for _, b := range md.Brokers {
		if b.Live {
			live++
		}
	}
	return live, nil
}

func start(o broker.Options) (*broker.Broker, error) {
	b, err := broker.New(o)
	if err != nil {
		return nil, err
	}
	if err := b.Main(); err != nil {
		return nil, err
	}
	return b, nil
}

// Stop stops broker i (an orderly Exit: it leaves the cluster at once).
func (c *Cluster) Stop(i int) {
	c.t.Helper()
	if b := c.Brokers[i]; b != nil {
		c.Brokers[i] = nil
		if err := b.Exit(); err != nil {
			c.t.Errorf("brokertest: exit of b%d: %v", i+1, err)
		}
	}
}

// Restart starts broker i again with its options (its data and etcd
// directories as they were).
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	b, err := start(c.Options[i])
	if err != nil {
		c.t.Fatalf("brokertest: restart of b%d: %v", i+1, err)
	}
	c.Brokers[i] = b
}

func (c *Cluster) stop() {
	var wg sync.WaitGroup
	for i := range c.Brokers {
		wg.Add(1)
		go func() { defer wg.Done(); c.Stop(i) }()
	}
	wg.Wait()
}
