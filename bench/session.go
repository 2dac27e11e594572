package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sort"
)

// Options say where the servers are, or how the harness starts them.
type Options struct {
	// RegentTCP and RegentHTTP name a running Regent; when both are empty
	// the harness starts one for every run (InProcess, else RegentBin).
	RegentTCP, RegentHTTP string
	// RegentBin is the regent binary run as a child `regent serve`.
	RegentBin string
	// InProcess starts Regent inside this process (CPU and RSS are then not
	// the server's alone, and are not reported).
	InProcess func(ctx context.Context, sync string) (*Server, error)
	// Sync is the sync policy of a Regent the harness starts ("always").
	Sync string
	// ServeEnv is added to the environment of a Regent the harness starts
	// as a child (REGENT_JWT_SECRET turns auth on), and Token is the JWT
	// the Regent targets send.
	ServeEnv []string
	Token    string
	// ReplicatedProcs, when above 0, is the GOMAXPROCS of each broker of
	// the regent-replicated target (0: Go's default, every core).
	ReplicatedProcs int
	// TLS makes the regent target speak TLS to RegentTCP (a TLS
	// terminator in front of a running Regent).
	TLS *tls.Config

	// PeerURL names a running NATS server; StartPeer starts one for every
	// run instead, from PeerBin or else built by `go install` at
	// NATSServerVersion.
	PeerURL   string
	StartPeer bool
	PeerBin   string
	// RedisURL names a running Redis (host:port or redis://...); StartPeer
	// starts one for every run instead, from RedisBin or else the
	// redis-server on PATH.
	RedisURL string
	RedisBin string

	Log      io.Writer // the children's logs (nil: discarded)
	Progress *Progress

	// CPUProfile, when set, receives a CPU profile of this process during
	// each run's measured phase (a pre-fill excluded): the first run's at
	// CPUProfile, the n-th's at CPUProfile.n.
	CPUProfile string
}

// Session runs benchmarks with one set of Options; Close removes what it
// installed.
type Session struct {
	opts    Options
	natsBin string
	cleanup func()
	runs    int // runs started, for profile names
}

// NewSession returns a Session.
func NewSession(o Options) *Session { return &Session{opts: o} }

// Close removes the peer binary the session installed.
func (s *Session) Close() {
	if s.cleanup != nil {
		s.cleanup()
		s.cleanup = nil
	}
}

// Side is one contender of a comparison: a target and, for a peer, its
// sync setting.
type Side struct {
	Target         string
	PeerSyncAlways bool   // NATS: sync_interval always
	RedisFsync     string // Redis: appendfsync (always, everysec)
}

func (d Side) String() string {
	switch d.Target {
	case TargetNATS:
		if d.PeerSyncAlways {
			return "nats (sync always)"
		}
		return "nats (default sync)"
	case TargetRedis:
		if d.RedisFsync != "" {
			return "redis (appendfsync " + d.RedisFsync + ")"
		}
	}
	return d.Target
}

// server starts what side needs, fresh for one run; nil when it runs
// elsewhere.
func (s *Session) server(ctx context.Context, side Side) (*Server, Endpoints, error) {
	o := &s.opts
	if side.Target == TargetRedis {
		if !o.StartPeer {
			return nil, Endpoints{Redis: o.RedisURL}, nil
		}
		bin, err := FindRedis(o.RedisBin)
		if err != nil {
			return nil, Endpoints{}, err
		}
		fsync := side.RedisFsync
		if fsync == "" {
			fsync = RedisFsyncs[0]
		}
		srv, err := StartRedis(ctx, bin, fsync, o.Log)
		if err != nil {
			return nil, Endpoints{}, err
		}
		return srv, srv.Endpoints, nil
	}
	if side.Target == TargetNATS {
		if !o.StartPeer {
			return nil, Endpoints{NATS: o.PeerURL}, nil
		}
		if s.natsBin == "" {
			s.natsBin = o.PeerBin
			if s.natsBin == "" {
				if o.Progress != nil {
					fmt.Fprintf(o.Progress.w, "building nats-server %s with go install...\n", NATSServerVersion)
				}
				bin, cleanup, err := InstallNATS(ctx, o.Log)
				if err != nil {
					return nil, Endpoints{}, err
				}
				s.natsBin, s.cleanup = bin, cleanup
			}
		}
		srv, err := StartNATS(ctx, s.natsBin, side.PeerSyncAlways, o.Log)
		if err != nil {
			return nil, Endpoints{}, err
		}
		return srv, srv.Endpoints, nil
	}
	if side.Target == TargetRegentReplicated {
		if o.RegentBin == "" {
			return nil, Endpoints{}, fmt.Errorf("%w: target regent-replicated needs the harness to start its brokers as children (--server child)", ErrConfig)
		}
		env := o.ServeEnv[:len(o.ServeEnv):len(o.ServeEnv)]
		if o.ReplicatedProcs > 0 {
			env = append(env, fmt.Sprintf("GOMAXPROCS=%d", o.ReplicatedProcs))
		}
		srv, err := StartRegentCluster(ctx, o.RegentBin, o.Sync, replicatedBrokers, env, o.Log)
		if err != nil {
			return nil, Endpoints{}, err
		}
		ep := srv.Endpoints
		ep.Token = o.Token
		return srv, ep, nil
	}
	if o.RegentTCP != "" || o.RegentHTTP != "" {
		return nil, Endpoints{RegentTCP: o.RegentTCP, RegentHTTP: o.RegentHTTP, Token: o.Token, TLS: o.TLS}, nil
	}
	var srv *Server
	var err error
	if o.InProcess != nil {
		srv, err = o.InProcess(ctx, o.Sync)
	} else if o.RegentBin != "" {
		srv, err = StartRegentEnv(ctx, o.RegentBin, o.Sync, o.ServeEnv, o.Log)
	} else {
		err = fmt.Errorf("%w: no Regent to run against: give its address or let the harness start one", ErrConfig)
	}
	if err != nil {
		return nil, Endpoints{}, err
	}
	ep := srv.Endpoints
	ep.Token = o.Token
	return srv, ep, nil
}

// RunOne runs cfg against side, on a server started for this run when the
// options say so.
func (s *Session) RunOne(ctx context.Context, cfg Config, side Side) (Result, error) {
	cfg.Target = side.Target
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	srv, ep, err := s.server(ctx, side)
	if err != nil {
		return Result{}, err
	}
	defer srv.Stop()
	t, err := NewTarget(side.Target, ep)
	if err != nil {
		return Result{}, err
	}
	defer t.Close()
	s.opts.Progress.Label(fmt.Sprintf("%s %s", cfg.Scenario, side))
	// The harness's goroutines (and the client's, started from them) carry
	// the label bench=client in CPU profiles; an in-process server's do
	// not: go tool pprof -tagignore bench=client shows the server alone.
	s.runs++
	var prof io.Writer
	if s.opts.CPUProfile != "" {
		name := s.opts.CPUProfile
		if s.runs > 1 {
			name = fmt.Sprintf("%s.%d", name, s.runs)
		}
		f, err := os.Create(name)
		if err != nil {
			return Result{}, fmt.Errorf("bench: profile: %w", err)
		}
		defer f.Close()
		prof = f
	}
	var res Result
	pprof.Do(ctx, pprof.Labels("bench", "client"), func(ctx context.Context) {
		res, err = Run(ctx, cfg, t, srv.Probe(), s.opts.Progress, prof)
	})
	if srv != nil {
		res.Durability = srv.Durability
	} else {
		res.Durability = "as configured on the server"
	}
	if err != nil {
		return res, err
	}
	if serr := srv.Stop(); serr != nil {
		return res, fmt.Errorf("bench: stopping the server: %w", serr)
	}
	return res, nil
}

// Compare runs cfg on every side in turn (A B C A B C ...), rounds times,
// and hands each result to each as it comes.
func (s *Session) Compare(ctx context.Context, cfg Config, sides []Side, rounds int, each func(Result)) ([]Result, error) {
	var out []Result
	for r := 1; r <= rounds; r++ {
		for _, side := range sides {
			res, err := s.RunOne(ctx, cfg, side)
			if err != nil {
				return out, fmt.Errorf("round %d, %s: %w", r, side, err)
			}
			res.Round = r
			out = append(out, res)
			if each != nil {
				each(res)
			}
		}
	}
	return out, nil
}

// median of xs (0 when empty).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
