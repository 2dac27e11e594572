package bench

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestRedisTargetScenarios: the redis target takes the scenarios it can run
// like the others and refuses the rest with the reason.
func TestRedisTargetScenarios(t *testing.T) {
	for _, s := range Scenarios {
		c := Config{Scenario: s, Target: TargetRedis}
		c.Defaults()
		err := c.Validate()
		if slices.Contains(RedisScenarios, s) != (err == nil) {
			t.Errorf("%s on redis: %v", s, err)
		}
		if err != nil && !errors.Is(err, ErrConfig) {
			t.Errorf("%s on redis: %v is not ErrConfig", s, err)
		}
	}
	c := Config{Scenario: RetryStorm, Target: TargetRedis}
	c.Defaults()
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "no negative ack") {
		t.Errorf("retry-storm on redis: %v", err)
	}
	for _, c := range []Config{
		{Scenario: Pipeline, Target: TargetRedis, IdlePartitions: 10},
		{Scenario: Pipeline, Target: TargetRedis, FailFraction: 0.1},
	} {
		c.Defaults()
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

func TestRedisTargetAddresses(t *testing.T) {
	for _, tc := range []struct{ in, addr string }{
		{"127.0.0.1:6380", "127.0.0.1:6380"},
		{"redis://127.0.0.1:6381/2", "127.0.0.1:6381"},
	} {
		tg, err := NewTarget(TargetRedis, Endpoints{Redis: tc.in})
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if got := tg.(*redisTarget).opts.Addr; got != tc.addr || tg.Name() != TargetRedis {
			t.Errorf("%s: addr %s, name %s", tc.in, got, tg.Name())
		}
	}
	for _, bad := range []string{"", "redis://127.0.0.1:6381/x"} {
		if _, err := NewTarget(TargetRedis, Endpoints{Redis: bad}); !errors.Is(err, ErrConfig) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestRedisSides(t *testing.T) {
	for _, f := range RedisFsyncs {
		r := Result{Config: Config{Target: TargetRedis}, Durability: RedisDurability(f)}
		if got, want := sideOf(&r), (Side{Target: TargetRedis, RedisFsync: f}).String(); got != want || !strings.Contains(got, f) {
			t.Errorf("%s: side of result %q, side %q", f, got, want)
		}
	}
	r := Result{Config: Config{Target: TargetRedis}, Durability: "as configured on the server"}
	if sideOf(&r) != "redis" || (Side{Target: TargetRedis}).String() != "redis" {
		t.Errorf("a running redis: %q", sideOf(&r))
	}
}
