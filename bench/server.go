package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Server is a broker the harness started for a run, on 127.0.0.1, with a
// data dir of its own that Stop removes.
type Server struct {
	Endpoints
	// Pid is the server's process when it runs as a child (0 in process):
	// its CPU time and peak RSS are then read from /proc.
	Pid int
	// Durability says when it answers pushes and acks.
	Durability string
	// StopFunc ends the server and removes its data.
	StopFunc func() error
	// probe, when set, reads the server's processes (a cluster's several).
	probe Probe
}

// Stop ends the server and removes its data.
func (s *Server) Stop() error {
	if s == nil || s.StopFunc == nil {
		return nil
	}
	stop := s.StopFunc
	s.StopFunc = nil
	return stop()
}

// Probe reads the server process's use of CPU and memory (nil in process).
func (s *Server) Probe() Probe {
	if s != nil && s.probe != nil {
		return s.probe
	}
	if s == nil || s.Pid == 0 {
		return nil
	}
	return procProbe(s.Pid)
}

// RegentDurability describes Regent's sync policy.
func RegentDurability(sync string) string {
	switch {
	case sync == "" || sync == "always":
		return "sync always: fsync before every answer"
	case sync == "none":
		return "sync none: answered after the write to the OS, no fsync"
	}
	return "sync " + sync + ": fsync at that interval, answered after the write to the OS"
}

// StartRegent runs `bin serve` as a child process on free ports of
// 127.0.0.1 with a temp data dir and the given sync policy. Its log goes
// to logw (nil: discarded).
func StartRegent(ctx context.Context, bin, sync string, logw io.Writer) (*Server, error) {
	return StartRegentEnv(ctx, bin, sync, nil, logw)
}

// StartRegentEnv is StartRegent with env added to the child's environment.
func StartRegentEnv(ctx context.Context, bin, sync string, env []string, logw io.Writer) (*Server, error) {
	dir, err := os.MkdirTemp("", "regent-bench-*")
	if err != nil {
		return nil, err
	}
	if sync == "" {
		sync = "always"
	}
	srv, err := startServe(ctx, bin, []string{"--data", filepath.Join(dir, "data"), "--tcp", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--sync", sync, "--log-level", "warn"}, env, logw)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	srv.Durability = RegentDurability(sync)
	stop := srv.StopFunc
	srv.StopFunc = func() error {
		err := stop()
		os.RemoveAll(dir)
		return err
	}
	return srv, nil
}

// startServe runs `bin serve args...` as a child process and waits until
// it listens (it prints its addresses then).
func startServe(ctx context.Context, bin string, args, env []string, logw io.Writer) (*Server, error) {
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	cmd.Env = append(append(os.Environ(), "REGENT_LOG_FORMAT=text"), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var errBuf tailBuffer
	cmd.Stderr = io.MultiWriter(&errBuf, orDiscard(logw))
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start %s serve: %w", bin, err)
	}
	srv := &Server{Pid: cmd.Process.Pid}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	srv.StopFunc = stopProcess(cmd, exited, 30*time.Second, "")
	// serve prints its addresses once it listens: "  tcp     127.0.0.1:port (...)".
	found := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) >= 2 {
				switch f[0] {
				case "tcp":
					srv.RegentTCP = f[1]
				case "http":
					srv.RegentHTTP = f[1]
				}
			}
			if srv.RegentTCP != "" && srv.RegentHTTP != "" {
				found <- nil
				io.Copy(io.Discard, out)
				return
			}
		}
		found <- errors.New("its output ended before it listened")
	}()
	select {
	case err = <-found:
		if err != nil {
			// Its output ended: it is exiting. Wait for it, so that what
			// it said on stderr is all in errBuf (Wait copies it).
			select {
			case werr := <-exited:
				exited <- werr
				err = fmt.Errorf("%w (it exited: %v)", err, werr)
			case <-time.After(5 * time.Second):
			}
		}
	case err = <-exited:
		exited <- err
		err = fmt.Errorf("it exited: %v", err)
	case <-time.After(60 * time.Second):
		err = errors.New("it did not listen within 60 s")
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		srv.Stop()
		return nil, fmt.Errorf("bench: regent serve: %w; its log: %s", err, errBuf.String())
	}
	return srv, nil
}

// stopProcess returns a stop function: SIGTERM, then SIGKILL after grace,
// then the removal of dir.
func stopProcess(cmd *exec.Cmd, exited chan error, grace time.Duration, dir string) func() error {
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err = <-exited:
			case <-time.After(grace):
				cmd.Process.Kill()
				err = <-exited
				err = fmt.Errorf("bench: %s did not stop within %s: killed (%v)", filepath.Base(cmd.Path), grace, err)
			}
			var ee *exec.ExitError
			if errors.As(err, &ee) && ee.Exited() && ee.ExitCode() == 0 {
				err = nil
			}
			if ee != nil && !ee.Exited() { // ended by our SIGTERM
				err = nil
			}
			if dir != "" {
				os.RemoveAll(dir)
			}
		})
		return err
	}
}

// The NATS peer: nats-server at a pinned version, built by `go install`.
const (
	NATSServerModule  = "github.com/nats-io/nats-server/v2"
	NATSServerVersion = "v2.15.3"
)

// NATSDurability describes a NATS JetStream sync setting.
func NATSDurability(syncAlways bool) string {
	if syncAlways {
		return "sync_interval always: fsync after every write"
	}
	return "default: fsync every 2 min (sync_interval 2m), acks after the write to the OS"
}

// InstallNATS builds nats-server at NATSServerVersion with `go install`
// into a temp GOBIN (the Go build cache makes later installs quick). It
// returns the binary and a function that removes it.
func InstallNATS(ctx context.Context, logw io.Writer) (string, func(), error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", nil, fmt.Errorf("bench: building nats-server needs the go command on PATH (or give a binary with --peer-bin): %w", err)
	}
	dir, err := os.MkdirTemp("", "regent-bench-peer-*")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	cmd := exec.CommandContext(ctx, goBin, "install", NATSServerModule+"@"+NATSServerVersion)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOWORK=off", "GOFLAGS=-mod=mod")
	var out tailBuffer
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&out, orDiscard(logw)), io.MultiWriter(&out, orDiscard(logw))
	if err := cmd.Run(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("bench: go install %s@%s: %w: %s", NATSServerModule, NATSServerVersion, err, out.String())
	}
	return filepath.Join(dir, "nats-server"), cleanup, nil
}

// StartNATS runs the nats-server binary bin with JetStream (file storage
// in a temp dir) on a free port of 127.0.0.1, and waits until JetStream
// answers.
func StartNATS(ctx context.Context, bin string, syncAlways bool, logw io.Writer) (*Server, error) {
	conf := func(dir string, port int) string {
		c := fmt.Sprintf("listen: \"127.0.0.1:%d\"\njetstream {\n  store_dir: %q\n", port, filepath.Join(dir, "js"))
		if syncAlways {
			c += "  sync_interval: always\n"
		}
		return c + "}\n"
	}
	p, err := startPeer("nats-server", bin, []string{"-c"}, "nats.conf", conf, logw)
	if err != nil {
		return nil, err
	}
	srv := &Server{Endpoints: Endpoints{NATS: fmt.Sprintf("nats://127.0.0.1:%d", p.port)}, Pid: p.cmd.Process.Pid,
		Durability: NATSDurability(syncAlways), StopFunc: stopProcess(p.cmd, p.exited, 15*time.Second, p.dir)}
	return waitReady(ctx, srv, "nats-server", p.exited, &p.out, func() error { return natsReady(ctx, srv.NATS) })
}

// peerProcess is a peer server (nats-server, redis-server) started on a free
// port of 127.0.0.1 with a config file in a temp dir of its own.
type peerProcess struct {
	dir    string
	port   int
	cmd    *exec.Cmd
	exited chan error // its Wait's answer, once
	out    tailBuffer // the tail of its stdout and stderr
}

// startPeer makes the temp dir, picks the port, writes conf(dir, port) to
// confName there, and starts bin with args and the config file's path. On
// an error nothing is left behind.
func startPeer(name, bin string, args []string, confName string, conf func(dir string, port int) string, logw io.Writer) (*peerProcess, error) {
	p := &peerProcess{exited: make(chan error, 1)}
	var err error
	if p.dir, err = os.MkdirTemp("", "regent-bench-"+name+"-*"); err != nil {
		return nil, err
	}
	if p.port, err = freePort(); err != nil {
		os.RemoveAll(p.dir)
		return nil, err
	}
	confPath := filepath.Join(p.dir, confName)
	if err := os.WriteFile(confPath, []byte(conf(p.dir, p.port)), 0o600); err != nil {
		os.RemoveAll(p.dir)
		return nil, err
	}
	p.cmd = exec.Command(bin, append(args, confPath)...)
	p.cmd.Stdout, p.cmd.Stderr = io.MultiWriter(&p.out, orDiscard(logw)), io.MultiWriter(&p.out, orDiscard(logw))
	if err := p.cmd.Start(); err != nil {
		os.RemoveAll(p.dir)
		return nil, fmt.Errorf("bench: start %s: %w", name, err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	return p, nil
}

// waitReady polls ready until a peer server started as srv answers (then
// returns srv), exits, or is not ready within 20 s (then stops it and says
// why, with the tail of its output).
func waitReady(ctx context.Context, srv *Server, name string, exited chan error, out *tailBuffer, ready func() error) (*Server, error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := ready()
		if err == nil {
			return srv, nil
		}
		select {
		case e := <-exited:
			exited <- e
			srv.Stop()
			return nil, fmt.Errorf("bench: %s exited (%v): %s", name, e, out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			srv.Stop()
			return nil, fmt.Errorf("bench: %s not ready: %v: %s", name, err, out.String())
		}
	}
}

func natsReady(ctx context.Context, url string) error {
	nc, err := nats.Connect(url, nats.Timeout(time.Second), nats.MaxReconnects(0))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = js.AccountInfo(actx)
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// tailBuffer keeps the last 4 KiB written to it (a child's last words).
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = append(t.b[:0], t.b[len(t.b)-4096:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.b))
}

// procProbe reads /proc/<pid>.
type procProbe int

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

func (p procProbe) CPU() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", int(p)))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime + stime + cutime + cstime (fields 14 to 17) of
// /proc/<pid>/stat: the process's CPU time and that of its children that
// ended and were waited for (Redis's AOF rewrites run in a forked child;
// Regent and NATS start none). The command name (field 2) may hold spaces,
// so fields count from its ')'.
func parseStatCPU(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("bench: /proc stat: no ')'")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return 0, errors.New("bench: /proc stat: too few fields")
	}
	var ticks int64
	for _, s := range f[11:15] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: /proc stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

func (p procProbe) PeakRSS() (int64, error) { return p.status("VmHWM:") }

func (p procProbe) RSS() (int64, error) { return p.status("VmRSS:") }

func (p procProbe) status(key string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", int(p)))
	if err != nil {
		return 0, err
	}
	return parseStatusKB(b, key)
}

func parseStatusKB(b []byte, key string) (int64, error) {
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, key) {
			f := strings.Fields(line[len(key):])
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, fmt.Errorf("bench: /proc status: no %s", key)
}
