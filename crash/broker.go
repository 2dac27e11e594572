package crash

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/regentmq/regent/internal/freeport"
	"github.com/regentmq/regent/protocol"
)

// broker is the `regent serve` child process, restarted on the same data
// directory and ports.
type broker struct {
	cfg      *Config
	n        int // its number: logs are broker-N-<start>.log in a cluster
	dataDir  string
	tcpAddr  string
	httpAddr string
	args     []string // a cluster's broker's flags
	etcdURL  string   // a cluster's broker's embedded etcd client URL
	starts   int
	cmd      *exec.Cmd
	exited   chan struct{}
	logFile  *os.File
}

func newBroker(cfg *Config) (*broker, error) {
	b := &broker{cfg: cfg, dataDir: filepath.Join(cfg.Dir, "data")}
	var err error
	if b.tcpAddr, err = freeAddr(); err != nil {
		return nil, err
	}
	if b.httpAddr, err = freeAddr(); err != nil {
		return nil, err
	}
	return b, nil
}

// newClusterIn makes the brokers of a cluster of n (Config.Brokers): each an
// embedded etcd voter, all members of the first shard map.
//
// The brokers' directories are <dir>-<n> under Config.Dir.
func newClusterIn(cfg *Config, n int, dir string) ([]*broker, error) {
	var peers []string
	bs := make([]*broker, n)
	clientURLs := make([]string, n)
	for i := range n {
		b, err := newBroker(cfg)
		if err != nil {
			return nil, err
		}
		b.n = i + 1
		b.dataDir = filepath.Join(cfg.Dir, fmt.Sprintf("%s-%d", dir, i+1))
		peer, err := freeAddr()
		if err != nil {
			return nil, err
		}
		if clientURLs[i], err = freeAddr(); err != nil {
			return nil, err
		}
		peers = append(peers, fmt.Sprintf("b%d=http://%s", i+1, peer))
		bs[i] = b
	}
	for i, b := range bs {
		b.etcdURL = "http://" + clientURLs[i]
		b.args = []string{"--cluster", "crash", "--node", fmt.Sprintf("b%d", i+1), "--peers", strings.Join(peers, ","),
			"--etcd-voter", "--etcd-client-url", "http://" + clientURLs[i], "--shards", "16"}
		if cfg.Replicas > 0 {
			b.args = append(b.args, "--replicas", fmt.Sprint(cfg.Replicas))
		}
	}
	return bs, nil
}

// freeAddr finds a free loopback port (the broker binds it again on every
// restart: gnet and net/http both set SO_REUSEADDR), below the ephemeral
// range so that no outgoing connection takes it while the broker is down.
func freeAddr() (string, error) {
	a, err := freeport.Addr()
	if err != nil {
		return "", fmt.Errorf("crash: %w", err)
	}
	return a, nil
}

// start runs the broker and waits until its TCP port answers a handshake,
// or it exits (an error quoting its log), or StartTimeout passes.
func (b *broker) start(ctx context.Context) error {
	b.starts++
	lf, err := os.Create(b.logPath())
	if err != nil {
		return err
	}
	level := "warn"
	if l := os.Getenv("REGENT_CRASH_LOG_LEVEL"); l != "" {
		level = l // for a post-mortem (with REGENT_CRASH_DIR): info shows each takeover
	}
	args := append([]string{"serve", "--data", b.dataDir, "--tcp", b.tcpAddr, "--http", b.httpAddr, "--log-level", level}, b.args...)
	args = append(args, b.cfg.Args...)
	cmd := exec.Command(b.cfg.Binary, args...)
	cmd.Env = append(os.Environ(), b.cfg.Env...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return fmt.Errorf("crash: start %s: %w", b.cfg.Binary, err)
	}
	b.cmd, b.logFile, b.exited = cmd, lf, make(chan struct{})
	go func(done chan struct{}) {
		cmd.Wait()
		close(done)
	}(b.exited)
	deadline := time.Now().Add(b.cfg.StartTimeout)
	for {
		if err := probe(b.tcpAddr); err == nil {
			return nil
		}
		select {
		case <-b.exited:
			return fmt.Errorf("the broker exited (%v) before serving; its log:\n%s", cmd.ProcessState, b.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the broker did not serve within %v; its log:\n%s", b.cfg.StartTimeout, b.logTail())
		}
	}
}

// probe says Hello on the TCP port and wants Regent's answer (a
// connection is accepted only once the journal is recovered and the engine
// runs: serve listens last). A connection alone is not enough: another
// program may hold the port (our broker then fails to bind it and exits).
func probe(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	hello := protocol.AppendHelloRequest(nil, 0, &protocol.HelloRequest{Major: protocol.VersionMajor, Minor: protocol.VersionMinor, ClientName: "crash-probe"})
	if _, err := c.Write(hello); err != nil {
		return err
	}
	f, err := protocol.NewReader(c, protocol.DefaultMaxFrame).Next()
	if err != nil {
		return err
	}
	if f.IsError() {
		var er protocol.ErrorReply
		if err := er.Decode(f.Body); err != nil {
			return err
		}
		return er.Err()
	}
	var hr protocol.HelloReply
	if err := hr.Decode(f.Body); err != nil {
		return err
	}
	if hr.ServerName != "regent" {
		return fmt.Errorf("%s answers as %q, not regent", addr, hr.ServerName)
	}
	return nil
}

// kill sends SIGKILL and waits for the process to be gone.
func (b *broker) kill() {
	if b.cmd == nil {
		return
	}
	b.cmd.Process.Kill()
	<-b.exited
	b.logFile.Close()
	b.cmd = nil
}

// stop asks the broker to shut down (SIGTERM) and waits up to grace.
func (b *broker) stop(grace time.Duration) error {
	if b.cmd == nil {
		return nil
	}
	defer b.kill()
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-b.exited:
		if !b.cmd.ProcessState.Success() {
			return fmt.Errorf("the broker stopped with %v; its log:\n%s", b.cmd.ProcessState, b.logTail())
		}
		return nil
	case <-time.After(grace):
		return errors.New("the broker did not stop in time")
	}
}

// logTail is the end of the current start's log.
func (b *broker) logTail() string {
	data, _ := os.ReadFile(b.logPath())
	s := string(data)
	if len(s) > 4000 {
		s = "..." + s[len(s)-4000:]
	}
	return strings.TrimRight(s, "\n")
}

// logPath is the log of the broker's current start.
func (b *broker) logPath() string {
	if b.n == 0 {
		return logPath(b.cfg.Dir, b.starts)
	}
	return filepath.Join(b.cfg.Dir, fmt.Sprintf("broker-%d-%d.log", b.n, b.starts))
}

// name is how the logs call the broker.
func (b *broker) name() string {
	if b.n == 0 {
		return "the broker"
	}
	return fmt.Sprintf("broker b%d", b.n)
}
