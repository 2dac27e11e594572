package regent_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The import rules of DESIGN.md's package table ("The house"), kept true by a
// test rather than promised. Each of Regent's packages names what it may
// import beyond the standard library: Regent's own packages by their folder,
// other modules by their import path. A package that is not in the table
// fails the test, so a new folder is placed in the house before it lands.

const module = "github.com/regentmq/regent"

type rule struct {
	// may lists what the package may import directly besides the standard
	// library: a folder of this module ("engine") or a module path prefix.
	may []string
	// never lists packages that must not be reached from it through its own
	// code: the walk goes through Regent's packages and the standard library,
	// not into other modules' code (gnet itself reaches net/http through its
	// logger, go.uber.org/zap; that is gnet's, not ours).
	never []string
}

var rules = map[string]rule{
	"protocol":                     {},
	"log":                          {may: []string{"github.com/tidwall/wal", "github.com/klauspost/compress"}},
	"engine":                       {may: []string{"github.com/VictoriaMetrics/metrics"}, never: []string{"net", "net/http", module + "/protocol", module + "/log"}},
	"netserver/internal/testhooks": {},
	"netserver": {may: []string{"engine", "protocol", "netserver/internal/testhooks", "internal/pagemerge", "github.com/golang-jwt/jwt/v5"},
		never: []string{"net/http", "github.com/panjf2000/gnet/v2"}},
	"netserver/tcp": {may: []string{"netserver", "netserver/internal/testhooks", "engine", "protocol", "github.com/panjf2000/gnet/v2", "github.com/VictoriaMetrics/metrics",
		"golang.org/x/sync", "golang.org/x/sys"},
		never: []string{"net/http", module + "/netserver/httpapi"}},
	"netserver/httpapi": {may: []string{"netserver", "netserver/internal/testhooks", "netserver/httpapi/dashboard", "engine", "protocol",
		"github.com/VictoriaMetrics/metrics", "github.com/golang-jwt/jwt/v5", "golang.org/x/sync"},
		never: []string{"github.com/panjf2000/gnet/v2", module + "/netserver/tcp"}},
	"netserver/httpapi/dashboard": {never: []string{module + "/engine"}},
	"broker": {may: []string{"engine", "log", "netserver", "netserver/tcp", "netserver/httpapi", "protocol",
		"cluster", "cluster/meta", "cluster/replica", "client", "go.etcd.io/etcd", "github.com/VictoriaMetrics/metrics", "golang.org/x/sync"}},
	"broker/brokertest":  {may: []string{"broker", "engine", "log", "netserver", "netserver/tcp", "netserver/httpapi", "protocol", "internal/freeport"}},
	"client":             {may: []string{"protocol", "cluster", "internal/pagemerge"}},
	"bench":              {may: []string{"client", "protocol", "github.com/nats-io/nats.go", "github.com/redis/go-redis/v9"}},
	"bench/benchtest":    {may: []string{"bench"}},
	"crash":              {may: []string{"client", "protocol", "internal/freeport"}},
	"internal/freeport":  {},
	"internal/pagemerge": {},
	"cluster":            {},
	"cluster/meta":       {may: []string{"cluster", "go.etcd.io/etcd", "go.uber.org/zap"}},
	"cluster/replica":    {may: []string{"engine", "log", "protocol", "go.etcd.io/raft/v3", "google.golang.org/protobuf"}, never: []string{"net/http"}},
	"examples/tumbling":  {may: []string{"client"}},
	"cmd/regent":         {may: []string{"*"}},
}

// everywhere holds the rules for every package: the folder log/ is Regent's
// journal, so the standard library's log is not used (log/slog is).
var everywhere = []string{"log"}

type pkg struct {
	ImportPath string
	Standard   bool
	Imports    []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	consultSources(t)
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Standard,Imports", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bufio.NewReader(bytes.NewReader(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// consultSources reads every directory and Go file of the module, and
// go.mod, so that go test's cache keeps this package's result only while
// none of them changes: go list reads them in a process of its own, which
// the cache does not see, and a cached pass hid three imports the table
// did not allow (broker and netserver/tcp on golang.org/x/sync, netserver/tcp
// on golang.org/x/sys) through several changes.
func consultSources(t *testing.T) {
	t.Helper()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules"):
			return fs.SkipDir
		case d.IsDir():
			_, err = os.ReadDir(path)
		case strings.HasSuffix(path, ".go") || path == "go.mod":
			_, err = os.ReadFile(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// isStandard reports whether an import path belongs to the standard library:
// its first element has no dot.
func isStandard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func allowed(r rule, imp string) bool {
	for _, m := range r.may {
		if m == "*" {
			return true
		}
		full := m
		if !strings.Contains(strings.SplitN(m, "/", 2)[0], ".") {
			full = module + "/" + m
		}
		if imp == full || strings.HasPrefix(imp, full+"/") && !strings.HasPrefix(full, module) {
			return true
		}
	}
	return false
}

// ours reports whether an import path is one of this module's packages.
func ours(path string) bool {
	return path == module || strings.HasPrefix(path, module+"/")
}

// reaches returns the chain of imports by which from reaches target, walking
// through this module's packages and the standard library only; nil if it
// does not.
func reaches(graph map[string]pkg, from, target string) []string {
	seen := map[string]bool{from: true}
	var walk func(path string) []string
	walk = func(path string) []string {
		for _, imp := range graph[path].Imports {
			if imp == target {
				return []string{imp}
			}
			if seen[imp] || !(ours(imp) || isStandard(imp)) {
				continue
			}
			seen[imp] = true
			if chain := walk(imp); chain != nil {
				return append([]string{imp}, chain...)
			}
		}
		return nil
	}
	return walk(from)
}

// violations checks every package against the table and returns what breaks
// it, one line each, sorted.
func violations(pkgs []pkg) []string {
	graph := map[string]pkg{}
	for _, p := range pkgs {
		graph[p.ImportPath] = p
	}
	var out []string
	seen := map[string]bool{}
	for _, p := range pkgs {
		folder, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok {
			continue
		}
		seen[folder] = true
		r, ok := rules[folder]
		if !ok {
			out = append(out, fmt.Sprintf("%s: not in the package table (DESIGN.md, deps_test.go)", folder))
			continue
		}
		for _, imp := range p.Imports {
			for _, e := range everywhere {
				if imp == e {
					out = append(out, fmt.Sprintf("%s imports %s, which no package may", folder, imp))
				}
			}
			if isStandard(imp) || allowed(r, imp) {
				continue
			}
			out = append(out, fmt.Sprintf("%s imports %s, which the table does not allow", folder, imp))
		}
		for _, n := range r.never {
			if chain := reaches(graph, p.ImportPath, n); chain != nil {
				out = append(out, fmt.Sprintf("%s depends on %s, which it must never (through %s)",
					folder, n, strings.Join(chain, " -> ")))
			}
		}
	}
	for folder := range rules {
		if !seen[folder] {
			out = append(out, fmt.Sprintf("%s: in the package table but not in the module", folder))
		}
	}
	sort.Strings(out)
	return out
}

func TestImportRules(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, v := range violations(listPackages(t)) {
		t.Error(v)
	}
}

// TestImportRulesCatchViolations shows that the check can fail: each case
// breaks one rule and must be reported.
func TestImportRulesCatchViolations(t *testing.T) {
	base := func() []pkg {
		pkgs := []pkg{
			// the standard library and another module, as go list -deps gives them
			{ImportPath: "expvar", Standard: true, Imports: []string{"net/http"}},
			{ImportPath: "net/http", Standard: true},
			{ImportPath: "github.com/panjf2000/gnet/v2", Imports: []string{"net/http"}},
		}
		for folder := range rules {
			pkgs = append(pkgs, pkg{ImportPath: module + "/" + folder})
		}
		return pkgs
	}
	if v := violations(base()); len(v) != 0 {
		t.Fatalf("a clean house reports %v", v)
	}
	set := func(pkgs []pkg, folder string, f func(*pkg)) []pkg {
		for i := range pkgs {
			if pkgs[i].ImportPath == module+"/"+folder {
				f(&pkgs[i])
			}
		}
		return pkgs
	}
	cases := []struct {
		name string
		pkgs []pkg
		want string
	}{
		{"engine imports protocol", set(base(), "engine", func(p *pkg) { p.Imports = []string{module + "/protocol"} }),
			"engine imports " + module + "/protocol"},
		{"tcp reaches net/http through netserver", set(set(base(), "netserver/tcp", func(p *pkg) { p.Imports = []string{module + "/netserver"} }),
			"netserver", func(p *pkg) { p.Imports = []string{"expvar"} }),
			"netserver/tcp depends on net/http, which it must never (through " + module + "/netserver -> expvar -> net/http)"},
		{"httpapi reaches gnet", set(base(), "netserver/httpapi", func(p *pkg) { p.Imports = []string{"github.com/panjf2000/gnet/v2"} }),
			"netserver/httpapi depends on github.com/panjf2000/gnet/v2"},
		{"client imports engine", set(base(), "client", func(p *pkg) { p.Imports = []string{module + "/engine"} }),
			"client imports " + module + "/engine"},
		{"log imports a new module", set(base(), "log", func(p *pkg) { p.Imports = []string{"github.com/some/db"} }),
			"log imports github.com/some/db"},
		{"stdlib log", set(base(), "broker", func(p *pkg) { p.Imports = []string{"log"} }),
			"broker imports log, which no package may"},
		{"a folder outside the table", append(base(), pkg{ImportPath: module + "/misc"}), "misc: not in the package table"},
		{"a folder gone", base()[:len(base())-1], "in the package table but not in the module"},
		{"net/http through gnet is gnet's", set(base(), "netserver/tcp", func(p *pkg) { p.Imports = []string{"github.com/panjf2000/gnet/v2"} }),
			""},
	}
	for _, c := range cases {
		got := strings.Join(violations(c.pkgs), "\n")
		if c.want == "" && got != "" {
			t.Errorf("%s: want no report, got %q", c.name, got)
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: want a report containing %q, got %q", c.name, c.want, got)
		}
	}
}
