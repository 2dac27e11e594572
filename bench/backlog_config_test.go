package bench

import (
	"strings"
	"testing"
)

// TestDropCachesIsBacklogOnly: only the backlog scenario takes DropCaches,
// and its load line says the drain started with the page cache dropped.
func TestDropCachesIsBacklogOnly(t *testing.T) {
	for _, s := range []string{Push, Consume, Pipeline, Fanout} {
		c := Config{Scenario: s, DropCaches: true}
		c.Defaults()
		if err := c.Validate(); err == nil {
			t.Errorf("%s took DropCaches", s)
		}
	}
	c := Config{Scenario: Backlog, DropCaches: true}
	c.Defaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if d := describeLoad(&c); !strings.Contains(d, "page cache dropped before the drain") {
		t.Fatalf("load %q", d)
	}
	c.DropCaches = false
	if d := describeLoad(&c); strings.Contains(d, "page cache") {
		t.Fatalf("load %q", d)
	}
}
