package bench

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis peer: Debian's redis-server (the harness builds nothing: it
// runs the binary on PATH, or RedisBin).
const RedisServerCommand = "redis-server"

// RedisFsyncs are the AOF fsync policies the harness starts Redis with.
var RedisFsyncs = []string{"everysec", "always"}

// RedisDurability describes Redis's AOF fsync policy.
func RedisDurability(fsync string) string {
	switch fsync {
	case "always":
		return "appendfsync always: the AOF written and fsynced before the answers of each event-loop cycle"
	case "everysec":
		return "appendfsync everysec: the AOF written before the answer, fsynced once a second"
	}
	return "appendfsync " + fsync
}

// FindRedis returns the redis-server to run: bin when given, else the one
// on PATH.
func FindRedis(bin string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	p, err := exec.LookPath(RedisServerCommand)
	if err != nil {
		return "", fmt.Errorf("bench: the redis peer needs %s on PATH (Debian's redis-server package) or --redis-bin: %w",
			RedisServerCommand, err)
	}
	return p, nil
}

// StartRedis runs the redis-server binary bin on a free port of 127.0.0.1
// with a temp dir, no RDB snapshots (save ""), and the append-only file on
// (appendonly yes) with the given appendfsync policy ("always" or
// "everysec"), and waits until it answers PING. AOF rewrites keep Redis's
// defaults: they run in a forked child, whose CPU time the probe counts
// once it has ended (its memory is not in the server's RSS).
func StartRedis(ctx context.Context, bin, fsync string, logw io.Writer) (*Server, error) {
	if !slices.Contains(RedisFsyncs, fsync) {
		return nil, fmt.Errorf("%w: redis appendfsync %q: want %s", ErrConfig, fsync, strings.Join(RedisFsyncs, " or "))
	}
	conf := func(dir string, port int) string {
		return fmt.Sprintf("bind 127.0.0.1\nport %d\nprotected-mode yes\ndaemonize no\nlogfile \"\"\nloglevel warning\n"+
			"dir %q\nsave \"\"\nappendonly yes\nappendfsync %s\n", port, dir, fsync)
	}
	p, err := startPeer("redis-server", bin, nil, "redis.conf", conf, logw)
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", p.port)
	srv := &Server{Endpoints: Endpoints{Redis: addr}, Pid: p.cmd.Process.Pid, Durability: RedisDurability(fsync),
		StopFunc: stopProcess(p.cmd, p.exited, 30*time.Second, p.dir)}
	return waitReady(ctx, srv, "redis-server", p.exited, &p.out, func() error { return redisReady(ctx, addr, fsync) })
}

// redisReady: PING answers PONG, and the AOF is on with the appendfsync
// asked for.
func redisReady(ctx context.Context, addr, fsync string) error {
	cl := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true, MaxRetries: -1, DialTimeout: time.Second})
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := cl.Ping(pctx).Err(); err != nil {
		return err
	}
	v, err := cl.ConfigGet(pctx, "append*").Result()
	if err != nil {
		return err
	}
	if v["appendonly"] != "yes" || v["appendfsync"] != fsync {
		return fmt.Errorf("appendonly %q, appendfsync %q: want yes, %s", v["appendonly"], v["appendfsync"], fsync)
	}
	return nil
}
