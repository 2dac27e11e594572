package httpapi

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver"
)

// A bridge without one engine (a replicated cluster's broker) registers
// every route; those of routesWithoutEngine are served (each named there
// exactly as registered: a misspelt one would answer 503), the others
// answer 503 saying why, and an unknown path 404.
func TestBridgeWithoutAnEngine(t *testing.T) {
	if _, err := New(Config{}, nil); err == nil {
		t.Fatal("a bridge with neither an engine nor a data plane was built")
	}
	s, err := New(Config{DataPlane: struct{ netserver.DataPlane }{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for p := range routesWithoutEngine {
		if !slices.Contains(s.patterns, p) {
			t.Errorf("routesWithoutEngine names %q, which is no route", p)
		}
	}
	for _, c := range []struct {
		path string
		want int
	}{
		{"/health", http.StatusOK},
		{"/api/v1/system/maintenance", http.StatusOK},
		{"/api/v1/resources/queues", http.StatusServiceUnavailable},
		{"/metrics", http.StatusServiceUnavailable},
		{"/api/v1/status", http.StatusServiceUnavailable},
		{"/no/such/route", http.StatusNotFound},
	} {
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, httptest.NewRequest("GET", c.path, nil))
		if w.Code != c.want {
			t.Errorf("GET %s: %d %s, want %d", c.path, w.Code, w.Body, c.want)
		}
	}
}

// Without an engine, a transaction's requiredLeases follow
// Config.UncheckedAcks, as they follow the engine's setting with one.
func TestRequiredLeasesWithoutAnEngine(t *testing.T) {
	lease := engine.UUID{7}
	it := &engine.AckItem{PartitionID: engine.UUID{9}, Group: "g"}
	for _, unchecked := range []bool{false, true} {
		s, err := New(Config{DataPlane: noLeases{}, UncheckedAcks: unchecked}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := s.requiredLease(it, []engine.UUID{lease})
		if want := map[bool]engine.UUID{false: lease, true: {}}[unchecked]; got != want {
			t.Errorf("unchecked acks %v: required lease %v, want %v", unchecked, got, want)
		}
	}
}

// noLeases is a data plane that knows no live lease.
type noLeases struct{ netserver.DataPlane }

func (noLeases) LiveLease(engine.UUID, string) (engine.UUID, bool) { return engine.UUID{}, false }
